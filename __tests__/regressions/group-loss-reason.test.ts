/**
 * Why a lock of a group (`lockMany`, `acquireLocks`, `lockAll`) is gone is told as it is for a
 * single lock (LockStore.lossFrom: 'released' / 'vanished' / 'expired' / 'taken_over', by the
 * record's token and fence and by `purgeAfter`).
 *
 * LockStore.explainGroupLoss (src/lock-store.ts) reported every record it did not find as
 * LockExpiredError ("purged: expired at least purgeAfter ago"), and every record without a token
 * as 'released' whatever its fence. But a release moves the record's `expiresAt` to the release,
 * so the TTL index purges a released record `purgeAfter` after the RELEASE, long before the lock's
 * own expiry when `purgeAfter` is shorter than the ttl: a group whose lock was released by someone
 * else (forceUnlock, releaseAllFor) and then purged was told its lock had expired. A record
 * deleted by hand before the lock's expiry was 'expired' too, where a single lock says 'vanished';
 * and a lock that expired, was taken by another owner and released by it was 'released' (as if
 * this acquisition had been released), where a single lock says 'taken_over'.
 * (The emulator's TTL monitor runs every second in tests, like mongod's with ttlMonitorSleepSecs=1.)
 * Runs on a replica set and on a standalone server.
 */
import { type Connection, type Types } from 'mongoose';
import { LockExpiredError, LockNotHeldError } from '../../src';
import { connect, operatorConnection, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('grouplossreason');
let conn: MonitoredConnection;
/** Reads and deletes lock records without being one of the plugin's connections. */
let operator: Connection;
/** Records purged as soon as they are released (purgeAfter 0). */
let Purged: WorkItemModel;
/** The default purgeAfter (a day): a record gone before its expiry was deleted. */
let Kept: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  operator = await operatorConnection(db.name);
  Purged = await workItemModel(conn.connection, { ttl: 10 * 60_000, purgeAfter: 0 }, 'GroupLossPurged');
  Kept = await workItemModel(conn.connection, { ttl: 10 * 60_000 }, 'GroupLossKept');
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
  await operator.close();
});

const itemsOf = async (M: WorkItemModel, count: number): Promise<Types.ObjectId[]> =>
  (await M.insertMany(Array.from({ length: count }, (_, i) => ({ title: `g${i}` })))).map((d) => d._id);

const records = (M: WorkItemModel) => operator.db!.collection(M.lockModel().collection.collectionName);

/** Waits (generously) until the TTL index has deleted the lock record of `id`. */
async function purged(M: WorkItemModel, id: unknown): Promise<void> {
  const deadline = Date.now() + 20_000;
  while ((await records(M).findOne({ _id: id } as never)) !== null) {
    if (Date.now() > deadline) throw new Error('the TTL index did not purge the released record within 20 s');
    await sleep(200);
  }
}

const reasonOf = (error: unknown) => ({
  error: (error as Error)?.constructor?.name,
  reason: (error as LockNotHeldError).reason,
  says: /dropped|deleted/.test((error as Error).message) ? 'deleted' : /expired/i.test((error as Error).message) ? 'expired' : 'other',
});

test("forceUnlock of a document of a held group, then the purge: handle.release() says 'released', not expired", async () => {
  const ids = await itemsOf(Purged, 2);
  const handle = await Purged.acquireLocks(ids, 'alice', { autoExtend: false });
  expect(await Purged.forceUnlock(ids[0])).toBe(true);
  await purged(Purged, ids[0]);
  const error = await handle.release().catch((e: unknown) => e);
  expect(error).toBeInstanceOf(LockNotHeldError);
  expect(error).not.toBeInstanceOf(LockExpiredError);
  expect(reasonOf(error)).toMatchObject({ error: 'LockNotHeldError', reason: 'released' });
  // The other document was released by the call.
  expect(await Purged.isLocked(ids[1])).toBe(false);
}, 40_000);

test("releaseAllFor (a logout elsewhere), then the purge: Model.unlockMany(docs) says 'released'", async () => {
  const ids = await itemsOf(Purged, 2);
  const docs = await Purged.lockMany(ids, 'bob');
  expect(await Purged.releaseAllFor('bob')).toBe(2);
  await purged(Purged, ids[0]);
  await purged(Purged, ids[1]);
  const error = await Purged.unlockMany(docs).catch((e: unknown) => e);
  expect(reasonOf(error)).toMatchObject({ error: 'LockNotHeldError', reason: 'released' });
}, 40_000);

test("forceUnlock, then the purge: the group's renewal loses the group as 'released' (signal reason too)", async () => {
  const ids = await itemsOf(Purged, 2);
  const handle = await Purged.acquireLocks(ids, 'carol', { autoExtend: false });
  expect(await Purged.forceUnlock(ids[1])).toBe(true);
  await purged(Purged, ids[1]);
  // A lock found released may be this process's own release in flight: the next renewal decides
  // (extendGroup, releasedOnce). Two renewals at most.
  let error: unknown;
  for (let i = 0; i < 2 && error === undefined; i++) error = await handle.extend().then(() => undefined, (e: unknown) => e);
  expect(reasonOf(error)).toMatchObject({ error: 'LockNotHeldError', reason: 'released' });
  expect(handle.signal.aborted).toBe(true);
  expect(reasonOf(handle.signal.reason)).toMatchObject({ error: 'LockNotHeldError', reason: 'released' });
}, 40_000);

test("a record deleted by hand before the lock's expiry (purgeAfter a day): 'vanished', as for a single lock", async () => {
  const ids = await itemsOf(Kept, 2);
  const handle = await Kept.acquireLocks(ids, 'dave', { autoExtend: false });
  await records(Kept).deleteOne({ _id: ids[0] } as never);
  const error = await handle.release().catch((e: unknown) => e);
  expect(reasonOf(error)).toMatchObject({ error: 'LockNotHeldError', reason: 'vanished', says: 'deleted' });
});

test("a lock that expired, was taken by another owner and released by it: not 'released' (taken over)", async () => {
  const [id] = await itemsOf(Kept, 1);
  const [alice] = await Kept.lockMany([id], 'erin', { ttl: 1_000 });
  await sleep(1_300);
  const bob = await Kept.lock(id, 'frank');
  expect(bob.heldLock()!.fence).toBeGreaterThan(alice.heldLock()!.fence);
  await bob.unlock();
  const error = await Kept.unlockMany([alice]).catch((e: unknown) => e);
  expect(reasonOf(error)).toMatchObject({ error: 'LockNotHeldError', reason: 'taken_over' });
}, 20_000);
