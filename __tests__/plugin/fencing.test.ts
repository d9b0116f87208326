/** Fencing tokens: strictly increasing per document, also after release and after purge. */
import { LockNotHeldError } from '../../src';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';
import { staleLock } from '../support/stale-lock';

const db = testDatabase('fencing');
let conn: MonitoredConnection;
let WorkItem: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  WorkItem = await workItemModel(conn.connection, { ttl: 5_000 });
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

test('every acquisition gets a larger fence: takeovers, renewals and re-locks after release', async () => {
  const { _id: id } = await WorkItem.create({ title: 'fenced' });
  const fences: number[] = [];
  for (let i = 0; i < 20; i++) {
    const item = await WorkItem.lock(id, `owner-${i % 3}`);
    fences.push(item.heldLock()!.fence);
    if (i % 2 === 0) {
      const renewed = await WorkItem.lock(id, `owner-${i % 3}`); // the same owner again: a new acquisition
      fences.push(renewed.heldLock()!.fence);
      await renewed.unlock();
    } else {
      await item.unlock();
    }
  }
  for (let i = 1; i < fences.length; i++) expect(fences[i]).toBeGreaterThan(fences[i - 1]);
  for (const fence of fences) expect(Number.isSafeInteger(fence)).toBe(true);
});

test('a stalled holder is fenced off: B writes, A wakes up and its save is rejected, B\'s data intact', async () => {
  const { _id: id } = await WorkItem.create({ title: 'original' });
  const a = await staleLock(WorkItem, id, 'holder-a'); // A stalls past its ttl
  const b = await WorkItem.lock(id, 'holder-b');
  expect(b.heldLock()!.fence).toBeGreaterThan(a.heldLock()!.fence);
  b.title = 'written by B';
  await b.save();

  a.title = 'written by A';
  const error = await a.save().catch((e: unknown) => e);
  expect(error).toBeInstanceOf(LockNotHeldError);
  expect((error as LockNotHeldError).reason).toBe('taken_over');
  expect((await WorkItem.findById(id).orFail()).title).toBe('written by B');
  await b.unlock();
});

test('the fence keeps growing after the TTL monitor purged the lock record', async () => {
  const Purged = await workItemModel(conn.connection, { ttl: 5_000, purgeAfter: 0 });
  const { _id: id } = await Purged.create({ title: 'purged' });
  const first = await Purged.lock(id, 'a');
  const firstFence = first.heldLock()!.fence;
  await first.unlock();
  // The test backend runs the TTL monitor every second; wait (bounded) until it deleted the record.
  const deadline = Date.now() + 15_000;
  while ((await Purged.lockModel().collection.countDocuments({ _id: id })) > 0) {
    if (Date.now() > deadline) throw new Error('the TTL monitor did not purge the released lock record within 15 s');
    await sleep(200);
  }
  const second = await Purged.lock(id, 'b');
  expect(second.heldLock()!.fence).toBeGreaterThan(firstFence);
  await second.unlock();
}, 30_000);
