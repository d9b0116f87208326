/** The plugin's options: their types, defaults and validation (run once, when `schema.plugin` runs). */
import { InvalidLockOptionError } from './errors';
import { MIN_TTL_MS } from './lease';

/**
 * The options of `schema.plugin(lockPlugin, options)`: every one optional; unknown or invalid
 * ones throw InvalidLockOptionError when the plugin is applied.
 */
export interface LockPluginOptions {
  /** How long a lock lasts unless renewed or released, in milliseconds. Default 30 000. */
  ttl?: number;
  /**
   * How long a released or expired lock record is kept before the TTL index deletes it, in
   * milliseconds. The record carries the document's fencing counter; see README, Fencing.
   * Default 86 400 000 (one day). Expired locks are free at once whatever this is.
   */
  purgeAfter?: number;
  /**
   * Name of the sibling collection that holds the locks.
   * Default: the model's collection name followed by `.locks` (e.g. `workitems.locks`).
   */
  collection?: string;
  /**
   * How owners are stored in the lock collection. `'hash'` (default) stores SHA-256 of the owner,
   * or HMAC-SHA-256 when `ownerSecret` is set, so a leaked lock collection leaks no session ids.
   * `'plain'` stores the owner as given (handy when debugging; not for session ids).
   */
  ownerStorage?: 'hash' | 'plain';
  /** Secret key for HMAC-SHA-256 of owners (with `ownerStorage: 'hash'`). At least 16 bytes. */
  ownerSecret?: string | Buffer;
  /**
   * When true, saving an existing document requires that the document carries a current lock
   * (it came from `Model.lock`). Default false: unlocked documents may be saved while nobody
   * else holds a lock on them.
   */
  requireLock?: boolean;
  /**
   * `'auto'` (default): on replica sets and sharded clusters `saveAndUnlock()` checks the lock,
   * writes the document and releases the lock in one transaction, so no takeover can slip
   * between check and write. `'never'`: always use separate commands (see README, Limits).
   */
  transactions?: 'auto' | 'never';
  /**
   * How `Model.lock(id, owner, { wait })` learns that a lock was released. `'auto'` (default):
   * a change stream on the lock collection where the deployment supports them, polling
   * otherwise. `'never'`: always poll (for users without the changeStream privilege).
   */
  changeStreams?: 'auto' | 'never';
  /** Mongoose's own registration option (`mongoose.plugin(lockPlugin, { deduplicate: true })`); ignored by the plugin. */
  deduplicate?: boolean;
  /** Mongoose's own registration option (`mongoose.plugin(lockPlugin, { tags })`, matched against `pluginTags`); ignored by the plugin. */
  tags?: string[];
}

export interface ResolvedLockOptions {
  ttl: number;
  purgeAfter: number;
  collection: string | undefined;
  ownerStorage: 'hash' | 'plain';
  ownerSecret: Buffer | undefined;
  requireLock: boolean;
  transactions: 'auto' | 'never';
  changeStreams: 'auto' | 'never';
}

/** The default `ttl`: 30 seconds. */
export const DEFAULT_TTL_MS = 30_000;
export { MIN_TTL_MS };
/** Upper bound for ttl: one year. Longer "locks" are ownership, not locking. */
export const MAX_TTL_MS = 365 * 24 * 60 * 60 * 1000;
const MIN_SECRET_BYTES = 16;

/** The default `purgeAfter`: how long a released or expired lock record is kept, one day. */
export const DEFAULT_PURGE_AFTER_MS = 24 * 60 * 60 * 1000;

const KNOWN_OPTIONS: ReadonlySet<string> = new Set(['ttl', 'purgeAfter', 'collection', 'ownerStorage', 'ownerSecret', 'requireLock', 'transactions', 'changeStreams']);

/** Validates a ttl in milliseconds, for the plugin options and for per-call overrides. */
export function validateTtl(value: unknown, option = 'ttl'): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || !Number.isInteger(value)) {
    throw new InvalidLockOptionError(option, `expected a whole number of milliseconds, got ${describeValue(value)}.`);
  }
  if (value < MIN_TTL_MS) {
    // lease.ts, MIN_TTL_MS: the clock-drift allowance alone uses up such a lease, so no grant could ever be handed out.
    throw new InvalidLockOptionError(
      option,
      `expected at least ${MIN_TTL_MS} milliseconds, got ${value}: a lease sets aside 2 ms and 1% of the ttl for clock drift, so a lock of ${value} ms could never be counted on (MIN_TTL_MS).`,
    );
  }
  if (value > MAX_TTL_MS) {
    throw new InvalidLockOptionError(option, `expected between ${MIN_TTL_MS} and ${MAX_TTL_MS} milliseconds (one year), got ${value}.`);
  }
  if (value < SECONDS_SUSPECT_BELOW_MS) warnTtlLooksLikeSeconds(value, option);
  return value;
}

/** Below this many milliseconds a ttl is more likely seconds written by mistake than a real lock. */
const SECONDS_SUSPECT_BELOW_MS = 1_000;
const warnedTtls = new Set<string>();

