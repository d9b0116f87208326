/**
 * PRODUCT.md property 13 and README "Keeping a lock alive" / tickets: every instance of one
 * acquisition in this process shares one lease, whichever call made it. Since f0c6a94 a lease
 * enters this process's map of leases only when an instance's ticket is read (held-lock.ts), so
 * these cases pin that an acquisition made by each kind of call, whose ticket was read in this
 * process and then resumed here, still shares its lease with the resumed instance: a release
 * through one ends the other's belief, and extensions in flight together settle to the shortest.
 *
 * Independent check: the emulator runs on this machine, so a lock record's `expiresAt` (server
 * clock) and `Date.now()` read one clock.
 */
import type { Types } from 'mongoose';
import { LockNotHeldError, type LockableDocument } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItem, type WorkItemModel } from '../support/work-item';

const db = testDatabase('leaseshared');
let conn: MonitoredConnection;
let M: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  M = await workItemModel(conn.connection, { ttl: 30_000 }, 'LeaseShared');
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

type Doc = LockableDocument<WorkItem>;
const left = (doc: Doc) => doc.heldLock()?.msLeft() ?? 0;

/** Milliseconds past the server's expiry that `doc` counts on (≤ 0: within the grant); what it counts on at all once the lock is free. */
async function beliefPastServer(doc: Doc, id: Types.ObjectId): Promise<number> {
  const info = await M.getLock(id);
  return info ? Date.now() + left(doc) - info.expiresAt.getTime() : left(doc);
}

const newItem = async (title: string) => (await M.create({ title, status: 'open' }))._id;

test('extendLock on the original (30 s) and on a resumed instance (500 ms) in flight together: neither counts on more than the server grants', async () => {
  const id = await newItem('extended together');
  const original = await M.lock(id, 'alice');
  const resumed = await M.lock(id, 'alice', { resume: original.heldLock()!.ticket });
  await Promise.all([original.extendLock(30_000), resumed.extendLock(500)]);
  expect(await beliefPastServer(original, id)).toBeLessThanOrEqual(1);
  expect(await beliefPastServer(resumed, id)).toBeLessThanOrEqual(1);
  expect(left(original)).toBeLessThanOrEqual(500);
});

test('a ticket read after the release: the resume is refused as released, and the original keeps believing nothing', async () => {
  const id = await newItem('ticket after release');
  const original = await M.lock(id, 'alice');
  const { token } = original.heldLock()!;
  const lock = original.heldLock()!;
  await original.unlock();
  const ticket = lock.ticket; // the HeldLock object kept from before the release
  const error = await M.lock(id, 'alice', { resume: ticket }).then(() => undefined, (e: unknown) => e);
  expect(error).toBeInstanceOf(LockNotHeldError);
  expect((error as LockNotHeldError).reason).toBe('released');
  expect({ msLeft: lock.msLeft(), token: lock.token }).toEqual({ msLeft: 0, token });
});

test('Model.unlock with the ticket of an acquisition taken here: the original learns it at once', async () => {
  const id = await newItem('Model.unlock with ticket');
  const original = await M.lock(id, 'alice');
  await expect(M.unlock(id, 'alice', { ticket: original.heldLock()!.ticket })).resolves.toBe(true);
  expect(left(original)).toBe(0);
});

test('a lockMany member resumed here: the group release ends the resumed belief, and the resumed unlock ends the member\'s', async () => {
  const [a, b] = await Promise.all([newItem('member a'), newItem('member b')]);
  const [docA, docB] = await M.lockMany([a, b], 'alice');
  const resumedA = await M.lock(a, 'alice', { resume: docA.heldLock()!.ticket });
  const resumedB = await M.lock(b, 'alice', { resume: docB.heldLock()!.ticket });
  await resumedA.unlock();
  expect(left(docA)).toBe(0);
  await M.unlockMany([docB]);
  expect(left(resumedB)).toBe(0);
});

test('a lockNext document resumed here: the original unlock ends the resumed belief', async () => {
  const id = await newItem('next job');
  const job = (await M.lockNext({ _id: id }, 'worker-1'))!;
  expect(job._id).toEqual(id);
  const resumed = await M.lock(id, 'worker-1', { resume: job.heldLock()!.ticket });
  await job.unlock();
  expect(left(resumed)).toBe(0);
});

test('an acquireLock handle whose acquisition was resumed and released through the resumed instance: its signal aborts with released', async () => {
  const id = await newItem('handle resumed');
  const handle = await M.acquireLock(id, 'alice', { autoExtend: false });
  const resumed = await M.lock(id, 'alice', { resume: handle.document.heldLock()!.ticket });
  await resumed.unlock();
  expect(handle.signal.aborted).toBe(true);
  expect(handle.signal.reason).toBeInstanceOf(LockNotHeldError);
  expect((handle.signal.reason as LockNotHeldError).reason).toBe('released');
  expect(handle.msLeft()).toBe(0);
});
