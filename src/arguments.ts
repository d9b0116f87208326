/**
 * Validation of call arguments, run before anything touches the database. An owner is only
 * ever a bounded string and an id only ever a scalar cast to the schema's `_id` type and sent as
 * the fresh value its BSON decodes to, so neither can be interpreted as a query operator (no
 * NoSQL injection).
 */
import { Document, Types, mongo, type Model, type Schema, type SchemaType } from 'mongoose';
import { InvalidLockArgumentError, InvalidLockOptionError } from './errors';
import { plainObjectIdBytes } from './id-key';
import { ACCEPTED_TYPES, BSON_TYPE, IdRefusal, MAX_INT64, freshId, int64RangeProblem, obviouslyTooLarge, type FreshId } from './id-value';
import { MAX_TTL_MS, describeValue, validateTtl } from './options';

/** Longest owner accepted, in characters (an owner is a session id, a worker name: never a document). */
export const MAX_OWNER_LENGTH = 512;
/** Longest display label (`lock(id, owner, { label })`), in UTF-16 code units. */
export const MAX_LABEL_LENGTH = 100;

/**
 * Characters a label may not contain: control characters (C0, DEL, C1: they break logs and
 * HTTP headers), line and paragraph separators, and the bidirectional overrides and isolates
 * that make text display in an order other than it is stored ("Trojan Source" spoofing).
 */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const FORBIDDEN_IN_LABEL = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/;
/** A UTF-16 surrogate without its partner: not valid Unicode, so not storable as UTF-8. */
const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;

/**
 * Validates a display label. Labels are shown to other users ("being edited by Alice"), so they
 * are bounded, printable, well-formed text; they are stored in clear, so never put a session id
 * or a secret in one.
 */
export function validateLabel(label: unknown): string {
  if (typeof label !== 'string') throw new InvalidLockOptionError('label', `expected a short display name such as a user's name, got ${describeValue(label)}.`);
  if (label.trim().length === 0) throw new InvalidLockOptionError('label', 'expected a non-empty display name, got an empty or blank string.');
  if (label.length > MAX_LABEL_LENGTH) throw new InvalidLockOptionError('label', `expected at most ${MAX_LABEL_LENGTH} characters, got ${label.length}.`);
  if (FORBIDDEN_IN_LABEL.test(label)) {
    throw new InvalidLockOptionError('label', 'control characters, line separators and bidirectional overrides are not allowed in a label.');
  }
  if (LONE_SURROGATE.test(label)) throw new InvalidLockOptionError('label', 'expected well-formed Unicode text (it contains a lone surrogate).');
  return label;
}

/**
 * Whether `value` is a label `lock(id, owner, { label })` accepts: for applications that take
 * display names from users (a sign-in form) and want to refuse the ones the plugin would refuse,
 * with their own message, before any lock call.
 */
export function isValidLockLabel(value: unknown): value is string {
  try {
    validateLabel(value);
    return true;
  } catch {
    return false;
  }
}

export function validateOwner(owner: unknown): string {
  if (typeof owner !== 'string') {
    throw new InvalidLockArgumentError('owner', `expected a non-empty string such as a session id, got ${describeValue(owner)}.`);
  }
  if (owner.length === 0) throw new InvalidLockArgumentError('owner', 'expected a non-empty string such as a session id, got an empty string.');
  if (owner.length > MAX_OWNER_LENGTH) {
    throw new InvalidLockArgumentError('owner', `expected at most ${MAX_OWNER_LENGTH} characters, got ${owner.length}.`);
  }
  // UTF-8 (the hash's input and BSON's string encoding) turns every lone surrogate into U+FFFD,
  // so owners differing only there would be one owner: refuse them instead.
  if (LONE_SURROGATE.test(owner)) {
    throw new InvalidLockArgumentError('owner', 'contains a lone UTF-16 surrogate (not valid Unicode); use a well-formed string such as a session id.');
  }
  return owner;
}