/**
 * `{ ttl: 30 }` is 30 milliseconds, not 30 seconds: a lock that expires before the user has
 * even seen the page. Sub-second locks are legitimate (tests, fast jobs), so this is a process
 * warning, not an error: emitted once per value and option, with a code to filter on.
 */
function warnTtlLooksLikeSeconds(value: number, option: string): void {
  const key = `${option}:${value}`;
  if (warnedTtls.has(key)) return;
  warnedTtls.add(key);
  process.emitWarning(
    `mongoose-pessimistic-lock: ${option} is in milliseconds, so ${option}: ${value} makes locks that last ${value} ms. ` +
      `If you meant ${value} seconds, write ${option}: ${value * 1000} (or ${value}_000).`,
    { type: 'MongoosePessimisticLockWarning', code: TTL_WARNING_CODE },
  );
}

/** The `code` of the process warning for a ttl below one second. */
export const TTL_WARNING_CODE = 'MPL_TTL_UNDER_ONE_SECOND';

export function resolveOptions(input: unknown): ResolvedLockOptions {
  if (input === undefined || input === null) input = {};
  if (typeof input !== 'object' || Array.isArray(input)) {
    throw new InvalidLockOptionError('(options)', `expected an object, got ${describeValue(input)}.`);
  }
  const options = input as Record<string, unknown>;
  for (const key of Object.keys(options)) {
    if (!KNOWN_OPTIONS.has(key)) {
      throw new InvalidLockOptionError(key, `unknown option. Known options: ${[...KNOWN_OPTIONS].join(', ')}.`);
    }
  }

  const ttl = options.ttl === undefined ? DEFAULT_TTL_MS : validateTtl(options.ttl);

  let purgeAfter = DEFAULT_PURGE_AFTER_MS;
  if (options.purgeAfter !== undefined) {
    const value = options.purgeAfter;
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 0 || value > MAX_TTL_MS) {
      throw new InvalidLockOptionError('purgeAfter', `expected a whole number of milliseconds between 0 and ${MAX_TTL_MS}, got ${describeValue(value)}.`);
    }
    purgeAfter = value;
  }

  let collection: string | undefined;
  if (options.collection !== undefined) {
    const name = options.collection;
    if (typeof name !== 'string' || name.length === 0 || name.length > 200 || name.includes('\0') || name.startsWith('system.') || name.includes('$')) {
      throw new InvalidLockOptionError('collection', `expected a valid collection name (non-empty, no "$" or NUL, not "system.*"), got ${describeValue(name)}.`);
    }
    collection = name;
  }

  const ownerStorage = options.ownerStorage ?? 'hash';
  if (ownerStorage !== 'hash' && ownerStorage !== 'plain') {
    throw new InvalidLockOptionError('ownerStorage', `expected 'hash' or 'plain', got ${describeValue(ownerStorage)}.`);
  }

  let ownerSecret: Buffer | undefined;
  if (options.ownerSecret !== undefined) {
    const secret = options.ownerSecret;
    if (typeof secret !== 'string' && !Buffer.isBuffer(secret)) {
      throw new InvalidLockOptionError('ownerSecret', `expected a string or Buffer, got ${describeValue(secret)}.`);
    }
    ownerSecret = Buffer.from(secret);
    if (ownerSecret.length < MIN_SECRET_BYTES) {
      throw new InvalidLockOptionError('ownerSecret', `expected at least ${MIN_SECRET_BYTES} bytes, got ${ownerSecret.length}.`);
    }
    if (ownerStorage === 'plain') {
      throw new InvalidLockOptionError('ownerSecret', "has no effect with ownerStorage: 'plain'; remove one of them.");
    }
  }

  const requireLock = options.requireLock ?? false;
  if (typeof requireLock !== 'boolean') {
    throw new InvalidLockOptionError('requireLock', `expected true or false, got ${describeValue(requireLock)}.`);
  }

  const transactions = options.transactions ?? 'auto';
  if (transactions !== 'auto' && transactions !== 'never') {
    throw new InvalidLockOptionError('transactions', `expected 'auto' or 'never', got ${describeValue(transactions)}.`);
  }

  const changeStreams = options.changeStreams ?? 'auto';
  if (changeStreams !== 'auto' && changeStreams !== 'never') {
    throw new InvalidLockOptionError('changeStreams', `expected 'auto' or 'never', got ${describeValue(changeStreams)}.`);
  }

  return { ttl, purgeAfter, collection, ownerStorage, ownerSecret, requireLock, transactions, changeStreams };
}

/** A short description of a value's type and shape for error messages, never its full contents. */
export function describeValue(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return `an array of length ${value.length}`;
  switch (typeof value) {
    case 'string':
      return value.length > 40 ? `a string of length ${value.length}` : JSON.stringify(value);
    case 'number':
    case 'boolean':
    case 'bigint':
      return String(value);
    case 'object': {
      let ctor: unknown;
      try {
        ctor = (value as object).constructor?.name;
      } catch {
        return 'an object'; // a Proxy whose traps throw
      }
      return typeof ctor === 'string' && ctor !== '' && ctor !== 'Object' ? `a ${ctor}` : 'an object';
    }
    default:
      return typeof value;
  }
}
