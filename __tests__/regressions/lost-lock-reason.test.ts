/**
 * Why an instance's lock is gone, when another owner took it after it expired and then released
 * it. README, Document methods: `doc.unlock()` "If it expired or was taken over, LockNotHeldError
 * says which; a second unlock() is reported (reason: 'released')"; `doc.saveAndUnlock` "a commit
 * that did apply reports `released`". So `released` means: this acquisition was released (by its
 * holder, or administratively while it was current).
 *
 * LockStore.lossFrom (src/lock-store.ts) reads the record's token only: a record whose token is
 * null is "released", whoever released it. After alice's lock expired and bob took it and
 * released it, alice is told her lock was `released`: indistinguishable from her own earlier
 * release, and, after a caller transaction whose commit failed, from a commit that applied
 * (__tests__/regressions/commit-failure-settlement.test.ts). The record's fence says whose
 * acquisition was released (bob's fence is greater than alice's), as explainStaleTicket already
 * uses it for tickets (`sameFence`).
 * Runs on a replica set and on a standalone server.
 */
import { LockNotHeldError } from '../../src';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('lostreason');
let conn: MonitoredConnection;
let M: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  M = await workItemModel(conn.connection, { ttl: 30_000 }, 'LostReason');
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

test.each(['unlock', 'extendLock', 'save'] as const)(
  "an expired lock that another owner took and released is not reported as 'released' (%s)",
  async (call) => {
    const { _id: id } = await M.create({ title: 'original' });
    // Any ttl shows it; a short one keeps the wait short. Slept past it from the reply, which came
    // after the server's grant: expired by the server's clock.
    const alice = await M.lock(id, 'alice', { ttl: 400 });
    await sleep(700);
    const bob = await M.lock(id, 'bob');
    const bobFence = bob.heldLock()!.fence;
    await bob.unlock();
    expect(bobFence).toBeGreaterThan(alice.heldLock()!.fence);
    alice.title = 'by alice';
    const error = await (call === 'unlock' ? alice.unlock() : call === 'extendLock' ? alice.extendLock() : alice.save()).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockNotHeldError);
    expect(['expired', 'taken_over']).toContain((error as LockNotHeldError).reason);
  },
  20_000,
);
