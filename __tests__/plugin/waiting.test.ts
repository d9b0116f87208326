/** Model.lock(..., { wait, signal }) and Model.tryLock: woken by change streams or by polling. */
import type { mongo } from 'mongoose';
import { InvalidLockOptionError, LockedError } from '../../src';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { replicaSetOnly, standaloneOnly } from '../support/topology';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('waiting');
let conn: MonitoredConnection;
let Streamed: WorkItemModel;
let Polled: WorkItemModel;
const commandsOf = (name: string) => conn.commands.filter((c) => c === name).length;

beforeAll(async () => {
  conn = await connect(db.name);
  Streamed = await workItemModel(conn.connection, { ttl: 30_000 });
  Polled = await workItemModel(conn.connection, { ttl: 30_000, changeStreams: 'never' });
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

describe.each([
  ['change streams', () => Streamed],
  ['polling', () => Polled],
])('waiting woken by %s', (mode, model) => {
  test('a waiter gets the lock as soon as the holder releases it, long before its ttl', async () => {
    const M = model();
    const { _id: id } = await M.create({ title: 'wait for me' });
    const holder = await M.lock(id, 'holder');
    const waiter = M.lock(id, 'waiter', { wait: 10_000 });
    await sleep(150);
    await holder.unlock();
    const doc = await waiter;
    expect(doc.heldLock()!.owner).toBe('waiter');
    await doc.unlock();
  });

  test('the waiter retries after the holder\'s expiry without any release', async () => {
    const M = model();
    const { _id: id } = await M.create({ title: 'crashed holder' });
    await M.lock(id, 'crashed', { ttl: 300 });
    const doc = await M.lock(id, 'waiter', { wait: 10_000 });
    expect(doc.heldLock()!.owner).toBe('waiter');
    await doc.unlock();
  });

  test('the deadline passes: LockedError saying how long it waited', async () => {
    const M = model();
    const { _id: id } = await M.create({ title: 'held' });
    const holder = await M.lock(id, 'holder');
    const started = Date.now();
    const error = await M.lock(id, 'waiter', { wait: 300 }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockedError);
    expect((error as LockedError).message).toMatch(/Waited \d+ ms/);
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
    await holder.unlock();
  });

  test('an AbortSignal ends the wait with its reason', async () => {
    const M = model();
    const { _id: id } = await M.create({ title: 'held' });
    const holder = await M.lock(id, 'holder');
    const controller = new AbortController();
    const reason = new Error(`user navigated away (${mode})`);
    setTimeout(() => controller.abort(reason), 100);
    await expect(M.lock(id, 'waiter', { wait: 10_000, signal: controller.signal })).rejects.toBe(reason);
    expect(await M.isLocked(id)).toBe(true);
    await holder.unlock();
  });
});

/** Nine waiters on three documents, woken by the holders' releases; returns the change-stream opens seen. */
async function nineWaiters(): Promise<mongo.Document[]> {
  const ids = await Promise.all([1, 2, 3].map(async (n) => (await Streamed.create({ title: `doc ${n}` }))._id));
  const holders = await Promise.all(ids.map((id) => Streamed.lock(id, 'holder')));
  conn.resetCommands();
  const watchAggregates: mongo.Document[] = [];
  const listener = (event: { commandName: string; command: mongo.Document }) => {
    if (event.commandName === 'aggregate' && event.command.pipeline?.[0]?.$changeStream) watchAggregates.push(event.command);
  };
  conn.connection.getClient().on('commandStarted', listener);
  try {
    const waiters = ids.flatMap((id) => [1, 2, 3].map((n) => Streamed.lock(id, `waiter-${n}`, { wait: 10_000 }).then((doc) => doc.unlock())));
    await sleep(300);
    for (const holder of holders) await holder.unlock();
    await Promise.all(waiters);
  } finally {
    conn.connection.getClient().off('commandStarted', listener);
  }
  return watchAggregates;
}

replicaSetOnly('change streams exist only on replica sets and sharded clusters')(
  'with change streams, one stream serves every waiter and a waiter makes few attempts',
  async () => {
    const watchAggregates = await nineWaiters();
    // At most one: an earlier test of this file may have opened the shared stream already.
    expect(watchAggregates.length).toBeLessThanOrEqual(1);
    // 9 waiters: a handful of attempts each (first try, release wake-ups, handoffs), not a poll loop.
    expect(commandsOf('findAndModify')).toBeLessThan(9 * 8);
  },
);

standaloneOnly('the polling fallback is what a standalone server uses')(
  'on a standalone server waiters poll: no change stream is opened, and every waiter still gets its turn',
  async () => {
    const watchAggregates = await nineWaiters();
    expect(watchAggregates).toEqual([]);
    expect(commandsOf('findAndModify')).toBeGreaterThanOrEqual(9 + 9);
  },
);

describe('tryLock', () => {
  test('resolves to the document when free and to null when held', async () => {
    const { _id: id } = await Streamed.create({ title: 'try' });
    const first = await Streamed.tryLock(id, 'a');
    expect(first).not.toBeNull();
    expect(await Streamed.tryLock(id, 'b')).toBeNull();
    await first!.unlock();
    const second = await Streamed.tryLock(id, 'b');
    expect(second!.heldLock()!.owner).toBe('b');
    await second!.unlock();
  });

  test('does not accept wait (it never waits)', async () => {
    const { _id: id } = await Streamed.create({ title: 'try' });
    await expect(Streamed.tryLock(id, 'a', { wait: 5 } as never)).rejects.toBeInstanceOf(InvalidLockOptionError);
  });
});

test.each<[string, unknown]>([
  ['a negative wait', { wait: -1 }],
  ['a fractional wait', { wait: 1.5 }],
  ['a string wait', { wait: '100' }],
  ['a signal that is not an AbortSignal', { signal: { aborted: false } }],
])('lock refuses %s', async (_label, options) => {
  const { _id: id } = await Streamed.create({ title: 'x' });
  await expect(Streamed.lock(id, 'a', options as never)).rejects.toBeInstanceOf(InvalidLockOptionError);
});
