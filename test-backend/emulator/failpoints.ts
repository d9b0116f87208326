/**
 * The `failCommand` fail point, shaped as mongod's (enableTestCommands=1).
 *
 * Public interface (the core's dispatcher uses it, see hooks.ts):
 *   createFailPoints(): FailPoints
 *   failPoints.configure(cmd)            -> reply of `configureFailPoint` ({ count, ok: 1 }); throws
 *                                           MongoCommandError on bad input
 *   failPoints.intercept(ctx)            -> before executing a command: undefined (run it), or
 *                                           { kind: 'error', reply }   answer this instead of running it
 *                                           { kind: 'close' }          close the socket, no reply
 *                                           { kind: 'block', ms, then? } wait `ms`, then do `then`
 *                                                                      (error/close) or, without it, run
 *   failPoints.afterCommand(ctx, reply)  -> after executing a command: the reply with a fail-point
 *                                           `writeConcernError` (and its labels) added, when one applies
 *   errorLabelsFor(ctx, code, wcCode?)   -> the labels mongod 4.4+ itself attaches to an error
 *                                           (TransientTransactionError, RetryableWriteError)
 *
 * mongod's order inside one activation (command_helpers / service entry point): block first, then
 * close the connection, then answer the error code. `writeConcernError` is a separate activation
 * that happens after the command ran, only for commands that take a write concern.
 * `times` / `skip` only count commands the fail point matched, as in mongod.
 */
import type { Document } from 'bson';
import { MongoCommandError } from './errors';
import type { CommandContext, FailPointAction, FailPointsHook } from './hooks';
import { WriteFailPoints } from './write-failpoints';

/** What the dispatcher can tell us beyond hooks.ts's CommandContext; every field is optional. */
export interface FailPointContext extends CommandContext {
  /** `txnNumber` of the command: together with `lsid` it marks a retryable write or a transaction. */
  txnNumber?: unknown;
  /** Database the command runs against (`$db`), for `data.namespace`. */
  db?: string;
  /** The command document, for `data.namespace` (its first field names the collection). */
  command?: Document;
}

export type FailPointVerdict = FailPointAction | { kind: 'block'; ms: number; then: Exclude<FailPointAction, { kind: 'block' }> };

const FAIL_POINT_NAME = 'failCommand';
const FAILPOINT_MSG = "Failing command via 'failCommand' failpoint";
const INT32_MAX = 2 ** 31 - 1;

const Code = {
  BadValue: 2,
  Unauthorized: 13,
  TypeMismatch: 14,
  IllegalOperation: 20,
  InvalidOptions: 72,
  FailPointSetFailed: 266,
} as const;

/** Names of codes tests commonly inject; mongod names any other code `Location<code>`. */
const CODE_NAMES: Record<number, string> = {
  1: 'InternalError',
  2: 'BadValue',
  6: 'HostUnreachable',
  7: 'HostNotFound',
  8: 'UnknownError',
  11: 'UserNotFound',
  13: 'Unauthorized',
  14: 'TypeMismatch',
  20: 'IllegalOperation',
  24: 'LockTimeout',
  26: 'NamespaceNotFound',
  43: 'CursorNotFound',
  50: 'MaxTimeMSExpired',
  59: 'CommandNotFound',
  64: 'WriteConcernFailed',
  72: 'InvalidOptions',
  79: 'UnknownReplWriteConcern',
  89: 'NetworkTimeout',
  91: 'ShutdownInProgress',
  96: 'OperationFailed',
  100: 'UnsatisfiableWriteConcern',
  112: 'WriteConflict',
  133: 'FailedToSatisfyReadPreference',
  134: 'ReadConcernMajorityNotAvailableYet',
  136: 'CappedPositionLost',
  175: 'QueryPlanKilled',
  189: 'PrimarySteppedDown',
  211: 'KeyNotFound',
  234: 'RetryChangeStream',
  237: 'CursorKilled',
  239: 'SnapshotTooOld',
  246: 'SnapshotUnavailable',
  251: 'NoSuchTransaction',
  262: 'ExceededTimeLimit',
  266: 'FailPointSetFailed',
  267: 'PreparedTransactionInProgress',
  280: 'ChangeStreamFatalError',
  286: 'ChangeStreamHistoryLost',
  9001: 'SocketException',
  10107: 'NotWritablePrimary',
  11000: 'DuplicateKey',
  11600: 'InterruptedAtShutdown',
  11601: 'Interrupted',
  11602: 'InterruptedDueToReplStateChange',
  13388: 'StaleConfig',
  13435: 'NotPrimaryNoSecondaryOk',
  13436: 'NotPrimaryOrSecondary',
};

