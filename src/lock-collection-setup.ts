/**
 * Setting up the lock collection: its TTL index on `expiresAt` and its `{ owner: 1, _id: 1 }`
 * index. Correctness never depends on either (every lock command addresses records by `_id`, and
 * an upsert creates the collection implicitly): the TTL index reclaims the storage of released
 * records, the owner index serves releaseAllFor and listLocks. So the setup never takes locking
 * down, never taxes lock calls, and comes back when the collection loses its indexes:
 *
 *  - The first attempt is Mongoose's `lockModel.init()` (started when the model is compiled), which
 *    honours `autoCreate` / `autoIndex`. Lock calls wait for this attempt only, and for at most
 *    `setupTiming.firstAttemptWaitMs` (1 s): an index build can take as long as it likes (on a
 *    replica set it waits for its commit quorum, all data-bearing voting members by default:
 *    manual, createIndexes "commitQuorum"; one secondary down holds it), and locking needs neither
 *    the collection (an upsert creates it) nor its indexes. After that bound lock calls go on while
 *    the attempt finishes in the background.
 *  - mongod refuses an index whose key equals an existing index's under another name or with other
 *    options (IndexOptionsConflict, 85), and one whose name another key holds
 *    (IndexKeySpecsConflict, 86): IndexCatalogImpl::_doesSpecConflictWithExisting,
 *    src/mongo/db/catalog/index_catalog_impl.cpp. Then the setup reads the indexes (`listIndexes`),
 *    keeps an index with the wanted key under whatever name it has, changes the expiry of the TTL
 *    index it found with `collMod` by that index's own name, and creates the rest.
 *  - A failure is reported once per cause as a process warning (code MPL_LOCK_COLLECTION_SETUP)
 *    and retried in the background after 1 s, 2 s, 4 s, ... at most every 10 minutes. The cause is
 *    the error's kind (a network error, a server error code), not its text: a network error's
 *    message names the connection, a new one each retry, and one outage must give one warning.
 *    A success re-arms the warnings, so the next outage is reported again. Lock calls never wait
 *    for a retry and send nothing for the setup between retries.
 *  - Once set up, with `autoIndex` on: at most once a minute, one lock call starts one background
 *    `listIndexes` that checks both indexes are still there, and recreates what is missing. A
 *    lock collection dropped while the process runs is recreated by the next acquisition's upsert
 *    without any index; this is what brings them back. An `{ expiresAt: 1 }` index without
 *    `expireAfterSeconds` standing where the TTL index was (dropped, then made again by hand) is
 *    no TTL index: nothing would purge released records, so the check makes it one with `collMod`
 *    (mongod 5.1+ converts a non-TTL single-field index: manual, collMod, "Convert a Non-TTL
 *    Single-Field Index to TTL"), or warns when that fails. On the hot path this costs one reading
 *    of the monotonic clock per call (and nothing is awaited).
 *  - `Model.createLockIndexes()` runs the steps at once whatever `autoIndex` says, and rejects on
 *    failure: for deploy scripts of applications that turn `autoIndex` off.
 */
import { performance } from 'node:perf_hooks';
import type { Model, mongo } from 'mongoose';
import { LockConfigurationError, LockDatabaseError } from './errors';
import { isTransient } from './failures';
import { TTL_INDEX_NAME, lockIndexSpecs, type LockIndexSpec } from './lock-model';
import type { LockRecord } from './lock-store';

/** Code of the process warnings this module emits (`process.on('warning')`). */
export const LOCK_SETUP_WARNING_CODE = 'MPL_LOCK_COLLECTION_SETUP';

/** When the background work runs, in milliseconds. A module object so that tests can shorten it. */
export const setupTiming = {
  /** The first retry after a failure; each further failure doubles it. */
  firstRetryMs: 1_000,
  /** The longest wait between two retries. */
  maxRetryMs: 10 * 60_000,
  /** How often a set-up lock collection is checked for its indexes (the TTL monitor runs every 60 s). */
  recheckMs: 60_000,
  /** How long lock calls wait for the first attempt at most; it then goes on in the background. */
  firstAttemptWaitMs: 1_000,
};

/** A duration for a warning: "40 ms", "2 s", "10 minutes". */
function formatDuration(ms: number): string {
  if (ms < 1_000) return `${ms} ms`;
  if (ms < 60_000 || ms % 60_000 !== 0) return `${Math.round(ms / 100) / 10} s`;
  return `${ms / 60_000} minute${ms === 60_000 ? '' : 's'}`;
}

