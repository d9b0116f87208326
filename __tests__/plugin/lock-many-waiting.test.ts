/**
 * Model.lockMany(..., { wait, signal }): waiting for a whole group, woken by change streams or by
 * polling; overlapping callers in opposite orders both finish (release and retry, no deadlock).
 */
import type { Types } from 'mongoose';
import { LockedError } from '../../src';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('lockmanywait');
let conn: MonitoredConnection;
let Streamed: WorkItemModel;
let Polled: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  Streamed = await workItemModel(conn.connection, { ttl: 30_000 });
  Polled = await workItemModel(conn.connection, { ttl: 30_000, changeStreams: 'never' });
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

const itemsOf = async (M: WorkItemModel, count: number): Promise<Types.ObjectId[]> =>
  (await M.insertMany(Array.from({ length: count }, (_, i) => ({ title: `w${i}` })))).map((d) => d._id);

describe.each([
  ['change streams', () => Streamed],
  ['polling', () => Polled],
])('waiting woken by %s', (_mode, model) => {
  test('a waiter gets the whole group as soon as the last blocker releases, long before the ttl', async () => {
    const M = model();
    const ids = await itemsOf(M, 4);
    const first = await M.lock(ids[1], 'holder-1');
    const second = await M.lock(ids[3], 'holder-2');
    const started = Date.now();
    let settled = false;
    const waiter = M.lockMany(ids, 'waiter', { wait: 20_000 }).finally(() => {
      settled = true;
    });
    await sleep(150);
    await first.unlock();
    await sleep(300);
    // Still one blocker: the waiter has not returned. (Between its rounds it holds nothing; during a
    // round, for a few milliseconds, whatever that round took.)
    expect(settled).toBe(false);
    expect((await M.lockStatus([ids[3]], { owner: 'waiter' }))[0]?.mine).toBe(false);
    await second.unlock();
    const docs = await waiter;
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(docs.map((d) => d.heldLock()!.owner)).toEqual(['waiter', 'waiter', 'waiter', 'waiter']);
    await M.unlockMany(docs);
  });

  test('a waiter that is still blocked takes nothing: after a partial release it only reads (no update) until the group is free', async () => {
    const M = model();
    const waiterConn = await connect(db.name);
    const stop = new AbortController();
    let waiter: Promise<unknown> | undefined;
    try {
      const W = await workItemModel(waiterConn.connection, { ttl: 30_000, changeStreams: M === Polled ? 'never' : 'auto' }, M.modelName);
      const ids = await itemsOf(M, 3);
      const first = await M.lock(ids[0], 'holder-1');
      const second = await M.lock(ids[2], 'holder-2');
      const waiting = W.lockMany(ids, 'waiter', { wait: 20_000, signal: stop.signal });
      waiter = waiting.catch(() => undefined);
      await sleep(300);
      waiterConn.resetCommands();
      await first.unlock();
      // Woken by the stream, or at its next poll (jittered backoff capped at 1 s): wait for that
      // read rather than guessing how long it takes on a loaded machine.
      const deadline = Date.now() + 10_000;
      while (!waiterConn.commands.includes('find') && Date.now() < deadline) await sleep(50);
      await sleep(100);
      // Read while ids[2] is still held: reads only.
      expect(waiterConn.commands.filter((c) => c === 'update')).toEqual([]);
      expect(waiterConn.commands.filter((c) => c === 'find').length).toBeGreaterThanOrEqual(1);
      await second.unlock();
      const docs = await waiting;
      expect(docs.map((d) => d.heldLock()!.owner)).toEqual(['waiter', 'waiter', 'waiter']);
      await W.unlockMany(docs);
    } finally {
      // A failed expectation must not leave the waiter running on a closed connection (its
      // rejection would land in the next test).
      stop.abort(new Error('test over'));
      await waiter;
      await waiterConn.close();
    }
  });

  test('the waiter retries after the blockers\' expiry without any release', async () => {
    const M = model();
    const ids = await itemsOf(M, 3);
    await M.lock(ids[0], 'crashed', { ttl: 300 });
    await M.lock(ids[2], 'crashed-too', { ttl: 500 });
    const docs = await M.lockMany(ids, 'waiter', { wait: 20_000 });
    expect(docs.map((d) => d.heldLock()!.owner)).toEqual(['waiter', 'waiter', 'waiter']);
    await M.unlockMany(docs);
  });

  test('the deadline passes: LockedError naming the blocker and saying how long it waited; nothing held', async () => {
    const M = model();
    const ids = await itemsOf(M, 3);
    const holder = await M.lock(ids[1], 'holder', { label: 'Hana' });
    const started = Date.now();
    const error = await M.lockMany(ids, 'waiter', { wait: 400 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockedError);
    expect(((error as LockedError).documentId as Types.ObjectId).equals(ids[1])).toBe(true);
    expect((error as LockedError).label).toBe('Hana');
    expect((error as LockedError).message).toMatch(/Waited \d+ ms/);
    expect(Date.now() - started).toBeGreaterThanOrEqual(390);
    expect((await M.lockStatus(ids)).map((s) => (s ? s.label : null))).toEqual([null, 'Hana', null]);
    await holder.unlock();
  });

  test('an abort signal ends the wait with its reason; nothing held', async () => {
    const M = model();
    const ids = await itemsOf(M, 2);
    const holder = await M.lock(ids[0], 'holder');
    const controller = new AbortController();
    const waiting = M.lockMany(ids, 'waiter', { wait: 20_000, signal: controller.signal });
    await sleep(100);
    const reason = new Error('user went away');
    controller.abort(reason);
    await expect(waiting).rejects.toBe(reason);
    expect(await M.isLocked(ids[1])).toBe(false);
    await holder.unlock();
  });

  test('callers locking overlapping sets in opposite orders all finish (no deadlock), one at a time', async () => {
    const M = model();
    const ids = await itemsOf(M, 6);
    const orders = [ids, [...ids].reverse(), [ids[2], ids[5], ids[0], ids[3]], [ids[4], ids[1], ids[3]]];
    const holders = new Map<string, number>();
    let overlaps = 0;
    const run = async (order: Types.ObjectId[], who: string) => {
      for (let i = 0; i < 3; i++) {
        const docs = await M.lockMany(order, who, { wait: 30_000 });
        for (const d of docs) {
          const key = d._id.toHexString();
          if (holders.has(key)) overlaps++;
          holders.set(key, 1);
        }
        await sleep(5);
        for (const d of docs) holders.delete(d._id.toHexString());
        await M.unlockMany(docs);
      }
    };
    const started = Date.now();
    await Promise.all(orders.map((order, i) => run(order, `caller-${i}`)));
    expect(overlaps).toBe(0);
    expect(Date.now() - started).toBeLessThan(60_000);
    expect(await M.lockStatus(ids)).toEqual(ids.map(() => null));
  }, 90_000);
});