export function codeNameOf(code: number): string {
  return CODE_NAMES[code] ?? `Location${code}`;
}

/** mongod's RetriableError category: retryable writes may be retried after these. */
const RETRIABLE_CODES = new Set([6, 7, 89, 91, 189, 262, 9001, 10107, 11600, 11602, 13435, 13436]);
/** Codes after which the whole transaction may be retried (besides retriable/NoSuchTransaction). */
const TRANSIENT_TXN_CODES = new Set([24, 112, 239, 246, 267]);
/** Commands that are retryable writes when sent with lsid + txnNumber outside a transaction. */
const RETRYABLE_WRITE_COMMANDS = new Set(['insert', 'update', 'delete', 'findAndModify', 'findandmodify']);
const TXN_END_COMMANDS = new Set(['commitTransaction', 'abortTransaction']);
/**
 * Commands that accept a write concern; only these get a fail-point writeConcernError
 * (mongod checks `invocation->supportsWriteConcern()`).
 */
export const WRITE_CONCERN_COMMANDS = new Set([
  'insert', 'update', 'delete', 'findAndModify', 'findandmodify', 'commitTransaction', 'abortTransaction',
  'create', 'drop', 'dropDatabase', 'createIndexes', 'dropIndexes', 'renameCollection', 'collMod',
  'bulkWrite', 'setFeatureCompatibilityVersion',
]);

/** The `data` fields we implement; anything else is rejected at configure time, never ignored. */
const KNOWN_DATA_FIELDS = new Set([
  'failCommands', 'failAllCommands', 'errorCode', 'errorLabels', 'errorExtraInfo', 'closeConnection',
  'blockConnection', 'blockTimeMS', 'appName', 'writeConcernError', 'failInternalCommands', 'namespace',
]);

type Mode =
  | { kind: 'off' }
  | { kind: 'alwaysOn' }
  | { kind: 'times'; remaining: number }
  | { kind: 'skip'; toSkip: number }
  | { kind: 'random'; probability: number };

interface FailCommandData {
  failCommands: Set<string>;
  failAllCommands: boolean;
  errorCode?: number;
  errorLabels?: string[];
  errorExtraInfo?: Document;
  closeConnection: boolean;
  blockTimeMS?: number;
  appName?: string;
  writeConcernError?: Document;
  namespace?: string;
}

function fail(code: number, errmsg: string): never {
  throw new MongoCommandError(code, errmsg, {}, codeNameOf(code));
}

function isNumber(v: unknown): boolean {
  if (typeof v === 'number') return true;
  const t = (v as { _bsontype?: string } | null)?._bsontype;
  return t === 'Int32' || t === 'Double' || t === 'Long' || t === 'Decimal128';
}

function toNumber(v: unknown): number {
  return typeof v === 'number' ? v : Number((v as { toString(): string }).toString());
}

function integerField(owner: string, name: string, v: unknown): number {
  if (!isNumber(v)) fail(Code.TypeMismatch, `'${owner}.${name}' must be a number`);
  const n = toNumber(v);
  if (!Number.isInteger(n)) fail(Code.BadValue, `'${owner}.${name}' must be an integer, got ${n}`);
  return n;
}

function boolField(name: string, v: unknown): boolean {
  if (typeof v !== 'boolean') fail(Code.TypeMismatch, `'data.${name}' must be a boolean`);
  return v;
}

