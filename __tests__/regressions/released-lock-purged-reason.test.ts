/**
 * A lock released by someone else (forceUnlock, releaseAllFor from another request) is reported to
 * its former holder as `'released'` (README, Statics: forceUnlock "The former holder's next use of
 * its lock fails with LockNotHeldError (reason: 'released')"), also once the TTL index has purged
 * the released record.
 *
 * LockStore.lossFrom (src/lock-store.ts) reasons that a record gone before the lock's own expiry
 * cannot have been purged, so it calls it `'vanished'`: "the lock collection was dropped or the
 * record deleted". But releasing moves the record's `expiresAt` to the release time, so the TTL
 * index purges it `purgeAfter` after the RELEASE, which with a `purgeAfter` shorter than the ttl
 * (allowed: 0 ... one year) is long before the holder's expiry. Nothing was dropped or deleted;
 * the message misleads whoever investigates. (The emulator's TTL monitor runs every second in
 * tests, like mongod's with ttlMonitorSleepSecs=1.)
 */
import { LockNotHeldError } from '../../src';
import { connect, operatorConnection, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';
import type { Connection } from 'mongoose';

const db = testDatabase('purgedreason');
let conn: MonitoredConnection;
/** Watches the lock collection without being recorded as one of the plugin's commands. */
let operator: Connection;
let M: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  operator = await operatorConnection(db.name);
  M = await workItemModel(conn.connection, { ttl: 10 * 60_000, purgeAfter: 0 });
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
  await operator.close();
});

/** Waits (generously) until the TTL index has deleted the lock record of `id`. */
async function purged(id: unknown): Promise<void> {
  const records = operator.db!.collection(M.lockModel().collection.collectionName);
  const deadline = Date.now() + 20_000;
  while ((await records.findOne({ _id: id } as never)) !== null) {
    if (Date.now() > deadline) throw new Error('the TTL index did not purge the released record within 20 s');
    await sleep(200);
  }
}

test("after forceUnlock and the record's purge, the former holder's unlock() says 'released'", async () => {
  const { _id: id } = await M.create({ title: 'force' });
  const doc = await M.lock(id, 'alice');
  expect(await M.forceUnlock(id)).toBe(true);
  await purged(id);
  const error = await doc.unlock().catch((e: unknown) => e);
  expect(error).toBeInstanceOf(LockNotHeldError);
  expect(error).toMatchObject({ reason: 'released' });
  expect((error as Error).message).not.toMatch(/dropped/);
}, 40_000);

test("after releaseAllFor (a logout in another request) and the purge, the holder's extendLock() says 'released'", async () => {
  const { _id: id } = await M.create({ title: 'logout' });
  const doc = await M.lock(id, 'bob');
  expect(await M.releaseAllFor('bob')).toBe(1);
  await purged(id);
  const error = await doc.extendLock().catch((e: unknown) => e);
  expect(error).toBeInstanceOf(LockNotHeldError);
  expect(error).toMatchObject({ reason: 'released' });
}, 40_000);