/**
 * What an `_id` argument claims to be, by its JavaScript type or class, as the BSON element types
 * it may serialize to (js-bson writes a number as an int32 when it is an integer in the int32
 * range, else as a double), or undefined for anything that is no scalar id (objects, arrays,
 * documents, null, booleans, an invalid Date, a bigint or Long outside int64). A first look for
 * a clear message; it is no defence on its own (an object can pass `instanceof ObjectId` and
 * serialize to a query), so the value is then judged by what it serializes to (castIdOnce).
 */
function claimedTypes(value: unknown): ReadonlySet<number> | undefined {
  if (typeof value === 'string') return value.length > 0 ? STRING : undefined;
  if (typeof value === 'number') return Number.isFinite(value) ? NUMBER : undefined;
  if (typeof value === 'bigint') return int64RangeProblem(value) ? undefined : INT64;
  // An invalid Date is sent as the epoch; a Date look-alike (a Proxy) throws here and is refused.
  if (value instanceof Date) return Number.isNaN(Date.prototype.getTime.call(value)) ? undefined : DATE;
  if (value instanceof Types.ObjectId) return OBJECT_ID;
  // An ObjectId of another copy of js-bson (an app's own `bson`, a second install): Mongoose's cast
  // takes it as one by its tag (lib/cast/objectid.js, isBsonType reads `_bsontype`), and so does
  // the serializer. The tag only names the claim: freshScalarId then judges the value by the BSON
  // it serializes to (an ObjectId of 12 bytes, or refused before anything is sent).
  if ((value as { _bsontype?: unknown } | null)?._bsontype === 'ObjectId') return OBJECT_ID;
  // A Buffer `_id` is cast by a query to a BSON Binary (and comes back from the server as one); a
  // UUID is a Binary of subtype 4.
  if (Buffer.isBuffer(value) || value instanceof Types.Buffer || value instanceof mongo.Binary || value instanceof Types.UUID) return BINARY;
  if (value instanceof Types.Decimal128) return DECIMAL;
  // The driver's int64 (how it reads back an int64 beyond 2^53), and the explicit int32 / double
  // wrappers. An unsigned Long above 2^63 - 1 is sent as its 64 bits, a negative int64: another id.
  if (value instanceof mongo.Long) return value.unsigned && value.high < 0 ? undefined : INT64;
  if (value instanceof mongo.Int32) return INT32;
  if (value instanceof mongo.Double) return DOUBLE;
  return undefined;
}

const STRING: ReadonlySet<number> = new Set([BSON_TYPE.string]);
const NUMBER: ReadonlySet<number> = new Set([BSON_TYPE.int32, BSON_TYPE.double]);
const INT32: ReadonlySet<number> = new Set([BSON_TYPE.int32]);
const DOUBLE: ReadonlySet<number> = new Set([BSON_TYPE.double]);
const INT64: ReadonlySet<number> = new Set([BSON_TYPE.int64]);
const DATE: ReadonlySet<number> = new Set([BSON_TYPE.date]);
const OBJECT_ID: ReadonlySet<number> = new Set([BSON_TYPE.objectId]);
const BINARY: ReadonlySet<number> = new Set([BSON_TYPE.binary]);
const DECIMAL: ReadonlySet<number> = new Set([BSON_TYPE.decimal128]);
const ANY_ID: ReadonlySet<number> = new Set(ACCEPTED_TYPES.keys());

/**
 * The BSON types Mongoose's cast of a schema's `_id` produces, by the SchemaType's `instance`
 * (the same names in Mongoose 8 and 9): ObjectId casts to an ObjectId, String to a string, Number
 * to a number (an int32 or a double once serialized), Int32 to an int32 (a number in range),
 * Double to a BSON Double, Date to a Date, Buffer and UUID to binary data, Decimal128 to a
 * Decimal128, BigInt to a bigint (an int64). Mixed (and any other type) keeps the value as given:
 * any scalar id type.
 */
