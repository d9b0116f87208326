/**
 * Model.lockNext(filter, owner, { wait, signal }): waits until a document can be claimed or the
 * deadline passes. Woken by lock releases and, where change streams exist, by inserts and updates
 * of the model's documents (src/next-feed.ts); polling otherwise.
 */
import type { mongo } from 'mongoose';
import { InvalidLockOptionError } from '../../src';
import { nextFeed } from '../../src/next-feed';
import { connect, sleep, testDatabase, waitUntil, type MonitoredConnection } from '../support/db';
import { jobModel, type JobModel } from '../support/job';
import { replicaSetOnly, standaloneOnly } from '../support/topology';

const db = testDatabase('locknext_wait');

// Waits and fail-point stalls of several seconds each: generous bounds for a loaded machine.
jest.setTimeout(120_000);
let conn: MonitoredConnection;

beforeAll(async () => {
  conn = await connect(db.name);
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

const raw = (model: JobModel) => model.collection as unknown as mongo.Collection<mongo.Document>;

describe.each([
  ['change streams where the deployment has them', 'auto'],
  ['polling', 'never'],
] as const)('waiting, woken by %s', (_mode, changeStreams) => {
  const model = () => jobModel(conn.connection, { ttl: 30_000, changeStreams });

  test('an insert of a matching document ends the wait with that document', async () => {
    const Q = await model();
    await Q.create({ status: 'done', payload: 'not this one' });
    const waiting = Q.lockNext({ status: 'queued' }, 'worker', { wait: 20_000 });
    await sleep(300);
    await Q.create({ payload: 'new job' });
    const doc = await waiting;
    expect(doc!.payload).toBe('new job');
    expect(doc!.heldLock()!.owner).toBe('worker');
  });

  test('an update that makes a document match ends the wait', async () => {
    const Q = await model();
    const { _id } = await Q.create({ status: 'done', payload: 'retry me' });
    const waiting = Q.lockNext({ status: 'queued' }, 'worker', { wait: 20_000 });
    await sleep(300);
    await Q.updateOne({ _id }, { $set: { status: 'queued' } });
    expect((await waiting)!.payload).toBe('retry me');
  });

  test('a release ends the wait', async () => {
    const Q = await model();
    const { _id } = await Q.create({ payload: 'held' });
    const holder = await Q.lock(_id, 'other-worker');
    const waiting = Q.lockNext({}, 'worker', { wait: 20_000 });
    await sleep(300);
    await holder.unlock();
    const doc = await waiting;
    expect(doc!.payload).toBe('held');
    expect(doc!.heldLock()!.owner).toBe('worker');
  });

  test('a holder whose lock simply expires (no release, no event) is noticed', async () => {
    const Q = await model();
    const { _id } = await Q.create({ payload: 'crashed holder' });
    await Q.lock(_id, 'crashed', { ttl: 400 });
    const doc = await Q.lockNext({}, 'worker', { wait: 20_000 });
    expect(doc!.payload).toBe('crashed holder');
  });

  test('the deadline passes: null, after waiting at least that long', async () => {
    const Q = await model();
    const started = Date.now();
    expect(await Q.lockNext({}, 'worker', { wait: 400 })).toBeNull();
    expect(Date.now() - started).toBeGreaterThanOrEqual(390);
  });

  test('an AbortSignal ends the wait with its reason', async () => {
    const Q = await model();
    const controller = new AbortController();
    const reason = new Error('worker shutting down');
    setTimeout(() => controller.abort(reason), 150);
    await expect(Q.lockNext({}, 'worker', { wait: 20_000, signal: controller.signal })).rejects.toBe(reason);
  });

  test('an already aborted signal rejects before any command', async () => {
    const Q = await model();
    const reason = new Error('already stopped');
    conn.resetCommands();
    await expect(Q.lockNext({}, 'worker', { wait: 1_000, signal: AbortSignal.abort(reason) })).rejects.toBe(reason);
    expect(conn.commands).toEqual([]);
  });

  test('several waiters, documents arriving one by one: each document goes to exactly one waiter', async () => {
    const Q = await model();
    const waiters = Array.from({ length: 4 }, (_, i) => Q.lockNext({}, `w${i}`, { wait: 20_000 }));
    await sleep(200);
    for (let i = 0; i < 4; i++) {
      await Q.create({ payload: `job ${i}` });
      await sleep(50);
    }
    const got = await Promise.all(waiters);
    expect(got.map((d) => d!.payload).sort()).toEqual(['job 0', 'job 1', 'job 2', 'job 3']);
  });
});

describe('the change feed (src/next-feed.ts)', () => {
  replicaSetOnly('change streams exist only on replica sets and sharded clusters')('an insert into the collection and a release in the lock collection each wake a subscriber; an acquisition, a renewal, a reservation and a guarded write claim do not', async () => {
    const Q = await jobModel(conn.connection, { ttl: 30_000 });
    const { _id } = await Q.create({ payload: 'x' });
    const feed = nextFeed(raw(Q), Q.lockModel().collection as unknown as mongo.Collection<mongo.Document>, async () => true);
    try {
      // Events are delivered by the stream's getMore (maxAwaitTimeMS 1 s): a wake-up is waited for
      // up to 20 s (a loaded machine), a non-event watched for 5 s (about five getMores).
      const WAKE_MS = 20_000;
      const QUIET_MS = 5_000;
      const woken = async (action: () => Promise<unknown>, windowMs: number): Promise<boolean> => {
        const subscription = feed.subscribe();
        expect(await subscription.live).toBe(true);
        let fired = false;
        void subscription.changed.then(() => (fired = true));
        await action();
        await waitUntil(() => fired, windowMs, 100);
        subscription.cancel();
        return fired;
      };
      expect(await woken(() => Q.create({ payload: 'inserted' }), WAKE_MS)).toBe(true);
      let held: Awaited<ReturnType<typeof Q.lock>> | undefined;
      // An acquisition alone wakes nobody (it frees nothing).
      expect(await woken(async () => (held = await Q.lock(_id, 'holder')), QUIET_MS)).toBe(false);
      // A renewal and a waiter's reservation written or cleared free nothing lockNext can claim
      // (it ignores reservations): they wake nobody either.
      expect(await woken(() => held!.extendLock(60_000), QUIET_MS)).toBe(false);
      const locks = Q.lockModel().collection;
      expect(await woken(() => locks.updateOne({ _id }, { $set: { reservedBy: 'k', reservedSince: new Date(), reservedUntil: new Date(Date.now() + 3_000) } }), QUIET_MS)).toBe(false);
      expect(await woken(() => locks.updateOne({ _id }, { $unset: { reservedBy: '', reservedSince: '', reservedUntil: '' } }), QUIET_MS)).toBe(false);
      // A guarded write's claim on the record (claimForWrite: claim, lastWriteAt) leaves the holder
      // holding: it wakes nobody either.
      expect(await woken(() => locks.updateOne({ _id }, { $set: { claim: 'c', lastWriteAt: new Date() } }), QUIET_MS)).toBe(false);
      // A release wakes.
      expect(await woken(() => held!.unlock(), WAKE_MS)).toBe(true);
    } finally {
      await feed.close();
    }
  }, 60_000);

  standaloneOnly('the polling fallback is what a standalone server uses')('on a standalone server no stream is opened: waiting callers poll', async () => {
    const Q = await jobModel(conn.connection, { ttl: 30_000 });
    const watches: mongo.Document[] = [];
    const listener = (event: { commandName: string; command: mongo.Document }) => {
      if (event.commandName === 'aggregate' && event.command.pipeline?.[0]?.$changeStream) watches.push(event.command);
    };
    conn.connection.getClient().on('commandStarted', listener);
    try {
      const waiting = Q.lockNext({}, 'worker', { wait: 20_000 });
      await sleep(300);
      await Q.create({ payload: 'polled' });
      expect((await waiting)!.payload).toBe('polled');
    } finally {
      conn.connection.getClient().off('commandStarted', listener);
    }
    expect(watches).toEqual([]);
  });
});

test.each<[string, unknown]>([
  ['a negative wait', { wait: -1 }],
  ['a fractional wait', { wait: 1.5 }],
  ['a string wait', { wait: '100' }],
  ['a signal that is not an AbortSignal', { signal: { aborted: false } }],
])('lockNext refuses %s before any command', async (_label, options) => {
  const Q = await jobModel(conn.connection);
  conn.resetCommands();
  await expect(Q.lockNext({}, 'w', options as never)).rejects.toBeInstanceOf(InvalidLockOptionError);
  expect(conn.commands).toEqual([]);
});
