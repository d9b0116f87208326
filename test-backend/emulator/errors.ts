/** Command errors shaped like mongod's `{ ok: 0, errmsg, code, codeName }` replies. */
import type { Document } from 'bson';

export const Codes = {
  BadValue: 2,
  FailedToParse: 9,
  Unauthorized: 13,
  TypeMismatch: 14,
  InvalidLength: 16,
  InvalidOptions: 72,
  IllegalOperation: 20,
  NamespaceNotFound: 26,
  IndexNotFound: 27,
  CursorNotFound: 43,
  NamespaceExists: 48,
  CommandNotFound: 59,
  ImmutableField: 66,
  InvalidNamespace: 73,
  IndexOptionsConflict: 85,
  IndexKeySpecsConflict: 86,
  WriteConflict: 112,
  CommandFailed: 125,
  NoSuchTransaction: 251,
  TransactionCommitted: 256,
  TransactionTooOld: 225,
  OperationNotSupportedInTransaction: 263,
  ExceededTimeLimit: 262,
  MaxTimeMSExpired: 50,
  Location40324: 40324,
  InvalidPipelineOperator: 168,
  DuplicateKey: 11000,
  NotImplemented: 238,
  InvalidIdField: 53,
  ConflictingUpdateOperators: 40,
  NotSingleValueField: 54,
  CommandNotSupportedOnView: 166,
  QueryFeatureNotAllowed: 224,
  ConflictingOperationInProgress: 117,
  IncompleteTransactionHistory: 217,
  PathNotViable: 28,
  InvalidIndexSpecificationOption: 197,
  CannotCreateIndex: 67,
} as const;

const names: Record<number, string> = {};
for (const [name, code] of Object.entries(Codes)) if (!(code in names)) names[code] = name;

/** mongod's codeName: the name in error_codes.yml, or `Location<code>` for an unnamed uassert code. */
export function codeNameOf(code: number): string {
  return names[code] ?? `Location${code}`;
}

export class MongoCommandError extends Error {
  readonly code: number;
  readonly codeName: string;
  /** Extra reply fields (keyPattern, keyValue, errorLabels...). */
  readonly extra: Document;
  constructor(code: number, errmsg: string, extra: Document = {}, codeName?: string) {
    super(errmsg);
    this.code = code;
    this.codeName = codeName ?? codeNameOf(code);
    this.extra = extra;
  }
  toReply(): Document {
    return { ok: 0, errmsg: this.message, code: this.code, codeName: this.codeName, ...this.extra };
  }
  /** The shape used inside `writeErrors`. */
  toWriteError(index: number): Document {
    const { errorLabels: _labels, ...rest } = this.extra;
    return { index, code: this.code, codeName: this.codeName, errmsg: this.message, ...rest };
  }
}

export const unsupported = (what: string): MongoCommandError =>
  new MongoCommandError(Codes.NotImplemented, `${what} is not supported by the mongoose-pessimistic-lock emulator`, {}, 'NotImplemented');

export const badValue = (msg: string): MongoCommandError => new MongoCommandError(Codes.BadValue, msg);

export function writeConflict(): MongoCommandError {
  return new MongoCommandError(
    Codes.WriteConflict,
    'Write conflict during plan execution and yielding is disabled. :: Please retry your operation or multi-document transaction.',
    { errorLabels: ['TransientTransactionError'] },
  );
}

/** Converts anything thrown while executing a command (mingo errors included) into a command error. */
export function toCommandError(err: unknown): MongoCommandError {
  if (err instanceof MongoCommandError) return err;
  const msg = err instanceof Error ? err.message : String(err);
  if (/would modify the immutable field '_id'/.test(msg)) return new MongoCommandError(Codes.ImmutableField, msg);
  // mingo's wording for unknown operators, translated to the codes and messages mongod uses.
  let m = /^unregistered pipeline operator (\$\w+)\.?$/.exec(msg);
  if (m) return new MongoCommandError(Codes.Location40324, `Unrecognized pipeline stage name: '${m[1]}'`);
  m = /^unknown query operator (\$\w+)$/.exec(msg);
  if (m) return new MongoCommandError(Codes.BadValue, `unknown operator: ${m[1]}`);
  m = /^accumulator '(\$\w+)' is not registered\.?$/.exec(msg);
  if (m) return new MongoCommandError(Codes.InvalidPipelineOperator, `Unrecognized expression '${m[1]}'`);
  // DocumentSourceGroupBase::initializeFromBson (document_source_group_base.cpp): 15955.
  if (/^\$group specification must include an '_id'/.test(msg)) return new MongoCommandError(15955, 'a group specification must include an _id');
  m = /^Use of undefined variable: (\S+)$/.exec(msg);
  if (m) return new MongoCommandError(17276, `Use of undefined variable: ${m[1]}`);
  // mingo refusals of things mongod accepts (5.0+ '$'-prefixed field names in updates, '__proto__'
  // paths): not implemented here, so NotImplemented rather than a code mongod would not send.
  m = /^Dollar \(\$\) prefixed field paths is not allowed in update operations: '([^']*)'/.exec(msg);
  if (m) return unsupported(`updating the '$'-prefixed field path '${m[1]}'`);
  if (/^Accessing __proto__ is not allowed/.test(msg)) return unsupported("a field named '__proto__'");
  // Other mingo errors for bad operators/expressions: mongod answers those with BadValue-class errors.
  return new MongoCommandError(Codes.BadValue, msg);
}