const SCHEMA_ID_TYPES: Readonly<Record<string, ReadonlySet<number>>> = {
  ObjectId: OBJECT_ID,
  String: STRING,
  Number: NUMBER,
  Int32: INT32,
  Double: DOUBLE,
  Date: DATE,
  Buffer: BINARY,
  UUID: BINARY,
  Decimal128: DECIMAL,
  BigInt: INT64,
};

/** Why `value` is not even shaped like an `_id` (for the message), or undefined. */
function shapeProblem(value: unknown): string | undefined {
  const oversized = obviouslyTooLarge(value) ?? int64RangeProblem(value);
  if (oversized) return `${describeValue(value)} ${oversized.problem}`;
  if (claimedTypes(value)) return undefined;
  if (value instanceof Document || (value !== null && typeof value === 'object' && '$__' in value)) {
    return `expected the document's _id, got a Mongoose document: pass its _id (doc._id) instead.`;
  }
  if (value instanceof mongo.Long) return `expected the document's _id, got an unsigned Long above ${MAX_INT64}, which MongoDB would store as a negative int64 (another document's _id).`;
  return `expected the document's _id (an ObjectId, string or number), got ${describeValue(value)}.`;
}

/** An `_id` argument, cast: what the plugin sends, and what it loads the document by. */
export interface CastId {
  /**
   * The id as the schema's `_id` casts it (setters applied once), as the fresh value decoded from
   * its BSON: the value of the lock record's `_id` and of every command about it.
   */
  documentId: unknown;
  /**
   * The caller's id as the fresh value decoded from its BSON, before Mongoose's cast: loading the
   * document by it (`Model.findById`, `Model.find({ _id: { $in } })`) casts it once more, setters
   * included, exactly as `documentId` was cast, so even a setter that is not idempotent
   * (`v => 'tenant:' + v`) finds the document it names, as `findById(id)` does.
   */
  loadId: unknown;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type IdCaster = (model: Model<any>, id: unknown) => unknown;

export interface IdCasters {
  /** The id as the plugin sends it (`CastId.documentId`). */
  castId: IdCaster;
  /** Both values (for the calls that load the document). */
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  castIdForLoad: (model: Model<any>, id: unknown) => CastId;
}

/**
 * Builds the casters for one schema's `_id`. In order, each step reading only what the one
 * before produced, so the caller's value is read (and serialized) exactly once:
 *  1. Shape: a scalar id (claimedTypes), else InvalidLockArgumentError (plain objects, arrays,
 *     documents, null, an oversized string, a bigint outside int64).
 *  2. Its BSON: serialized once and replaced by the fresh value decoded from those bytes
 *     (id-value.ts); the element type must be the one its class claims (an object that passes
 *     `instanceof ObjectId` must serialize to an ObjectId, a Date to a date, ...).
 *  3. The cast of that fresh value, exactly as a query's filter `{ _id: id }` is cast by the model
 *     (`Query.prototype.cast`, which applies the path's setters: `lowercase`, `trim`, custom
 *     `set`), because that is how the queries that load and write the document see it; a lock
 *     keyed by any other spelling would not be the document's lock.
 *  4. The cast value's BSON: it must be of a type the schema's `_id` casts to (SCHEMA_ID_TYPES;
 *     any scalar for Mixed), and it is replaced by the fresh value decoded from its bytes. That
 *     value, and only that value, is what the plugin sends.
 * The fresh value of step 2 is what the document is loaded by (CastId.loadId).
 */
export function idCaster(schema: Schema): IdCasters {
  const idPath = schema.path('_id') as SchemaType | undefined;
  if (!idPath) {
    throw new InvalidLockOptionError('(schema)', 'the schema has no _id (schema option `_id: false`); documents without an _id cannot be locked.');
  }
  const schemaTypes = SCHEMA_ID_TYPES[idPath.instance] ?? ANY_ID;
  const refuse = (problem: string) => new InvalidLockArgumentError('id', problem);
  // One query per model casts every id: Query.prototype.cast(model, obj) casts `obj` with the
  // model's schema and reads nothing of the query it runs on but its strict / strictQuery /
  // upsert options (none here) and the sanitizeFilter setting (read at each cast) (mongoose
  // lib/query.js, Query.prototype.cast), so it casts as the fresh `model.find({ _id: id })` of
  // each call used to, without building a Query per call. (`find` merges the filter first, which
  // copies only plain objects and arrays: refused by shapeProblem before any cast.)
  const castQueries = new WeakMap<Model<any>, { cast(model: Model<any>, obj: object): unknown }>(); // eslint-disable-line @typescript-eslint/no-explicit-any
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  const castIdForLoad = (model: Model<any>, id: unknown): CastId => {
    // 1-2 for a plain ObjectId (the common case): the fresh value is the ObjectId of the 12 bytes
    // js-bson would write for it (id-key.ts, plainObjectIdBytes), without serializing it.
    const raw = freshPlainObjectId(id) ?? freshScalarId(id);
    if (raw instanceof IdRefusal) throw refuse(`${describeValue(id)} ${raw.problem}`);
    // 3. Mongoose's cast of the fresh value.
    let cast: unknown;
    try {
      let query = castQueries.get(model);
      if (!query) castQueries.set(model, (query = model.find()));
      cast = (query.cast(model, { _id: raw.value }) as { _id?: unknown })._id;
    } catch {
      throw refuse(`${describeValue(id)} cannot be cast to this schema's _id type (${idPath.instance}).`);
    }
    // 4. What the cast serializes to, of the schema's type (the same value needs no second round trip).
    // (A Long the cast kept, as a Mixed `_id` does, is sent as its fresh value: a bigint, as every int64 id.)
    const sent = cast === raw.value && schemaTypes.has(raw.type) && !(cast instanceof mongo.Long) ? raw : freshId(cast, schemaTypes, `this schema's _id type (${idPath.instance})`);
    if (sent instanceof IdRefusal) {
      const cameFrom = cast === raw.value ? '' : ` (cast to the schema's ${idPath.instance})`;
      throw refuse(`${describeValue(id)}${cameFrom} ${sent.problem}`);
    }
    return { documentId: sent.value, loadId: raw.value };
  };
  return { castId: (model, id) => castIdForLoad(model, id).documentId, castIdForLoad };
}

/** Steps 1 and 2 of idCaster: the shape, then the fresh value decoded from the caller's BSON. */
function freshScalarId(id: unknown): FreshId | IdRefusal {
  let problem: string | undefined;
  let claimed: ReadonlySet<number> | undefined;
  try {
    problem = shapeProblem(id);
    claimed = claimedTypes(id);
  } catch (error) {
    problem = `expected the document's _id, got a value that throws when read (${(error as Error)?.message ?? String(error)}).`;
  }
  if (problem !== undefined || claimed === undefined) throw new InvalidLockArgumentError('id', problem ?? `expected the document's _id, got ${describeValue(id)}.`);
  // 2. The caller's value, serialized once; from here on only fresh values are read.
  const fresh = freshId(id, claimed, CLAIMED_NAMES.get(claimed));
  // A Long stays a Long (a fresh one, of the decoded int64): Mongoose's cast takes it as findById
  // does (a Number `_id` casts a Long to its number, lib/cast/number.js; a bigint it refuses).
  if (!(fresh instanceof IdRefusal) && typeof fresh.value === 'bigint' && typeof id !== 'bigint') return { ...fresh, value: mongo.Long.fromBigInt(fresh.value) };
  return fresh;
}

/** The size of an ObjectId's BSON value (id-value.ts, FreshId.bytes). */
const OBJECT_ID_BYTES = 12;

/** freshId's answer for a plain ObjectId, read without serializing it; undefined for any other value. */
export function freshPlainObjectId(id: unknown): FreshId | undefined {
  let bytes: Buffer | undefined;
  try {
    bytes = plainObjectIdBytes(id);
  } catch {
    return undefined; // a field that throws when read: the serializing read refuses it with a message
  }
  // `bytes` is a copy of its own (plainObjectIdBytes): nothing of the caller's is read again.
  return bytes === undefined ? undefined : { value: new mongo.ObjectId(bytes), type: BSON_TYPE.objectId, bytes: OBJECT_ID_BYTES };
}

/** How a claimed type is named in a refusal ("passes instanceof ObjectId but serializes to a string, not an ObjectId"). */
const CLAIMED_NAMES: ReadonlyMap<ReadonlySet<number>, string> = new Map([
  [STRING, 'a string'],
  [NUMBER, 'a number'],
  [INT32, 'an int32'],
  [DOUBLE, 'a double'],
  [INT64, 'an int64'],
  [DATE, 'a date (as its class claims)'],
  [OBJECT_ID, 'an ObjectId (as its class claims)'],
  [BINARY, 'binary data (as its class claims)'],
  [DECIMAL, 'a Decimal128 (as its class claims)'],
]);

/**
 * Reads an array argument (ids, documents, lockAll targets) once into a fresh array, before any
 * element is judged: `Array.isArray`, then its `length` read once and bounded by `max` before any
 * element is read, then each index read once (`value[i]`: a getter or a Proxy trap runs exactly
 * once per index). Nothing of the caller's array is used afterwards: not its own or inherited
 * `map`, `forEach` or iterator (an own property, an Array subclass), not a `length` that changes
 * (a Proxy). A hole reads as undefined, which no caller of this accepts as an element.
 */
export function readArgumentArray(value: unknown, argument: string, how: { expected: string; max: number; tooMany: (length: number) => string }): unknown[] {
  const unreadable = (error: unknown) =>
    new InvalidLockArgumentError(argument, `expected ${how.expected}, got an array that throws when read (${(error as Error)?.message ?? String(error)}).`);
  let length: unknown;
  try {
    if (!Array.isArray(value)) throw new InvalidLockArgumentError(argument, `expected ${how.expected}, got ${describeValue(value)}.`);
    length = (value as unknown[]).length;
  } catch (error) {
    if (error instanceof InvalidLockArgumentError) throw error;
    throw unreadable(error);
  }
  if (typeof length !== 'number' || !Number.isSafeInteger(length) || length < 0) throw new InvalidLockArgumentError(argument, `expected ${how.expected}, got an array whose length is ${describeValue(length)}.`);
  if (length > how.max) throw new InvalidLockArgumentError(argument, how.tooMany(length));
  const copy: unknown[] = new Array<unknown>(length);
  try {
    for (let i = 0; i < length; i++) copy[i] = (value as unknown[])[i];
  } catch (error) {
    throw unreadable(error);
  }
  return copy;
}

/** Per-call options of `Model.lock`, `Model.tryLock`, `Model.acquireLock` and `Model.withLock`. */
export interface LockCallOptions {
  /** Overrides the plugin's ttl for this acquisition, in milliseconds. */
  ttl?: number;
  /**
   * How long to wait for the lock to become free, in milliseconds (default 0: fail at once).
   * Not accepted by `tryLock`.
   */
  wait?: number;
  /**
   * Ends the wait early. A timeout (`AbortSignal.timeout(ms)`: a reason named TimeoutError) ends
   * it as `wait` running out does: LockedError, with the signal's reason as `cause`; it never
   * prevents the first attempt. Any other abort rejects with the signal's reason, as fetch does.
   */
  signal?: AbortSignal;
  /** `acquireLock` / `withLock` only: renew the lock before it expires while held (default true). */
  autoExtend?: boolean;
  /**
   * A display label for the holder ("Alice"), stored in clear beside the hashed owner and shown
   * by `getLock`, `lockStatus`, `listLocks` and `LockedError.label`. At most 100 characters, no
   * control characters. Never put a session id or a secret in it.
   */
  label?: string;
  /**
   * `lock` only: a lock ticket (`doc.heldLock().ticket`) from an earlier request. Continues that
   * acquisition if it is still current and held by `owner`, and extends it to `ttl` from now
   * (without `ttl`: to the ttl the acquisition was taken with, as `doc.extendLock()` does);
   * otherwise throws LockExpiredError or LockNotHeldError (`'taken_over'`, `'released'`). Never
   * takes a lock that is not that acquisition. Not combinable with `wait`, `signal` or `label`.
   */
  resume?: string;
}

/** The options of `Model.lock`: take a lock (`ttl`, `wait`, `signal`, `label`) or resume one (`resume`, `ttl`). */
export type LockOptions = Pick<LockCallOptions, 'ttl' | 'wait' | 'signal' | 'label' | 'resume'>;

export interface ResolvedCallOptions {
  ttl: number;
  /** Whether the call gave its own `ttl` (a resume without one keeps the acquisition's). */
  ttlGiven: boolean;
  wait: number;
  signal: AbortSignal | undefined;
  autoExtend: boolean;
  label: string | null;
  /** The raw ticket; it is read once the id is cast (it is bound to the document). */
  resume: unknown;
}

/** Validates per-call options; `allowed` names the options the calling function accepts. */
export function validateLockCallOptions(options: unknown, defaultTtl: number, allowed: readonly (keyof LockCallOptions)[] = ['ttl', 'wait', 'signal', 'label']): ResolvedCallOptions {
  const resolved: ResolvedCallOptions = { ttl: defaultTtl, ttlGiven: false, wait: 0, signal: undefined, autoExtend: true, label: null, resume: undefined };
  if (options === undefined) return resolved;
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new InvalidLockOptionError('(lock options)', `expected an object such as { ttl: 30000 }, got ${describeValue(options)}.`);
  }
  for (const key of Object.keys(options)) {
    if (!(allowed as string[]).includes(key)) throw new InvalidLockOptionError(key, `unknown option here. Known options: ${allowed.join(', ')}.`);
  }
  // Own properties only: the keys were checked with Object.keys, so an inherited `wait` (say,
  // from Object.create({ wait })) must not slip past the allow-list.
  const own = (key: string): unknown => (Object.prototype.hasOwnProperty.call(options, key) ? (options as Record<string, unknown>)[key] : undefined);
  const [ttl, wait, signal, autoExtend, label, resume] = ['ttl', 'wait', 'signal', 'autoExtend', 'label', 'resume'].map(own);
  if (ttl !== undefined) {
    resolved.ttl = validateTtl(ttl);
    resolved.ttlGiven = true;
  }
  if (wait !== undefined) {
    if (typeof wait !== 'number' || !Number.isInteger(wait) || wait < 0 || wait > MAX_TTL_MS) {
      throw new InvalidLockOptionError('wait', `expected a whole number of milliseconds from 0 to ${MAX_TTL_MS}, got ${describeValue(wait)}.`);
    }
    resolved.wait = wait;
  }
  if (signal !== undefined) {
    if (!(signal instanceof AbortSignal)) throw new InvalidLockOptionError('signal', `expected an AbortSignal, got ${describeValue(signal)}.`);
    resolved.signal = signal;
  }
  if (autoExtend !== undefined) {
    if (typeof autoExtend !== 'boolean') throw new InvalidLockOptionError('autoExtend', `expected true or false, got ${describeValue(autoExtend)}.`);
    resolved.autoExtend = autoExtend;
  }
  if (label !== undefined) resolved.label = validateLabel(label);
  if (resume !== undefined) {
    for (const other of ['wait', 'signal', 'label'] as const) {
      if ((options as Record<string, unknown>)[other] !== undefined) {
        throw new InvalidLockOptionError('resume', `cannot be combined with "${other}": a resume continues an acquisition (it never waits, and keeps its label).`);
      }
    }
    resolved.resume = resume;
  }
  return resolved;
}