function parseMode(mode: unknown): Mode {
  if (mode === undefined) fail(Code.IllegalOperation, "When setting a failpoint, you must supply a 'mode'");
  if (typeof mode === 'string') {
    if (mode === 'off') return { kind: 'off' };
    if (mode === 'alwaysOn') return { kind: 'alwaysOn' };
    fail(Code.BadValue, `unknown mode: ${mode}`);
  }
  if (mode === null || typeof mode !== 'object' || Array.isArray(mode)) fail(Code.TypeMismatch, "'mode' must be a string or JSON object");
  const m = mode as Document;
  const keys = Object.keys(m);
  // mongod reads only one of these keys; accepting both silently would hide a test's mistake (SERVER-53186).
  if (keys.length !== 1) fail(Code.BadValue, `'mode' must have exactly one of 'times', 'skip', 'activationProbability' (got ${JSON.stringify(keys)})`);
  if ('times' in m || 'skip' in m) {
    const key = 'times' in m ? 'times' : 'skip';
    const n = integerField('mode', key, m[key]);
    if (n < 0) fail(Code.BadValue, `'${key}' option to 'mode' must be positive`);
    if (n > INT32_MAX) fail(Code.BadValue, `'${key}' option to 'mode' is too large`);
    return key === 'times' ? { kind: 'times', remaining: n } : { kind: 'skip', toSkip: n };
  }
  if ('activationProbability' in m) {
    const p = m.activationProbability;
    if (!isNumber(p)) fail(Code.TypeMismatch, "the 'activationProbability' option to 'mode' must be a double between 0 and 1");
    const n = toNumber(p);
    if (!(n >= 0 && n <= 1)) fail(Code.BadValue, `activationProbability must be between 0.0 and 1.0; found ${n}`);
    return { kind: 'random', probability: n };
  }
  fail(Code.BadValue, "'mode' must be one of 'off', 'alwaysOn', 'times', and 'activationProbability'");
}

function parseData(raw: unknown): FailCommandData {
  if (raw === undefined) raw = {};
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) fail(Code.TypeMismatch, "the 'data' option must be a JSON object");
  const d = raw as Document;
  const unknown = Object.keys(d).filter((k) => !KNOWN_DATA_FIELDS.has(k));
  if (unknown.length) {
    fail(Code.BadValue, `failCommand data field(s) ${unknown.map((k) => `'${k}'`).join(', ')} are not supported by the mongoose-pessimistic-lock emulator`);
  }
  const out: FailCommandData = { failCommands: new Set(), failAllCommands: false, closeConnection: false };
  if (d.failCommands !== undefined) {
    if (!Array.isArray(d.failCommands) || d.failCommands.some((c) => typeof c !== 'string')) {
      fail(Code.TypeMismatch, "'data.failCommands' must be an array of command names");
    }
    out.failCommands = new Set(d.failCommands as string[]);
  }
  if (d.failAllCommands !== undefined) out.failAllCommands = boolField('failAllCommands', d.failAllCommands);
  if (d.errorCode !== undefined) out.errorCode = integerField('data', 'errorCode', d.errorCode);
  if (d.errorLabels !== undefined) {
    if (!Array.isArray(d.errorLabels) || d.errorLabels.some((l) => typeof l !== 'string')) {
      fail(Code.TypeMismatch, "'data.errorLabels' must be an array of strings");
    }
    out.errorLabels = [...(d.errorLabels as string[])];
  }
  if (d.errorExtraInfo !== undefined) {
    if (d.errorExtraInfo === null || typeof d.errorExtraInfo !== 'object' || Array.isArray(d.errorExtraInfo)) {
      fail(Code.TypeMismatch, "'data.errorExtraInfo' must be an object");
    }
    out.errorExtraInfo = d.errorExtraInfo as Document;
  }
  if (d.closeConnection !== undefined) out.closeConnection = boolField('closeConnection', d.closeConnection);
  const block = d.blockConnection === undefined ? false : boolField('blockConnection', d.blockConnection);
  if (block) {
    // mongod checks these when the fail point fires; checking here makes the mistake visible at once.
    if (d.blockTimeMS === undefined) fail(Code.InvalidOptions, "must specify 'blockTimeMS' when 'blockConnection' is true");
    const ms = integerField('data', 'blockTimeMS', d.blockTimeMS);
    if (ms < 0) fail(Code.InvalidOptions, "'blockTimeMS' must be non-negative");
    out.blockTimeMS = ms;
  }
  if (d.appName !== undefined) {
    if (typeof d.appName !== 'string') fail(Code.TypeMismatch, "'data.appName' must be a string");
    out.appName = d.appName;
  }
  if (d.writeConcernError !== undefined) {
    if (d.writeConcernError === null || typeof d.writeConcernError !== 'object' || Array.isArray(d.writeConcernError)) {
      fail(Code.TypeMismatch, "'data.writeConcernError' must be an object");
    }
    out.writeConcernError = d.writeConcernError as Document;
  }
  // The emulator has no internal clients (no replication, no sharding), so this flag cannot change anything.
  if (d.failInternalCommands !== undefined) boolField('failInternalCommands', d.failInternalCommands);
  if (d.namespace !== undefined) {
    if (typeof d.namespace !== 'string' || !d.namespace.includes('.')) fail(Code.BadValue, "'data.namespace' must be a '<db>.<collection>' string");
    out.namespace = d.namespace;
  }
  return out;
}

