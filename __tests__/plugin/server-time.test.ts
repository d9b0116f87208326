/**
 * PRODUCT.md properties 3 and 4: an expired lock is free at once (not when the TTL monitor
 * deletes it), and expiry is judged by the server's clock, whatever the client's clock says.
 */
import { LockedError } from '../../src';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('servertime');
let conn: MonitoredConnection;
let WorkItem: WorkItemModel;

beforeAll(async () => {
  // autoIndex off: no TTL index exists, so an expired record can only ever be freed by the
  // lock algorithm itself. If takeover depended on the TTL monitor, these tests would hang.
  conn = await connect(db.name, { autoIndex: false });
  WorkItem = await workItemModel(conn.connection, { ttl: 1_000 });
  const indexes = await WorkItem.lockModel().collection.listIndexes().toArray().catch(() => []);
  expect(indexes.some((index) => index.expireAfterSeconds !== undefined)).toBe(false);
});

afterAll(async () => {
  jest.useRealTimers();
  await db.drop(conn.connection);
  await conn.close();
});

test('an expired lock is taken over at once, by updating the expired record in place', async () => {
  const { _id: id } = await WorkItem.create({ title: 'crashed holder' });
  const crashed = await WorkItem.lock(id, 'crashed-session');
  await expect(WorkItem.lock(id, 'next-session')).rejects.toBeInstanceOf(LockedError);
  await sleep(1_100);
  // The expired record is still there: nothing deleted it.
  expect(await WorkItem.lockModel().collection.countDocuments({ _id: id })).toBe(1);
  const next = await WorkItem.lock(id, 'next-session', { ttl: 10_000 });
  expect(next.heldLock()!.acquiredAt.getTime()).toBeGreaterThanOrEqual(crashed.heldLock()!.expiresAt.getTime());
  expect(await WorkItem.lockModel().collection.countDocuments({ _id: id })).toBe(1);
  await next.unlock();
});

describe.each([
  ['three hours ahead', 3 * 3600_000],
  ['three hours behind', -3 * 3600_000],
])('client clock %s', (_label, skewMs) => {
  beforeEach(() => {
    // Only Date is faked: the client believes it is hours off; timers keep running for real.
    jest.useFakeTimers({
      now: Date.now() + skewMs,
      advanceTimers: true,
      doNotFake: ['nextTick', 'setImmediate', 'clearImmediate', 'setTimeout', 'clearTimeout', 'setInterval', 'clearInterval', 'queueMicrotask', 'hrtime', 'performance'],
    });
  });
  afterEach(() => jest.useRealTimers());

  test('changes no decision: locked stays locked, expiry happens after the ttl of server time', async () => {
    const clientNow = Date.now();
    const { _id: id } = await WorkItem.create({ title: 'skew' });
    const a = await WorkItem.lock(id, 'session-a');
    const held = a.heldLock()!;
    // The lock's dates come from the server, not from the skewed client clock.
    expect(Math.abs(held.acquiredAt.getTime() - clientNow)).toBeGreaterThan(Math.abs(skewMs) / 2);
    expect(held.expiresAt.getTime() - held.acquiredAt.getTime()).toBe(1_000);

    await expect(WorkItem.lock(id, 'session-b')).rejects.toBeInstanceOf(LockedError);
    expect(await WorkItem.isLocked(id)).toBe(true);
    a.title = 'saved by a';
    await a.save(); // still current by server time, whatever the client thinks

    await sleep(1_100);
    expect(await WorkItem.isLocked(id)).toBe(false);
    const b = await WorkItem.lock(id, 'session-b', { ttl: 10_000 });
    expect(b.heldLock()!.owner).toBe('session-b');
    await b.unlock();
  });
});
