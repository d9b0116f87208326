/**
 * Arguments of the calls that lock several documents at once (`Model.lockMany`,
 * `Model.acquireLocks`, `Model.withLocks`, `Model.unlockMany`, `lockAll`, `unlockAll`), validated
 * before anything touches the database: a bounded, duplicate-free list of ids, each cast by the
 * schema's own caster (so none can carry a query operator).
 */
import { readArgumentArray, type CastId, type LockCallOptions } from './arguments';
import { InvalidLockArgumentError, describeId } from './errors';
import { idKey } from './id-key';

/**
 * Most documents one group acquisition takes (`lockMany`, `acquireLocks`, `withLocks`, `lockAll`).
 * What fits: the acquisition is one `update` of one statement per document (mongod takes up to
 * 100,000 statements per command, `write_ops::kMaxWriteBatchSize`, and a command of at most 16 MiB
 * plus 16 KiB; docs/mongodb-compatibility.md R25), then one `find` with every id in `$in`. One
 * statement is about 2 KB besides its `_id` (the condition is repeated in each field's `$cond`),
 * so 1,000 ObjectId documents make an `update` of about 2 MB and a `find` of about 17 KB: eight
 * times below the limit, room for ids of several kilobytes. Beyond 1,000, a group is a batch job
 * rather than a lock (and every document of it waits for the slowest to be free). Should ids be
 * so large that a command passes 16 MiB, the driver splits the `update` (more commands, the same
 * result).
 */
export const MAX_LOCK_MANY_IDS = 1_000;

/**
 * Options of `Model.lockMany` (and `lockAll`): `ttl`, `label` and `wait` / `signal` as for
 * `Model.lock`; they apply to the whole group (one acquisition, one label, one deadline).
 */
export type LockManyOptions = Pick<LockCallOptions, 'ttl' | 'wait' | 'signal' | 'label'>;

/** Options of `Model.acquireLocks` / `Model.withLocks` (and `acquireAllLocks` / `withAllLocks`): add `autoExtend` (default true). */
export type LockGroupOptions = LockManyOptions & Pick<LockCallOptions, 'autoExtend'>;

/**
 * The ids of one group call: an array of 1..MAX_LOCK_MANY_IDS entries, copied once into a fresh
 * array (readArgumentArray: the caller's own `map`, a Proxy's changing `length` or getters
 * decide nothing after this).
 */
export function validateIdList(ids: unknown, argument = 'ids'): readonly unknown[] {
  const list = readArgumentArray(ids, argument, {
    expected: 'an array of document ids',
    max: MAX_LOCK_MANY_IDS,
    tooMany: (length) => `expected at most ${MAX_LOCK_MANY_IDS} ids in one call, got ${length}. Lock fewer documents at once.`,
  });
  if (list.length === 0) throw new InvalidLockArgumentError(argument, 'expected at least one document id, got an empty array.');
  return list;
}

/**
 * Casts every id with `cast` (the schema's caster: InvalidLockArgumentError for anything that is
 * not a scalar of its `_id` type), naming the position of a bad one; then refuses two ids that are
 * one document (by idKey: `1`, `Long(1)` and `'1'` cast to a Number `_id` are one document), since
 * a group takes each document once. `scopes(i)`: where the id at `i` is unique (for `lockAll`, its
 * document's collection and its lock's collection); two ids that share any scope and are equal are
 * one document (or one lock) twice.
 */
export function castIdList(ids: readonly unknown[], cast: (id: unknown, position: number) => CastId, argument = 'ids', scopes: (i: number) => readonly string[] = () => ['']): CastId[] {
  const cast_ = ids.map((id, i) => {
    try {
      return cast(id, i);
    } catch (error) {
      if (error instanceof InvalidLockArgumentError) throw new InvalidLockArgumentError(`${argument}[${i}]`, error.message.replace(/^Invalid [^:]*: /, ''));
      throw error;
    }
  });
  const seen = new Map<string, number>();
  cast_.forEach(({ documentId: id }, i) => {
    const keys = scopes(i).map((scope) => `${scope}\u0000${idKey(id)}`);
    for (const key of keys) {
      const first = seen.get(key);
      if (first !== undefined) {
        throw new InvalidLockArgumentError(
          argument,
          `${argument}[${first}] and ${argument}[${i}] are the same document (${describeId(id)}); list each document once.`,
        );
      }
    }
    for (const key of keys) seen.set(key, i);
  });
  return cast_;
}
