/**
 * Validation of call arguments, run before anything touches the database. An owner is only
 * ever a bounded string and an id only ever a scalar cast to the schema's `_id` type and sent as
 * the fresh value its BSON decodes to, so neither can be interpreted as a query operator (no
 * NoSQL injection).
 */
import { Document, Types, mongo, type Model, type Schema, type SchemaType } from 'mongoose';
import { InvalidLockArgumentError, InvalidLockOptionError } from './errors';
import { IdRefusal, freshId, obviouslyTooLarge } from './id-value';
import { MAX_TTL_MS, describeValue, validateTtl } from './options';

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
 * A first look at an `_id` argument, for a clear message before anything else runs: scalars and
 * the BSON value classes a document `_id` may legitimately be. It is no defence on its own (an
 * object can pass `instanceof ObjectId` and serialize to a query); freshId judges the value by
 * its bytes after the cast.
 */
function isScalarId(value: unknown): boolean {
  if (typeof value === 'string') return value.length > 0;
  if (typeof value === 'number') return Number.isFinite(value);
  if (typeof value === 'bigint') return true;
  // An invalid Date is sent as the epoch; a Date look-alike (a Proxy) throws here and is refused.
  if (value instanceof Date) return !Number.isNaN(Date.prototype.getTime.call(value));
  return (
    value instanceof Types.ObjectId ||
    Buffer.isBuffer(value) ||
    value instanceof Types.Buffer ||
    // A Buffer `_id` is cast by a query to a BSON Binary (and comes back from the server as one).
    value instanceof mongo.Binary ||
    value instanceof Types.UUID ||
    value instanceof Types.Decimal128
  );
}

/** Why `value` is not even shaped like an `_id` (for the message), or undefined. */
function shapeProblem(value: unknown): string | undefined {
  const oversized = obviouslyTooLarge(value);
  if (oversized) return `${describeValue(value)} ${oversized.problem}`;
  if (isScalarId(value)) return undefined;
  if (value instanceof Document || (value !== null && typeof value === 'object' && '$__' in value)) {
    return `expected the document's _id, got a Mongoose document: pass its _id (doc._id) instead.`;
  }
  return `expected the document's _id (an ObjectId, string or number), got ${describeValue(value)}.`;
}

// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type IdCaster = (model: Model<any>, id: unknown) => unknown;

/**
 * Builds the caster for one schema's `_id`. Anything not shaped like a scalar (plain objects,
 * arrays, documents, null, an oversized string) is refused before casting. The id is then cast
 * exactly as a query's filter `{ _id: id }` is cast by the model (`Query.prototype.cast`, which
 * applies the path's setters: `lowercase`, `trim`, custom `set`), because that is how the queries
 * that load and write the document see it; a lock keyed by any other spelling would not be the
 * document's lock. Last, the cast value is judged by what it serializes to and replaced by the
 * fresh value decoded from those bytes (freshId, id-value.ts): that value, and only that value,
 * is what the plugin sends (lock records, and the document load: plugin.ts). A Mixed `_id`
 * passes `{ $ne: null }` through the cast unchanged, and a forged ObjectId passes it too; both
 * stop there.
 */
export function idCaster(schema: Schema): IdCaster {
  const idPath = schema.path('_id') as SchemaType | undefined;
  if (!idPath) {
    throw new InvalidLockOptionError('(schema)', 'the schema has no _id (schema option `_id: false`); documents without an _id cannot be locked.');
  }
  // One query per model casts every id: Query.prototype.cast(model, obj) casts `obj` with the
  // model's schema and reads nothing of the query it runs on but its strict / strictQuery /
  // upsert options (none here) and the sanitizeFilter setting (read at each cast) (mongoose
  // lib/query.js, Query.prototype.cast), so it casts as the fresh `model.find({ _id: id })` of
  // each call used to, without building a Query per call. (`find` merges the filter first, which
  // copies only plain objects and arrays: refused by shapeProblem before any cast.)
  const castQueries = new WeakMap<Model<any>, { cast(model: Model<any>, obj: object): unknown }>(); // eslint-disable-line @typescript-eslint/no-explicit-any
  return (model, id) => {
    let problem: string | undefined;
    try {
      problem = shapeProblem(id);
    } catch (error) {
      problem = `expected the document's _id, got a value that throws when read (${(error as Error)?.message ?? String(error)}).`;
    }
    if (problem !== undefined) throw new InvalidLockArgumentError('id', problem);
    let cast: unknown;
    try {
      let query = castQueries.get(model);
      if (!query) castQueries.set(model, (query = model.find()));
      cast = (query.cast(model, { _id: id }) as { _id?: unknown })._id;
    } catch {
      throw new InvalidLockArgumentError('id', `${describeValue(id)} cannot be cast to this schema's _id type (${idPath.instance}).`);
    }
    const fresh = freshId(cast);
    if (fresh instanceof IdRefusal) {
      const cameFrom = cast === id ? '' : ` (cast to the schema's ${idPath.instance})`;
      throw new InvalidLockArgumentError('id', `${describeValue(id)}${cameFrom} ${fresh.problem}`);
    }
    return fresh.value;
  };
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
  /** Aborts the wait; the call then rejects with the signal's reason. */
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