/**
 * What a failure is, for saying it once: the driver's error class and the server's code (or the
 * message of anything else). A network error's message names its connection ("connection 3 to
 * host:port closed"), a new one on every retry, so the text cannot be the key.
 */
function causeOf(error: unknown): string {
  const e = error as { name?: unknown; code?: unknown; cause?: unknown; message?: unknown } | null;
  if (error instanceof SetupFailure) return `${error.step}:${causeOf(error.cause)}`;
  if (typeof e?.name === 'string' && e.name.startsWith('Mongo')) return `${e.name}:${String(e.code ?? '')}`;
  return String(e?.message ?? error);
}

const NAMESPACE_NOT_FOUND = 26;
const NAMESPACE_EXISTS = 48;
const INDEX_OPTIONS_CONFLICT = 85;
const INDEX_KEY_SPECS_CONFLICT = 86;

function codeOf(error: unknown): number | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'number' ? code : undefined;
}

function isConflict(error: unknown): boolean {
  const code = codeOf(error);
  return code === INDEX_OPTIONS_CONFLICT || code === INDEX_KEY_SPECS_CONFLICT;
}

function isTransientError(error: unknown): boolean {
  return typeof (error as { hasErrorLabel?: unknown } | null)?.hasErrorLabel === 'function' && isTransient(error as mongo.MongoError);
}

/** An index as `listIndexes` describes it (only the fields read here). */
export interface ExistingIndex {
  name: string;
  key: Record<string, unknown>;
  expireAfterSeconds?: unknown;
  partialFilterExpression?: unknown;
}

/** What the setup must do so that the lock collection has the wanted indexes. */
export interface IndexPlan {
  /** Indexes to create. */
  create: LockIndexSpec[];
  /** TTL indexes, by their own name, whose expiry differs from the wanted one. */
  retime: { name: string; from: number | undefined; to: number }[];
  /** Wanted indexes whose name another key holds: they cannot be created while that index exists. */
  blocked: { spec: LockIndexSpec; holder: ExistingIndex }[];
}

/** Same fields in the same order, same directions (listIndexes may answer 1 as an int, a double or a long). */
function sameKey(a: Record<string, unknown>, b: Record<string, unknown>): boolean {
  const ea = Object.entries(a);
  const eb = Object.entries(b);
  return ea.length === eb.length && ea.every(([field, direction], i) => eb[i]![0] === field && Number(direction) === Number(eb[i]![1]));
}

/**
 * Compares the wanted indexes with the existing ones. An existing index with the wanted key and no
 * partial filter serves whatever its name: mongod would refuse a second one with that key
 * (IndexOptionsConflict, "Index already exists with a different name" or "An equivalent index
 * already exists with a different name and options"), and a query plan does not care about names.
 */
export function planIndexes(wanted: LockIndexSpec[], existing: ExistingIndex[]): IndexPlan {
  const plan: IndexPlan = { create: [], retime: [], blocked: [] };
  for (const spec of wanted) {
    const serving = existing.find((index) => sameKey(index.key, spec.key) && index.partialFilterExpression === undefined);
    if (serving) {
      const current = serving.expireAfterSeconds === undefined ? undefined : Number(serving.expireAfterSeconds);
      if (spec.expireAfterSeconds !== undefined && current !== spec.expireAfterSeconds) plan.retime.push({ name: serving.name, from: current, to: spec.expireAfterSeconds });
      continue;
    }
    const holder = existing.find((index) => index.name === spec.name);
    if (holder) plan.blocked.push({ spec, holder });
    else plan.create.push(spec);
  }
  return plan;
}

/** A failed step, explained; `cause` is the driver's error. */
class SetupFailure extends Error {
  constructor(
    message: string,
    override readonly cause: unknown,
    /** Which step failed (for causeOf). */
    readonly step = 'collMod',
  ) {
    super(message);
    this.name = 'SetupFailure';
  }
}

export interface LockCollectionSetup {
  /**
   * For every lock call: resolves when the first attempt has ended (it never rejects), and at once
   * after that. Starts a due retry or index check in the background, without waiting for it.
   */
  ready(): Promise<void>;
  /** `Model.createLockIndexes()`: the indexes now, whatever `autoIndex` says; rejects on failure. */
  createIndexes(): Promise<void>;
}

type Phase = 'first' | 'failed' | 'watching' | 'quiet';

