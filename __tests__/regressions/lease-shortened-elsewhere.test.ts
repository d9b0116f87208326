/**
 * PRODUCT.md property 13: "no client believes it holds a lock longer than the server grants it".
 * The lease (src/lease.ts) is timed from the send of the command that last granted or extended
 * the acquisition, as THIS state knows it. Two ways of shortening the same acquisition on the
 * server are not reflected in what a holder believes:
 *
 *  1. `handle.document.extendLock(shorterTtl)`: the handle and its document share one lease
 *     state, so `handle.msLeft()` follows; but the handle's loss timer stays armed for the old
 *     lease (LockHandle.armLossTimer runs only from the handle's own `extend`), so an `abort`
 *     listener on `handle.signal` (what `withLock`'s fn or a fetch() was given) fires only when
 *     the OLD lease ends, long after another owner took the lock. (Reading `signal.aborted`
 *     re-checks the lease, so the check here listens to the event, as a fetch() would.)
 *  2. a resume of the same acquisition (`Model.lock(id, owner, { resume: ticket, ttl })`) with a
 *     shorter ttl: the server's expiry of that acquisition moves earlier (LockStore.resume sets
 *     `expiresAt = $$NOW + ttl`, whatever it was), and the instance (or handle) that took the lock
 *     keeps counting on its own, longer, lease. The same happens with `extendLock(shorter)` on a
 *     resumed instance.
 *
 * Each check is independent of the plugin's bookkeeping: the emulator runs on this machine, so
 * the server's `acquiredAt` and this process's `Date.now()` read one clock. Runs on a replica set
 * and on a standalone server (nothing here needs transactions).
 */
import type { LockTargetId } from '../../src';
import { connect, sleep, testDatabase, waitUntil, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('leaseshort');
let conn: MonitoredConnection;
let other: MonitoredConnection;
let M: WorkItemModel;
let OtherM: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  other = await connect(db.name);
  M = await workItemModel(conn.connection, { ttl: 30_000 }, 'LeaseShort');
  OtherM = await workItemModel(other.connection, { ttl: 30_000 }, 'LeaseShort');
});

afterAll(async () => {
  await db.drop(conn.connection);
  await Promise.all([conn.close(), other.close()]);
});

/** Another owner takes the lock as soon as the server lets it; when its grant began (server clock). */
async function takenOverAt(id: LockTargetId): Promise<number> {
  for (let waited = 0; waited < 15_000; waited += 20) {
    const taken = await OtherM.tryLock(id, 'bob', { ttl: 30_000 });
    if (taken) {
      const acquiredAt = taken.heldLock()!.acquiredAt.getTime();
      await taken.unlock();
      return acquiredAt;
    }
    await sleep(20);
  }
  throw new Error('the lock was never free');
}

describe("a handle whose document's extendLock shortened the lock", () => {
  test.each([false, true])("its signal's abort event fires no later than another owner's grant (autoExtend: %s)", async (autoExtend) => {
    const { _id: id } = await M.create({ title: 'shortened through the document' });
    const handle = await M.acquireLock(id, 'alice', { ttl: 30_000, autoExtend });
    let abortedAt: number | undefined;
    handle.signal.addEventListener('abort', () => (abortedAt = Date.now()));
    await handle.document.extendLock(500);
    if (autoExtend) {
      // README, Keeping a lock alive: an autoExtend handle renews when a third of its ttl is left
      // on the lease, whoever shortened it: the 500 ms lease is renewed at once, as after
      // handle.extend(500) (auto-renewal-after-extend.test.ts), and what the handle counts on
      // stays within the server's grant.
      await sleep(1_500);
      const info = await OtherM.getLock(id);
      const believedUntil = Date.now() + handle.msLeft();
      expect({ aborted: abortedAt !== undefined, held: info !== null, msLeftOver10s: handle.msLeft() > 10_000 }).toEqual({ aborted: false, held: true, msLeftOver10s: true });
      expect(believedUntil).toBeLessThanOrEqual(info!.expiresAt.getTime() + 1);
      await handle.release();
      return;
    }
    // The shared lease follows the extension...
    expect(handle.msLeft()).toBeLessThanOrEqual(500);
    const takenAt = await takenOverAt(id);
    // A timer that is merely late still delivers the event (bounded wait; it then must carry a
    // time no later than the grant).
    await waitUntil(() => abortedAt !== undefined, 5_000);
    // ...but the abort event is delivered only when the old 30 s lease ends (the defect this pins).
    // The loss timer is armed for the shortened lease, which ends before the server's expiry; on a
    // loaded machine its callback can still run a few ms after the other owner's grant (CI trial,
    // 2026-11-26: 9 ms after it). Up to 1 s of event-loop lateness is allowed: far below the 29.5 s
    // by which the old lease would be late.
    expect(abortedAt).toBeDefined();
    expect(abortedAt!).toBeLessThanOrEqual(takenAt + 1_000);
  }, 30_000);
});

describe('a resume of the same acquisition with a shorter ttl', () => {
  test("the instance that took the lock does not count on it past the server's new expiry", async () => {
    const { _id: id } = await M.create({ title: 'resumed shorter' });
    const first = await M.lock(id, 'alice', { ttl: 30_000 });
    const resumed = await M.lock(id, 'alice', { resume: first.heldLock()!.ticket, ttl: 500 });
    expect(resumed.heldLock()!.token).toBe(first.heldLock()!.token);
    const takenAt = await takenOverAt(id);
    // What `first` believes right after bob's grant began: it must not reach past that grant.
    const now = Date.now();
    const believedUntil = now + (first.heldLock()?.msLeft() ?? 0);
    expect(believedUntil).toBeLessThanOrEqual(Math.max(takenAt, now));
  }, 30_000);

  test("a handle whose acquisition was resumed with a shorter ttl: its signal aborts before another owner's grant", async () => {
    const { _id: id } = await M.create({ title: 'handle resumed shorter' });
    // Without autoExtend (an autoExtend handle renews the shortened lease: the test below).
    const handle = await M.acquireLock(id, 'alice', { ttl: 30_000, autoExtend: false });
    let abortedAt: number | undefined;
    handle.signal.addEventListener('abort', () => (abortedAt = Date.now()));
    await M.lock(id, 'alice', { resume: handle.document.heldLock()!.ticket, ttl: 500 });
    const takenAt = await takenOverAt(id);
    await waitUntil(() => abortedAt !== undefined, 5_000);
    const msLeftAfterTakeover = handle.msLeft();
    expect({ abortedBeforeTakeover: abortedAt !== undefined && abortedAt <= takenAt, msLeftAfterTakeover }).toEqual({ abortedBeforeTakeover: true, msLeftAfterTakeover: 0 });
  }, 30_000);

  test('an autoExtend handle whose acquisition was resumed with a shorter ttl renews from the shortened lease', async () => {
    const { _id: id } = await M.create({ title: 'auto handle resumed shorter' });
    const handle = await M.acquireLock(id, 'alice', { ttl: 30_000 });
    await M.lock(id, 'alice', { resume: handle.document.heldLock()!.ticket, ttl: 500 });
    await sleep(1_500);
    const info = await OtherM.getLock(id);
    const believedUntil = Date.now() + handle.msLeft();
    expect({ aborted: handle.signal.aborted, held: info !== null, msLeftOver10s: handle.msLeft() > 10_000 }).toEqual({ aborted: false, held: true, msLeftOver10s: true });
    expect(believedUntil).toBeLessThanOrEqual(info!.expiresAt.getTime() + 1);
    await handle.release();
  }, 30_000);
});