/** `<db>.<collection>` a command works on, when its first field is a collection name. */
function commandNamespace(ctx: FailPointContext): string | undefined {
  if (!ctx.db || !ctx.command) return undefined;
  const target = ctx.command[ctx.commandName];
  return typeof target === 'string' ? `${ctx.db}.${target}` : undefined;
}

function isRetryableWrite(ctx: FailPointContext): boolean {
  return ctx.lsid !== undefined && ctx.txnNumber !== undefined && !ctx.inTransaction && RETRYABLE_WRITE_COMMANDS.has(ctx.commandName);
}

/**
 * Labels mongod 4.4+ attaches to an error reply by itself (when no fail point overrides them):
 * TransientTransactionError inside a transaction, RetryableWriteError for retryable writes and
 * for commitTransaction/abortTransaction. The driver retries on these labels, not on codes.
 */
export function errorLabelsFor(ctx: FailPointContext, code: number | undefined, wcCode?: number): string[] {
  const labels: string[] = [];
  const endsTxn = TXN_END_COMMANDS.has(ctx.commandName);
  if ((ctx.inTransaction || endsTxn) && code !== undefined) {
    let transient = TRANSIENT_TXN_CODES.has(code);
    if (endsTxn) transient ||= code === 251 && wcCode === undefined;
    else transient ||= code === 251 || RETRIABLE_CODES.has(code);
    if (transient) labels.push('TransientTransactionError');
  }
  if (isRetryableWrite(ctx) || (endsTxn && ctx.txnNumber !== undefined)) {
    if ((code !== undefined && RETRIABLE_CODES.has(code)) || (wcCode !== undefined && RETRIABLE_CODES.has(wcCode))) {
      labels.push('RetryableWriteError');
    }
  }
  return labels;
}

export class FailPoints implements FailPointsHook {
  /** onPrimaryTransactionalWrite and failGetMoreAfterCursorCheckout (write-failpoints.ts). */
  readonly writes = new WriteFailPoints();
  private mode: Mode = { kind: 'off' };
  private data: FailCommandData = parseData({});
  /** How many times the fail point fired since the server started (mongod's `count`). */
  private timesEntered = 0;

  configure(cmd: Document): Document {
    const name = cmd.configureFailPoint;
    if (cmd.$db !== undefined && cmd.$db !== 'admin') {
      fail(Code.Unauthorized, 'configureFailPoint may only be run against the admin database.');
    }
    if (typeof name !== 'string') fail(Code.TypeMismatch, "'configureFailPoint' must name a fail point (a string)");
    if (WriteFailPoints.handles(name)) return this.writes.configure(name, cmd);
    if (name !== FAIL_POINT_NAME) {
      // mongod answers FailPointSetFailed for names it does not know; this emulator knows only failCommand.
      fail(Code.FailPointSetFailed, `${name} not found (the mongoose-pessimistic-lock emulator implements only failCommand, onPrimaryTransactionalWrite and failGetMoreAfterCursorCheckout)`);
    }
    const mode = parseMode(cmd.mode);
    const data = parseData(cmd.data);
    this.mode = mode;
    this.data = data;
    return { count: this.timesEntered, ok: 1 };
  }

