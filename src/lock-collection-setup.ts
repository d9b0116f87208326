/**
 * Creating the lock collection and its indexes, so that setting them up can never take locking
 * down. Correctness does not depend on either index (every lock operation addresses records by
 * `_id`, and an upsert creates the collection implicitly): the TTL index only reclaims storage
 * and the owner index only speeds up `releaseAllFor` and `listLocks`. So:
 *  - a transient failure (a failover, a network error) is retried at the next lock call, instead
 *    of being cached for the life of the process as Mongoose caches `Model.init()`;
 *  - a changed `purgeAfter` meets the existing TTL index with other options, which mongod refuses
 *    (IndexOptionsConflict, 85: src/mongo/db/catalog/index_catalog_impl.cpp,
 *    `_doesSpecConflictWithExisting`); the TTL is then changed in place with `collMod`
 *    (manual, collMod: "Change Expiration Value for Indexes"), and if that is refused too a
 *    warning says so and locking goes on with the old expiry;
 *  - any other failure is reported once as a process warning and retried at the next call.
 * Lock calls wait for the attempt in progress, never for a failed one.
 */
import type { Model, mongo } from 'mongoose';
import { isTransient } from './failures';
import { TTL_INDEX_NAME } from './lock-model';
import type { LockRecord } from './lock-store';

/** Code of the process warnings this module emits (`process.on('warning')`). */
export const LOCK_SETUP_WARNING_CODE = 'MPL_LOCK_COLLECTION_SETUP';

const INDEX_OPTIONS_CONFLICT = 85;

function codeOf(error: unknown): number | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'number' ? code : undefined;
}

function warn(collection: string, message: string): void {
  process.emitWarning(`mongoose-pessimistic-lock: lock collection ${collection}: ${message}`, { code: LOCK_SETUP_WARNING_CODE });
}

export interface LockCollectionSetup {
  /** Resolves when the collection and its indexes are in place, or when setting them up failed (never rejects). */
  ready(): Promise<void>;
}

export function lockCollectionSetup(lockModel: Model<LockRecord>, purgeAfterSeconds: number): LockCollectionSetup {
  const name = lockModel.collection.collectionName;
  let attempt: Promise<boolean> | undefined;
  let done = false;
  let first = true;
  const warned = new Set<string>();

  async function setUp(): Promise<boolean> {
    try {
      // The first time, Mongoose's own init (which it may have started when the model was
      // compiled); after a failure, the same steps again (Mongoose would return its cached rejection).
      if (first) {
        first = false;
        await lockModel.init();
      } else {
        await lockModel.createCollection().catch((error: unknown) => {
          if (codeOf(error) !== 48) throw error; // NamespaceExists: created meanwhile
        });
        await lockModel.createIndexes();
      }
      return true;
    } catch (error) {
      if (codeOf(error) === INDEX_OPTIONS_CONFLICT && (await changeTtl())) return true;
      const why = (error as Error).message;
      if (!warned.has(why)) {
        warned.add(why);
        const retry = isTransientError(error) ? 'transient; retried at the next lock call' : 'retried at the next lock call';
        warn(name, `setting up the collection or its indexes failed (${why}); locking works without them (${retry}).`);
      }
      return false;
    }
  }

  /** Changes the TTL index's expireAfterSeconds in place; whether that worked. */
  async function changeTtl(): Promise<boolean> {
    try {
      await (lockModel.db.db as mongo.Db).command({ collMod: name, index: { name: TTL_INDEX_NAME, expireAfterSeconds: purgeAfterSeconds } });
      await lockModel.createIndexes();
      warn(name, `purgeAfter changed: the TTL index ${TTL_INDEX_NAME} now keeps released locks ${purgeAfterSeconds} s.`);
      return true;
    } catch (error) {
      const why = (error as Error).message;
      if (!warned.has(why)) {
        warned.add(why);
        warn(name, `purgeAfter changed, but the TTL index ${TTL_INDEX_NAME} could not be changed with collMod (${why}); released locks keep the old expiry. Drop the index to apply the new one.`);
      }
      return false;
    }
  }

  return {
    ready() {
      if (done) return Promise.resolve();
      attempt ??= setUp().then((ok) => {
        if (ok) done = true;
        else attempt = undefined; // the next call tries again
        return ok;
      });
      return attempt.then(() => undefined);
    },
  };
}

function isTransientError(error: unknown): boolean {
  return typeof (error as { hasErrorLabel?: unknown } | null)?.hasErrorLabel === 'function' && isTransient(error as mongo.MongoError);
}
