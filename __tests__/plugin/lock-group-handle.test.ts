/**
 * Model.acquireLocks / Model.withLocks: the locks of a group renewed together (one command), an
 * AbortSignal that fires when any of them is lost, and one command that releases the group.
 */
import type { Types, mongo } from 'mongoose';
import { InvalidLockArgumentError, InvalidLockOptionError, LockExpiredError, LockNotHeldError } from '../../src';
import { connect, sleep, testDatabase, waitUntil, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('grouphandle');
let conn: MonitoredConnection;
let WorkItem: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  WorkItem = await workItemModel(conn.connection, { ttl: 10_000 });
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

const itemsOf = async (count: number): Promise<Types.ObjectId[]> =>
  (await WorkItem.insertMany(Array.from({ length: count }, (_, i) => ({ title: `h${i}` })))).map((d) => d._id);

const mine = async (ids: Types.ObjectId[], owner: string) => (await WorkItem.lockStatus(ids, { owner })).map((s) => s?.mine === true);

/** Full command documents sent while `fn` runs. */
async function commandsDuring(fn: () => Promise<unknown>): Promise<mongo.Document[]> {
  const seen: mongo.Document[] = [];
  const listener = (event: { commandName: string; command: mongo.Document }) => {
    if (!['hello', 'isMaster', 'ismaster', 'ping', 'endSessions'].includes(event.commandName)) seen.push(event.command);
  };
  conn.connection.getClient().on('commandStarted', listener);
  try {
    await fn();
  } finally {
    conn.connection.getClient().off('commandStarted', listener);
  }
  return seen;
}

test('acquireLocks: the documents, their fences, and release() in one command', async () => {
  const ids = await itemsOf(3);
  const handle = await WorkItem.acquireLocks(ids, 'session-a', { autoExtend: false });
  expect(handle.documents.map((d) => d._id.toHexString())).toEqual(ids.map((id) => id.toHexString()));
  expect(handle.fences).toEqual(handle.documents.map((d) => d.heldLock()!.fence));
  expect(handle.signal.aborted).toBe(false);
  const commands = await commandsDuring(() => handle.release());
  expect(commands.map((c) => Object.keys(c)[0])).toEqual(['update']);
  expect(await mine(ids, 'session-a')).toEqual([false, false, false]);
  expect(handle.documents.map((d) => d.heldLock())).toEqual([null, null, null]);
});

test('renewed together while held: one update per renewal, all still held long after the ttl', async () => {
  const ids = await itemsOf(4);
  // Renewed when a third of the ttl is left: with 4 s, every renewal has over a second of slack
  // on a loaded machine. Watched until two renewals were sent and the first expiry is a second
  // past (about 5.5 s; bounded), instead of a fixed 9 s.
  const handle = await WorkItem.acquireLocks(ids, 'session-a', { ttl: 4_000 });
  const firstExpiry = handle.expiresAt.getTime();
  const seen: string[] = [];
  const listener = (event: { commandName: string }) => seen.push(event.commandName);
  conn.connection.getClient().on('commandStarted', listener);
  await waitUntil(() => seen.filter((name) => name === 'update').length >= 2 && Date.now() > firstExpiry + 1_000, 30_000, 50);
  conn.connection.getClient().off('commandStarted', listener);
  expect(handle.signal.aborted).toBe(false);
  expect(await mine(ids, 'session-a')).toEqual([true, true, true, true]);
  expect(handle.expiresAt.getTime()).toBeGreaterThan(firstExpiry);
  // Renewals only: each one update, never one per document.
  const renewals = seen.filter((name) => name === 'update').length;
  expect(renewals).toBeGreaterThanOrEqual(2);
  expect(renewals).toBeLessThanOrEqual(10);
  expect(seen.filter((name) => name !== 'update' && name !== 'getMore' && name !== 'aggregate')).toEqual([]);
  await handle.release();
});

test('extend(): one command; a lost lock aborts the signal with the error naming it', async () => {
  const ids = await itemsOf(3);
  const handle = await WorkItem.acquireLocks(ids, 'session-a', { autoExtend: false });
  const commands = await commandsDuring(() => handle.extend(20_000));
  expect(commands.map((c) => Object.keys(c)[0])).toEqual(['update']);
  expect(commands[0].updates[0].multi).toBe(true);
  await WorkItem.forceUnlock(ids[2]);
  const taker = await WorkItem.lock(ids[2], 'session-b');
  const error = await handle.extend().catch((e: unknown) => e);
  expect(error).toBeInstanceOf(LockNotHeldError);
  expect((error as LockNotHeldError).reason).toBe('taken_over');
  expect(((error as LockNotHeldError).documentId as Types.ObjectId).equals(ids[2])).toBe(true);
  expect(handle.signal.aborted).toBe(true);
  expect(handle.signal.reason).toBe(error);
  // Disposing a lost group releases what is still held and does not throw.
  await handle[Symbol.asyncDispose ?? Symbol.for('Symbol.asyncDispose')]();
  expect(await mine(ids, 'session-a')).toEqual([false, false, false]);
  expect(await mine([ids[2]], 'session-b')).toEqual([true]);
  await taker.unlock();
});

test('without autoExtend the signal aborts with LockExpiredError when the first lock expires', async () => {
  const ids = await itemsOf(2);
  const handle = await WorkItem.acquireLocks(ids, 'session-a', { ttl: 500, autoExtend: false });
  const reason = await new Promise<unknown>((resolve) => handle.signal.addEventListener('abort', () => resolve(handle.signal.reason), { once: true }));
  expect(reason).toBeInstanceOf(LockExpiredError);
});

test('a bad ttl for extend() is refused before anything is sent', async () => {
  const ids = await itemsOf(1);
  const handle = await WorkItem.acquireLocks(ids, 'session-a', { autoExtend: false });
  conn.resetCommands();
  await expect(handle.extend(-5)).rejects.toBeInstanceOf(InvalidLockOptionError);
  expect(conn.commands).toEqual([]);
  await handle.release();
});

describe('withLocks', () => {
  test('runs fn with the documents and the signal, returns its result, releases the group', async () => {
    const ids = await itemsOf(3);
    const result = await WorkItem.withLocks(ids, 'session-a', async (docs, signal) => {
      expect(signal.aborted).toBe(false);
      expect(await mine(ids, 'session-a')).toEqual([true, true, true]);
      for (const doc of docs) doc.edits += 1;
      await Promise.all(docs.map((doc) => doc.save()));
      return docs.length;
    });
    expect(result).toBe(3);
    expect(await mine(ids, 'session-a')).toEqual([false, false, false]);
    expect((await WorkItem.find({ _id: { $in: ids } })).map((d) => d.edits)).toEqual([1, 1, 1]);
  });

  test('a document saveAndUnlock-ed inside leaves the group: renewal and the final release skip it', async () => {
    const ids = await itemsOf(3);
    await WorkItem.withLocks(
      ids,
      'session-a',
      async (docs) => {
        docs[1].title = 'done early';
        await docs[1].saveAndUnlock();
        await sleep(5_000); // past the ttl: held only by renewals
        expect(await mine(ids, 'session-a')).toEqual([true, false, true]);
      },
      { ttl: 3_000 },
    );
    expect(await mine(ids, 'session-a')).toEqual([false, false, false]);
  });

  test('an error of fn reaches the caller unchanged, and the group is released', async () => {
    const ids = await itemsOf(2);
    const boom = new Error('work failed');
    await expect(WorkItem.withLocks(ids, 'session-a', () => Promise.reject(boom))).rejects.toBe(boom);
    expect(await mine(ids, 'session-a')).toEqual([false, false]);
  });

  test('fn must be a function (nothing sent)', async () => {
    conn.resetCommands();
    await expect(WorkItem.withLocks([], 'session-a', 'nope' as never)).rejects.toBeInstanceOf(InvalidLockArgumentError);
    expect(conn.commands).toEqual([]);
  });
});