  intercept(ctx: FailPointContext): FailPointVerdict | undefined {
    const d = this.data;
    const acts = d.closeConnection || d.blockTimeMS !== undefined || d.errorCode !== undefined;
    if (!acts || !this.matches(ctx) || !this.fire()) return undefined;

    let outcome: Exclude<FailPointAction, { kind: 'block' }> | undefined;
    if (d.closeConnection) outcome = { kind: 'close' };
    else if (d.errorCode !== undefined) outcome = { kind: 'error', reply: this.errorReply(ctx, d.errorCode) };
    if (d.blockTimeMS !== undefined) return outcome ? { kind: 'block', ms: d.blockTimeMS, then: outcome } : { kind: 'block', ms: d.blockTimeMS };
    return outcome;
  }

  /** Adds the fail point's writeConcernError to the reply of a command that ran (mongod: instead of waiting for write concern). */
  afterCommand(ctx: FailPointContext, reply: Document): Document {
    const wce = this.data.writeConcernError;
    if (wce === undefined || !WRITE_CONCERN_COMMANDS.has(ctx.commandName)) return reply;
    if (!this.matches(ctx) || !this.fire()) return reply;
    const out: Document = { ...reply, writeConcernError: wce };
    const labels = this.data.errorLabels ?? this.mergeLabels(reply, ctx, typeof wce.code === 'number' ? wce.code : undefined);
    if (labels.length) out.errorLabels = labels;
    else delete out.errorLabels;
    return out;
  }

  private mergeLabels(reply: Document, ctx: FailPointContext, wcCode: number | undefined): string[] {
    const existing: string[] = Array.isArray(reply.errorLabels) ? reply.errorLabels : [];
    const code = reply.ok === 0 && typeof reply.code === 'number' ? reply.code : undefined;
    return [...new Set([...existing, ...errorLabelsFor(ctx, code, wcCode)])];
  }

  private errorReply(ctx: FailPointContext, code: number): Document {
    const reply: Document = { ok: 0, errmsg: FAILPOINT_MSG, code, codeName: codeNameOf(code), ...(this.data.errorExtraInfo ?? {}) };
    // Labels given in the fail point replace the ones mongod would compute (errorLabelsOverride).
    const labels = this.data.errorLabels ?? errorLabelsFor(ctx, code);
    if (labels.length) reply.errorLabels = labels;
    return reply;
  }

  /** mongod's shouldActivateFailCommandFailPoint: the predicate checked before the mode is consulted. */
  private matches(ctx: FailPointContext): boolean {
    if (this.mode.kind === 'off') return false;
    if (ctx.commandName === 'configureFailPoint') return false; // never failed, even if listed
    const d = this.data;
    if (d.appName !== undefined && ctx.appName !== d.appName) return false;
    if (d.namespace !== undefined && commandNamespace(ctx) !== d.namespace) return false;
    return d.failAllCommands || d.failCommands.has(ctx.commandName);
  }

  /** Consults the mode for a matching command; counts and consumes an activation when it fires. */
  private fire(): boolean {
    const m = this.mode;
    switch (m.kind) {
      case 'off':
        return false;
      case 'alwaysOn':
        break;
      case 'times':
        if (m.remaining <= 0) {
          this.mode = { kind: 'off' };
          return false;
        }
        m.remaining -= 1;
        if (m.remaining === 0) this.mode = { kind: 'off' };
        break;
      case 'skip':
        if (m.toSkip > 0) {
          m.toSkip -= 1;
          return false;
        }
        break;
      case 'random':
        if (!(Math.random() < m.probability)) return false;
        break;
    }
    this.timesEntered += 1;
    return true;
  }
}

export function createFailPoints(): FailPoints {
  return new FailPoints();
}
