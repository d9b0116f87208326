/**
 * Model.lockMany(..., { wait, signal }): waiting for a whole group, woken by change streams or by
 * polling; overlapping callers in opposite orders both finish (canonical order, no deadlock).
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
    // Still one blocker: the waiter has not returned. (It holds the canonical prefix it got, ids[0]
    // to ids[2], and waits for ids[3].)
    expect(settled).toBe(false);
    expect((await M.lockStatus([ids[3]], { owner: 'waiter' }))[0]?.mine).toBe(false);
    await second.unlock();
    const docs = await waiter;
    expect(Date.now() - started).toBeLessThan(15_000);
    expect(docs.map((d) => d.heldLock()!.owner)).toEqual(['waiter', 'waiter', 'waiter', 'waiter']);
    await M.unlockMany(docs);
  });

  // Ordered waiting (issue 17 item 2; lock-group.ts waitInOrder). The ids of one insertMany are
  // increasing ObjectIds, so their canonical order (id keys) is their order here.
  test('a waiting group keeps the canonical prefix it got and reserves the next document: a caller that takes it the instant it is released is refused', async () => {
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
      await first.unlock();
      // Woken by the stream, or at its next poll: wait until it holds the prefix [0, 1] rather than
      // guessing how long that takes on a loaded machine.
      const mine = async () => (await M.lockStatus(ids, { owner: 'waiter' })).map((s) => s?.mine === true);
      const deadline = Date.now() + 10_000;
      while (JSON.stringify(await mine()) !== JSON.stringify([true, true, false]) && Date.now() < deadline) await sleep(50);
      expect(await mine()).toEqual([true, true, false]);
      // ids[2] is reserved for the group (sent in the background when it found ids[2] held): give
      // that command time to land, then release ids[2] and take it again at once, as a barging
      // worker would. Refused: the group waits for it (before ordered waiting, the barger got it).
      await sleep(500);
      await second.unlock();
      const barger = await M.lock(ids[2], 'barger').then(
        () => 'granted',
        (error: unknown) => (error instanceof LockedError ? 'LockedError' : String(error)),
      );
      expect(barger).toBe('LockedError');
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

  test('a group granted by its ordered step sends no release on the way out (its prefix was renewed under the grant\'s token), and one renewal to the ttl', async () => {
    const M = model();
    const waiterConn = await connect(db.name);
    try {
      const W = await workItemModel(waiterConn.connection, { ttl: 30_000, changeStreams: M === Polled ? 'never' : 'auto' }, M.modelName);
      const ids = await itemsOf(M, 2);
      const second = await M.lock(ids[1], 'holder');
      const waiting = W.lockMany(ids, 'waiter', { wait: 20_000 });
      const deadline = Date.now() + 10_000;
      while (!(await M.lockStatus([ids[0]], { owner: 'waiter' }))[0]?.mine && Date.now() < deadline) await sleep(50);
      // From the release of ids[1] on: the releases by token (`token` in the filter, the update
      // clears the token) the waiter sends, and its renewals by token (the update sets only the
      // expiry: the step took the group with its short step lease and renews it to the ttl).
      const releases: unknown[] = [];
      const renewals: unknown[] = [];
      const listener = (event: { commandName: string; command: { updates?: { q?: { token?: unknown }; u?: unknown }[] } }) => {
        const statement = event.command.updates?.[0];
        if (event.commandName !== 'update' || typeof statement?.q?.token !== 'string') return;
        const set = Array.isArray(statement.u) ? (statement.u[0] as { $set?: Record<string, unknown> }).$set : undefined;
        if (set && Object.keys(set).join() === 'expiresAt') renewals.push(statement.q);
        else releases.push(statement.q);
      };
      waiterConn.connection.getClient().on('commandStarted', listener);
      await second.unlock();
      const docs = await waiting;
      waiterConn.connection.getClient().off('commandStarted', listener);
      expect(docs.map((d) => d.heldLock()!.owner)).toEqual(['waiter', 'waiter']);
      expect(releases).toEqual([]);
      expect(renewals).toHaveLength(1);
      await W.unlockMany(docs);
    } finally {
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
