/**
 * Issue 18, Found 3: a resume without `ttl` keeps the acquisition's ttl. Before, a page heartbeat
 * built on `Model.lock(id, owner, { resume: ticket })` moved the expiry to the PLUGIN's ttl, so a
 * 10-minute edit lock quietly became a 30-second one, while `doc.extendLock()` kept the
 * acquisition's. The lock record now stores the acquisition's ttl (written by the acquisition:
 * `lock`, `lockMany`, `lockNext`), and the resume's pipeline uses it when the caller gives none;
 * a record written before the field existed falls back to the plugin's ttl.
 * Expiries are compared with the server's `$$NOW` as read back from the record (getLock's
 * `remainingMs`), never with this process's clock.
 */
import type { Types } from 'mongoose';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('resumettl');
let conn: MonitoredConnection;
let WorkItem: WorkItemModel;

const PLUGIN_TTL = 30_000;
const LONG = 600_000;

beforeAll(async () => {
  conn = await connect(db.name);
  WorkItem = await workItemModel(conn.connection, { ttl: PLUGIN_TTL });
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

const newItem = async (title = 'Refund #4711') => (await WorkItem.create({ title }))._id;

/** Milliseconds the server says are left on the lock (its `$$NOW` against the record's expiry). */
async function serverRemaining(id: Types.ObjectId): Promise<number> {
  const lock = await WorkItem.getLock(id);
  if (!lock) throw new Error('the document is not locked');
  return lock.remainingMs;
}

/** The lock record as stored (the plugin's own collection), for the `ttl` field. */
async function storedRecord(id: Types.ObjectId): Promise<Record<string, unknown> | null> {
  return WorkItem.lockModel().collection.findOne({ _id: id });
}

test("a resume without ttl keeps a 10-minute acquisition at 10 minutes, as extendLock does", async () => {
  const id = await newItem();
  const opened = await WorkItem.lock(id, 'alice-session', { ttl: LONG });
  expect(opened.heldLock()!.ttl).toBe(LONG);
  expect((await storedRecord(id))!.ttl).toBe(LONG);

  const resumed = await WorkItem.lock(id, 'alice-session', { resume: opened.heldLock()!.ticket });
  // A heartbeat: the expiry moves to ten minutes from the server's now, not to the plugin's 30 s.
  expect(await serverRemaining(id)).toBeGreaterThan(LONG - 60_000);
  expect(resumed.heldLock()!.ttl).toBe(LONG);
  expect(resumed.heldLock()!.msLeft()).toBeGreaterThan(PLUGIN_TTL);

  // extendLock() on the resumed document defaults to the same ttl.
  await resumed.extendLock();
  expect(await serverRemaining(id)).toBeGreaterThan(LONG - 60_000);
  await resumed.unlock();
});

test('a resume with ttl uses it for that call; the acquisition keeps its own ttl for the next resume', async () => {
  const id = await newItem();
  const opened = await WorkItem.lock(id, 'alice-session', { ttl: LONG });
  const ticket = opened.heldLock()!.ticket;

  const short = await WorkItem.lock(id, 'alice-session', { resume: ticket, ttl: 5_000 });
  expect(short.heldLock()!.ttl).toBe(5_000);
  expect(await serverRemaining(id)).toBeLessThanOrEqual(5_000);
  expect((await storedRecord(id))!.ttl).toBe(LONG);

  const again = await WorkItem.lock(id, 'alice-session', { resume: ticket });
  expect(again.heldLock()!.ttl).toBe(LONG);
  expect(await serverRemaining(id)).toBeGreaterThan(LONG - 60_000);
  await again.unlock();
});

test("a lock taken with the plugin's ttl is resumed with the plugin's ttl", async () => {
  const id = await newItem();
  const opened = await WorkItem.lock(id, 'alice-session');
  expect((await storedRecord(id))!.ttl).toBe(PLUGIN_TTL);
  const resumed = await WorkItem.lock(id, 'alice-session', { resume: opened.heldLock()!.ticket });
  expect(resumed.heldLock()!.ttl).toBe(PLUGIN_TTL);
  const remaining = await serverRemaining(id);
  expect(remaining).toBeGreaterThan(0);
  expect(remaining).toBeLessThanOrEqual(PLUGIN_TTL);
  await resumed.unlock();
});

test('a record written before the field existed (no ttl stored) is resumed with the plugin\'s ttl', async () => {
  const id = await newItem();
  const opened = await WorkItem.lock(id, 'alice-session', { ttl: LONG });
  await WorkItem.lockModel().collection.updateOne({ _id: id }, { $unset: { ttl: '' } });
  const resumed = await WorkItem.lock(id, 'alice-session', { resume: opened.heldLock()!.ticket });
  expect(resumed.heldLock()!.ttl).toBe(PLUGIN_TTL);
  const remaining = await serverRemaining(id);
  expect(remaining).toBeGreaterThan(0);
  expect(remaining).toBeLessThanOrEqual(PLUGIN_TTL);
  await resumed.unlock();
});

test('locks taken by lockMany and lockNext keep their ttl when a member is resumed', async () => {
  const ids = [await newItem('many 1'), await newItem('many 2')];
  const docs = await WorkItem.lockMany(ids, 'bob-session', { ttl: LONG });
  expect((await storedRecord(ids[1]!))!.ttl).toBe(LONG);
  const resumed = await WorkItem.lock(ids[1]!, 'bob-session', { resume: docs[1]!.heldLock()!.ticket });
  expect(resumed.heldLock()!.ttl).toBe(LONG);
  expect(await serverRemaining(ids[1]!)).toBeGreaterThan(LONG - 60_000);
  await WorkItem.unlockMany(docs);

  const next = await newItem('next in line');
  const claimed = await WorkItem.lockNext({ _id: next }, 'worker-1', { ttl: LONG });
  expect(claimed).not.toBeNull();
  expect((await storedRecord(next))!.ttl).toBe(LONG);
  const continued = await WorkItem.lock(next, 'worker-1', { resume: claimed!.heldLock()!.ticket });
  expect(continued.heldLock()!.ttl).toBe(LONG);
  expect(await serverRemaining(next)).toBeGreaterThan(LONG - 60_000);
  await continued.unlock();
});
