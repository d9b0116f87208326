/**
 * A group handle (`acquireLocks`, `withLocks`, `acquireAllLocks`) whose member is released on its
 * own (`doc.unlock()`, `Model.unlockMany([doc])`): README / lock-group-handle.ts, "Each document
 * still saves, saveAndUnlocks and unlocks on its own; a document released that way simply leaves
 * the group." The other locks stay held and the group's signal stays live.
 *
 * A release ends the member's lease when it is SENT (model finding F2: `releaseLease` before the
 * command), and marks the member `lost: 'released'` only once its reply arrived. In between,
 * LockGroupHandle (src/lock-group-handle.ts) counted the member as still held with a lease that had
 * run out (leaseLeft is -Infinity once released): reading `handle.signal` or `handle.msLeft()`
 * lost the WHOLE group, aborting its signal with LockExpiredError ("expired", untrue: its holder
 * released it), and a renewal answered meanwhile armed the loss timer at once, which marked the
 * member 'expired' and lost the group the same way.
 * The release's reply is held back here after the server applied it (the driver's command
 * resolves late, as on a slow path back).
 * Runs on a replica set and on a standalone server.
 */
import type { Types } from 'mongoose';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('group_member_release_flight');
let conn: MonitoredConnection;
let M: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  M = await workItemModel(conn.connection, { ttl: 30_000 }, 'MemberReleaseFlight');
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

type Method = 'updateOne' | 'updateMany';

/** Holds back the reply of the next `method` call on the lock collection, after the server applied it. */
function holdNextReply(method: Method): { applied: Promise<void>; deliver(): void; restore(): void } {
  const collection = M.lockModel().collection as unknown as Record<Method, (...args: unknown[]) => Promise<unknown>>;
  const original = collection[method];
  let armed = true;
  let applied!: () => void;
  const appliedPromise = new Promise<void>((resolve) => (applied = resolve));
  let deliver!: () => void;
  const delivered = new Promise<void>((resolve) => (deliver = resolve));
  collection[method] = async function heldBack(this: unknown, ...args: unknown[]) {
    const result = await original.apply(this, args);
    if (armed) {
      armed = false;
      applied();
      await delivered;
    }
    return result;
  };
  return { applied: appliedPromise, deliver, restore: () => (collection[method] = original) };
}

async function group(): Promise<{ ids: Types.ObjectId[]; handle: Awaited<ReturnType<WorkItemModel['acquireLocks']>> }> {
  const docs = await M.create([{ title: 'a' }, { title: 'b' }, { title: 'c' }]);
  const ids = docs.map((d) => d._id);
  return { ids, handle: await M.acquireLocks(ids, 'alice', { autoExtend: false }) };
}

const ways: [string, Method, (doc: Awaited<ReturnType<WorkItemModel['acquireLocks']>>['documents'][number]) => Promise<unknown>][] = [
  ['doc.unlock()', 'updateOne', (doc) => doc.unlock()],
  ['Model.unlockMany([doc])', 'updateMany', (doc) => M.unlockMany([doc])],
];

describe.each(ways)('a member released with %s', (_how, method, release) => {
  test('while its release is on its way: the group is not lost, and it counts on the other members', async () => {
    const { ids, handle } = await group();
    const hold = holdNextReply(method);
    let during: { aborted: boolean; msLeft: number };
    try {
      const releasing = release(handle.documents[0]);
      await hold.applied;
      during = { aborted: handle.signal.aborted, msLeft: handle.msLeft() };
      hold.deliver();
      await releasing;
    } finally {
      hold.deliver();
      hold.restore();
    }
    expect(during).toEqual({ aborted: false, msLeft: expect.any(Number) });
    expect(during.msLeft).toBeGreaterThan(0);
    expect(handle.signal.aborted).toBe(false);
    expect(await Promise.all(ids.map((id) => M.isLocked(id)))).toEqual([false, true, true]);
    await handle.release();
    expect(await Promise.all(ids.map((id) => M.isLocked(id)))).toEqual([false, false, false]);
  });

  test('a renewal answered while its release is on its way does not lose the group either', async () => {
    const { ids, handle } = await group();
    const hold = holdNextReply(method);
    try {
      const releasing = release(handle.documents[0]);
      await hold.applied;
      await handle.extend();
      await sleep(50); // the loss timer the renewal armed
      expect(handle.signal.aborted).toBe(false);
      hold.deliver();
      await releasing;
    } finally {
      hold.deliver();
      hold.restore();
    }
    expect(handle.signal.aborted).toBe(false);
    expect(handle.msLeft()).toBeGreaterThan(0);
    await handle.release();
    expect(await Promise.all(ids.map((id) => M.isLocked(id)))).toEqual([false, false, false]);
  });
});
