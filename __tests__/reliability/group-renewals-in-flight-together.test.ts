/**
 * Renewals of a group follow the rule every extension of a lock follows (src/held-lock.ts,
 * startExtension / finishExtension): each renewal sets `expiresAt = $$NOW + ttl` on the server, so
 * after several of them the server keeps the LAST APPLIED one's expiry, and the order in which
 * their replies arrive does not say which one that was. Extensions of one acquisition whose
 * flights overlap therefore settle to the SHORTEST of their leases, each timed from when its
 * request was sent (PRODUCT.md property 13).
 *
 * extendGroup (src/lock-group.ts) bounded the lease while a renewal was on its way, and then set
 * each lock's lease from whichever reply arrived last: after two renewals in flight together, the
 * group believed the longer one although the server may have applied the shorter one last; and a
 * group renewal and a document's own `extendLock()` in flight together overwrote each other's
 * settlement the same way.
 *
 * The late reply: the first renewal's `update` is applied by the server at once, but its answer
 * reaches the plugin only after a second, shorter renewal was applied and answered (the driver's
 * `updateMany` of the lock collection resolves late, as on a slow network path back; the server
 * state is read independently, on the same clock, since the emulator runs on this machine).
 * A renewal answered after the lease it gives has run out (the process paused as the reply came
 * in: support/late-replies.ts) loses the group, as a single lock's late extension does
 * (LockExpiredOnArrivalError), instead of resolving as if renewed.
 * Runs on a replica set and on a standalone server.
 */
import { type Connection, type Types } from 'mongoose';
import { LockExpiredOnArrivalError } from '../../src';
import { connect, operatorConnection, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { lateReplies, on } from '../support/late-replies';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('group_renewals_together');
let conn: MonitoredConnection;
let M: WorkItemModel;
/** Reads the lock records without being one of the plugin's connections. */
let operator: Connection;

beforeAll(async () => {
  conn = await connect(db.name);
  operator = await operatorConnection(db.name);
  M = await workItemModel(conn.connection, { ttl: 30_000 }, 'GroupRenewTogether');
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
  await operator.close();
});

const itemsOf = async (count: number): Promise<Types.ObjectId[]> =>
  (await M.insertMany(Array.from({ length: count }, (_, i) => ({ title: `r${i}` })))).map((d) => d._id);

/** The server's remaining time of each lock, read without the plugin, in ms from now (the emulator shares this clock). */
async function serverMsLeft(ids: Types.ObjectId[]): Promise<number[]> {
  const records = await operator
    .db!.collection(M.lockModel().collection.collectionName)
    .find({ _id: { $in: ids } })
    .toArray();
  const now = Date.now();
  const byId = new Map(records.map((r) => [String(r._id), (r.expiresAt as Date).getTime() - now]));
  return ids.map((id) => byId.get(String(id)) ?? -Infinity);
}

test('two renewals of a group with different ttls in flight together: every document believes the shorter lease', async () => {
  const ids = await itemsOf(3);
  const handle = await M.acquireLocks(ids, 'alice', { autoExtend: false });
  // The short one is sent first: its reply comes first, the long one's last.
  await Promise.all([handle.extend(5_000), handle.extend(60_000)]);
  const believed = handle.documents.map((doc) => doc.heldLock()!.msLeft());
  expect(believed.every((ms) => ms > 0 && ms <= 5_000)).toBe(true);
  expect(handle.msLeft()).toBeGreaterThan(0);
  expect(handle.msLeft()).toBeLessThanOrEqual(5_000);
  await handle.release();
});

test("a document's own extendLock() and the group's renewal in flight together: the shorter lease", async () => {
  const ids = await itemsOf(2);
  const handle = await M.acquireLocks(ids, 'bob', { autoExtend: false });
  const [first] = handle.documents;
  await Promise.all([handle.extend(5_000), first.extendLock(60_000)]);
  expect(first.heldLock()!.msLeft()).toBeLessThanOrEqual(5_000);
  expect(handle.msLeft()).toBeLessThanOrEqual(5_000);
  await handle.release();
});

test('a renewal whose reply arrives late, after a shorter one was applied and answered, does not lengthen the lease past the server grant', async () => {
  const ids = await itemsOf(3);
  const handle = await M.acquireLocks(ids, 'carol', { autoExtend: false });
  // Hold back the answer of the next `update` of the lock collection after the server applied it.
  const collection = M.lockModel().collection as unknown as { updateMany: (...args: unknown[]) => Promise<unknown> };
  const original = collection.updateMany;
  let applied!: () => void;
  const firstApplied = new Promise<void>((resolve) => (applied = resolve));
  let release!: () => void;
  const answer = new Promise<void>((resolve) => (release = resolve));
  let held = false;
  collection.updateMany = async function heldBack(this: unknown, ...args: unknown[]) {
    const result = await original.apply(this, args);
    if (!held) {
      held = true;
      applied();
      await answer;
    }
    return result;
  };
  try {
    const long = handle.extend(60_000);
    await firstApplied; // applied on the server, its answer not yet delivered
    await handle.extend(2_000); // applied after it: the server's expiry is now this one's
    release();
    await long;
  } finally {
    collection.updateMany = original;
  }
  const server = await serverMsLeft(ids);
  const believed = handle.documents.map((doc) => doc.heldLock()!.msLeft());
  // The server keeps the short renewal (applied last): about 2 s.
  expect(server.every((ms) => ms <= 2_000)).toBe(true);
  for (let i = 0; i < ids.length; i++) expect({ i, within: believed[i] <= server[i] + 1 }).toEqual({ i, within: true });
  expect(handle.msLeft()).toBeLessThanOrEqual(Math.min(...server) + 1);
  await sleep(0);
  await handle.release().catch(() => undefined);
});

test("a renewal answered after its own lease ran out loses the group (LockExpiredOnArrivalError), as a single lock's extension does", async () => {
  const ids = await itemsOf(2);
  const handle = await M.acquireLocks(ids, 'dave', { autoExtend: false });
  const late = lateReplies(conn.connection);
  try {
    late.arm(on('update', M.lockModel().collection.collectionName), 1_600);
    const error = await handle.extend(1_000).then(() => 'resolved', (e: unknown) => e);
    expect(late.paused).toBe(1);
    expect(error).toBeInstanceOf(LockExpiredOnArrivalError);
  } finally {
    late.stop();
  }
  expect(handle.signal.aborted).toBe(true);
  expect(handle.msLeft()).toBe(0);
  expect(handle.documents.map((doc) => doc.heldLock())).toEqual([null, null]);
  expect(await Promise.all(ids.map((id) => M.isLocked(id)))).toEqual([false, false]);
});