export function lockCollectionSetup(lockModel: Model<LockRecord>, purgeAfterSeconds: number): LockCollectionSetup {
  const collection = lockModel.collection as unknown as mongo.Collection<mongo.Document>;
  const name = collection.collectionName;
  const wanted = lockIndexSpecs(purgeAfterSeconds);
  const warned = new Set<string>();
  /** Causes of failures already reported since the last success (causeOf). */
  const reportedFailures = new Set<string>();
  const resolved = Promise.resolve();
  let phase: Phase = 'first';
  let firstAttempt: Promise<void> | undefined;
  /** The first attempt, or the bound on waiting for it, whichever ends first (what lock calls await). */
  let firstWait: Promise<void> | undefined;
  let background: Promise<void> | undefined;
  let failures = 0;
  /** performance.now() of the last success, failure or check start: the next retry or check counts from it. */
  let since = 0;

  /** Whether a retry (phase 'failed') or a check ('watching') is due; read from setupTiming each time. */
  function due(): boolean {
    const wait = phase === 'failed' ? Math.min(setupTiming.maxRetryMs, setupTiming.firstRetryMs * 2 ** Math.min(failures - 1, 30)) : setupTiming.recheckMs;
    return performance.now() - since >= wait;
  }

  function warn(message: string, once = true): void {
    if (once && warned.has(message)) return;
    warned.add(message);
    process.emitWarning(`mongoose-pessimistic-lock: lock collection ${name}: ${message}`, { code: LOCK_SETUP_WARNING_CODE });
  }

  /** Mongoose's own resolution of `autoIndex` / `autoCreate` (Model.init in lib/model.js, utils.getOption). */
  function mongooseOption(option: 'autoIndex' | 'autoCreate'): boolean {
    const db = lockModel.db as unknown as { config?: Record<string, unknown>; base?: { options?: Record<string, unknown> } };
    for (const source of [lockModel.schema.options as Record<string, unknown>, db.config, db.base?.options]) {
      const value = source?.[option];
      if (value !== undefined && value !== null) return Boolean(value);
    }
    return false;
  }

  // ---- The commands (each on the lock collection; see docs/mongodb-compatibility.md, #lock-collection-setup).

  /**
   * `createIndexes` with every spec in one command. mongod checks all of them against the existing
   * indexes before it builds any (resolveDefaultsAndRemoveExistingIndexes in
   * src/mongo/db/commands/create_indexes_cmd.cpp throws on the first conflict), answers success for
   * specs identical to existing indexes ("all indexes already exist"), and creates the collection
   * if it does not exist.
   */
  async function createIndexes(specs: LockIndexSpec[]): Promise<void> {
    await collection.createIndexes(specs.map((spec) => ({ ...spec })));
  }

  /** `listIndexes` from the primary; a collection that does not exist has none (NamespaceNotFound, 26). */
  async function listIndexes(): Promise<ExistingIndex[]> {
    try {
      return (await collection.listIndexes({ readPreference: 'primary' } as mongo.ListIndexesOptions).toArray()) as unknown as ExistingIndex[];
    } catch (error) {
      if (codeOf(error) === NAMESPACE_NOT_FOUND) return [];
      throw error;
    }
  }

  /**
   * `collMod` of one TTL index, by its own name (manual, collMod, "Change Expiration Value for
   * Indexes"). It needs the collMod action, which `readWrite` does not grant (manual, "Built-In
   * Roles": readWrite; dbAdmin grants it; SERVER-20772).
   */
  async function retime(change: IndexPlan['retime'][number]): Promise<void> {
    try {
      await (lockModel.db.db as mongo.Db).command({ collMod: name, index: { name: change.name, expireAfterSeconds: change.to } });
    } catch (error) {
      throw new SetupFailure(
        `purgeAfter asks the TTL index ${change.name} to keep released lock records ${change.to} s, but it keeps them ${change.from === undefined ? 'forever (it has no expireAfterSeconds: it is no TTL index)' : `${change.from} s`}, ` +
          `and changing it with collMod failed (${(error as Error).message}); released locks keep the old expiry. collMod needs the collMod privilege ` +
          '(dbAdmin; readWrite lacks it): run Model.createLockIndexes() as such a user, or drop the index',
        error,
      );
    }
    const renamed = change.name === TTL_INDEX_NAME ? '' : ` (it keeps its name ${change.name}; the plugin names it ${TTL_INDEX_NAME} when it creates it)`;
    warn(
      change.from === undefined
        ? `the index ${change.name} on { expiresAt: 1 } was no TTL index (no expireAfterSeconds: released lock records were never purged) and now keeps them ${change.to} s${renamed}.`
        : `purgeAfter changed: the TTL index ${change.name} kept released lock records ${change.from} s and now keeps them ${change.to} s${renamed}.`,
    );
  }

  // ---- The steps.

  /** Makes the existing indexes serve the wanted ones (see planIndexes); throws what failed. */
  async function resolveConflicts(): Promise<void> {
    const plan = planIndexes(wanted, await listIndexes());
    if (plan.create.length > 0) await createIndexes(plan.create);
    for (const change of plan.retime) await retime(change);
    if (plan.blocked.length > 0) {
      const which = plan.blocked.map(({ spec, holder }) => `${spec.name} is the name of an index on ${JSON.stringify(holder.key)}`).join('; ');
      throw new LockConfigurationError(`the lock collection ${name} cannot get its indexes: ${which}. Drop that index (the plugin then creates its own).`);
    }
  }

  /** Both indexes, in one command when nothing conflicts. */
  async function ensureIndexes(): Promise<void> {
    try {
      await createIndexes(wanted);
    } catch (error) {
      if (!isConflict(error)) throw error;
      await resolveConflicts();
    }
  }

  function succeeded(): void {
    phase = mongooseOption('autoIndex') ? 'watching' : 'quiet';
    failures = 0;
    since = performance.now();
    reportedFailures.clear();
  }

  function failed(error: unknown): void {
    phase = 'failed';
    failures++;
    since = performance.now();
    const cause = causeOf(error);
    if (reportedFailures.has(cause)) return;
    reportedFailures.add(cause);
    const why = (error as Error).message;
    warn(
      `setting up the collection or its indexes failed (${why}); locking works without them. ` +
        `${isTransientError(error) ? 'This looks transient: ' : ''}retried in the background with backoff, at most every ${formatDuration(setupTiming.maxRetryMs)}; ` +
        'this is said once until a retry succeeds.',
      false,
    );
  }

  async function first(): Promise<void> {
    try {
      await lockModel.init();
      succeeded();
    } catch (error) {
      if (!isConflict(error)) return failed(error);
      // Mongoose sent one createIndexes per index and went on after the refusal: see what is there.
      try {
        await resolveConflicts();
        succeeded();
      } catch (conflict) {
        failed(conflict);
      }
    }
  }

  /** After a failure: what Mongoose's init would do, with the conflicts resolved. */
  async function retry(): Promise<void> {
    try {
      if (mongooseOption('autoIndex')) await ensureIndexes();
      else if (mongooseOption('autoCreate')) {
        await lockModel.createCollection().catch((error: unknown) => {
          if (codeOf(error) !== NAMESPACE_EXISTS) throw error;
        });
      }
      succeeded();
    } catch (error) {
      failed(error);
    }
  }

  /**
   * Once set up: are both indexes still there? Recreates missing ones, and makes a plain
   * `{ expiresAt: 1 }` standing where the TTL index was a TTL index again. It never changes the
   * expiry of a TTL index: two deploys with different `purgeAfter` would fight every minute; that
   * is a setup's decision.
   */
  async function check(): Promise<void> {
    since = performance.now();
    try {
      const plan = planIndexes(wanted, await listIndexes());
      if (plan.create.length > 0) {
        await createIndexes(plan.create);
        warn(
          `its indexes ${plan.create.map((spec) => spec.name).join(' and ')} were missing (the collection was dropped or the indexes removed while this process ran) and were created again.`,
          false,
        );
      }
      for (const change of plan.retime) if (change.from === undefined) await retime(change);
    } catch (error) {
      failed(error);
    }
  }

  return {
    ready() {
      if (phase === 'first') {
        if (firstWait === undefined) {
          firstAttempt ??= first();
          // At most firstAttemptWaitMs: a hanging index build must not hold up locking (see above).
          let timer: ReturnType<typeof setTimeout> | undefined;
          const bound = new Promise<void>((resolve) => {
            timer = setTimeout(resolve, setupTiming.firstAttemptWaitMs);
            timer.unref?.();
          });
          firstWait = Promise.race([firstAttempt.finally(() => clearTimeout(timer)), bound]);
        }
        return firstWait;
      }
      if (background === undefined && phase !== 'quiet' && due()) {
        background = (phase === 'failed' ? retry() : check()).finally(() => {
          background = undefined;
        });
      }
      return resolved;
    },
    async createIndexes() {
      firstAttempt ??= first();
      await firstAttempt;
      try {
        await ensureIndexes();
      } catch (error) {
        if (error instanceof SetupFailure) throw new LockDatabaseError('createLockIndexes', error, isTransientError(error.cause));
        throw error; // driver errors are typed at the plugin's boundary (failures.ts)
      }
      succeeded();
    },
  };
}
