/**
 * A holder that stalled past its ttl, made robust for a loaded machine: `owner` locks `id` with a
 * short ttl, and the call returns once the server counts that lock as expired (`isLocked` false).
 * A lock this short can be refused on arrival when the machine is slow to answer
 * (LockExpiredOnArrivalError: seen at load 16 with 50 ms); the ttl is then doubled and tried again.
 */
import { LockExpiredOnArrivalError, type LockOptions, type LockTargetId } from '../../src';
import { waitUntil } from './db';

interface ShortLockModel<D> {
  lock(id: LockTargetId, owner: string, options?: LockOptions): Promise<D>;
  isLocked(id: LockTargetId): Promise<boolean>;
}

export async function staleLock<D>(model: ShortLockModel<D>, id: LockTargetId, owner: string, ttl = 150): Promise<D> {
  for (let attempt = ttl; ; attempt *= 2) {
    let doc: D;
    try {
      doc = await model.lock(id, owner, { ttl: attempt });
    } catch (error) {
      if (error instanceof LockExpiredOnArrivalError && attempt < 5_000) continue;
      throw error;
    }
    if (!(await waitUntil(async () => !(await model.isLocked(id)), 20_000))) throw new Error(`the ${attempt} ms lock on ${String(id)} did not expire within 20 s`);
    return doc;
  }
}
