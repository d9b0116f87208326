/**
 * Why a lock is lost, when its record is gone before the lock's expiry, rests on how long the TTL
 * index keeps released records (src/lock-loss.ts lossOf): gone before `acquiredAt + purgeAfter`,
 * nothing but a deletion by hand (or a dropped collection) explains it, and the loss is told as
 * 'vanished' ("which then is certain"); gone after, it may be a release purged by the TTL index:
 * 'released'. The store takes `purgeAfter` from the plugin option of ITS process (runtime.ts,
 * `new LockStore(collection, purgeAfter)`), while the index keeps what the last setup wrote: a
 * deploy with a shorter `purgeAfter` changes the index with collMod (lock-collection-setup.ts;
 * __tests__/regressions/purge-after-change.test.ts), and the processes still running the previous
 * deploy keep judging by the longer one. A lock of theirs that an administrator released
 * (`forceUnlock`) and that the index then purged is told as 'vanished' ("the lock collection was
 * dropped or the record deleted by hand"), which is untrue: it was released. Single locks and
 * groups alike.
 * (The emulator's TTL monitor runs every second, like mongod's with ttlMonitorSleepSecs=1.)
 * Runs on a replica set and on a standalone server.
 */
import type { Connection } from 'mongoose';
import type { LockNotHeldError } from '../../src';
import { connect, operatorConnection, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, workItemSchema, type WorkItem, type WorkItemModel } from '../support/work-item';

const db = testDatabase('lost_reason_purge_change');
let running: MonitoredConnection;
let next: MonitoredConnection;
let operator: Connection;
/** The deploy still running: purgeAfter a day (the default). */
let Old: WorkItemModel;
/** The next deploy: purgeAfter 0 (released records purged at once). */
let New: WorkItemModel;

beforeAll(async () => {
  running = await connect(db.name);
  next = await connect(db.name);
  operator = await operatorConnection(db.name);
  Old = await workItemModel(running.connection, { ttl: 10 * 60_000 }, 'PurgeChangeReason');
  // The next deploy: Mongoose's own init() of its lock model meets the index with the old expiry
  // (IndexOptionsConflict), and its setup moves the index to 0 s with collMod (here at once, as a
  // deploy script's Model.createLockIndexes() does; the background setup does the same).
  New = next.connection.model<WorkItem, WorkItemModel>('PurgeChangeReason', workItemSchema({ ttl: 10 * 60_000, purgeAfter: 0 }));
  await New.createLockIndexes();
  const ttlIndex = (await operator.db!.collection(Old.lockModel().collection.collectionName).indexes()).find((index) => index.key.expiresAt === 1);
  expect(ttlIndex?.expireAfterSeconds).toBe(0);
});

afterAll(async () => {
  await db.drop(running.connection);
  await Promise.all([running.close(), next.close(), operator.close()]);
});

async function purged(id: unknown): Promise<void> {
  const records = operator.db!.collection(Old.lockModel().collection.collectionName);
  const deadline = Date.now() + 20_000;
  while ((await records.findOne({ _id: id } as never)) !== null) {
    if (Date.now() > deadline) throw new Error('the TTL index did not purge the released record within 20 s');
    await sleep(200);
  }
}

const reasonOf = (error: unknown) => ({ error: (error as Error)?.constructor?.name, reason: (error as LockNotHeldError).reason });

test("a single lock of the running deploy, released by an administrator of the next one and purged: 'released', not 'vanished'", async () => {
  const { _id: id } = await Old.create({ title: 'single' });
  const doc = await Old.lock(id, 'alice');
  expect(await New.forceUnlock(id)).toBe(true);
  await purged(id);
  expect(reasonOf(await doc.unlock().catch((e: unknown) => e))).toEqual({ error: 'LockNotHeldError', reason: 'released' });
}, 30_000);

test("a group of the running deploy: the same", async () => {
  const [a, b] = await Old.create([{ title: 'g1' }, { title: 'g2' }]);
  const docs = await Old.lockMany([a._id, b._id], 'bob');
  expect(await New.forceUnlock(a._id)).toBe(true);
  await purged(a._id);
  expect(reasonOf(await Old.unlockMany(docs).catch((e: unknown) => e))).toEqual({ error: 'LockNotHeldError', reason: 'released' });
}, 30_000);
