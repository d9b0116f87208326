/**
 * Smaller contract breaks found while attacking the web story.
 *
 * 1. `LockedError.label` (README, Errors: "`label` (the holder's display label, or `null`)";
 *    "getLock, lockStatus, listLocks and LockedError.label return it"). The immediate refusal of
 *    `Model.lock` carries the holder's label, but the LockedError of a wait that timed out (or of
 *    a call with a `signal`) is rebuilt in lock-waiter.ts without it: label null.
 * 2. `Model.tryLock` "never waits" and accepts only `ttl` and `label`; `validateLockCallOptions`
 *    checks own keys (`Object.keys`) but reads the values with destructuring, which also reads
 *    inherited properties. An options object whose prototype carries `wait` (a class instance, an
 *    `Object.create(defaults)`, or a polluted Object.prototype) makes tryLock wait, with no error.
 */
import { InvalidLockOptionError, LockedError } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('atk_smallgaps');
let conn: MonitoredConnection;
let M: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  M = await workItemModel(conn.connection, { ttl: 10_000 });
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

test.each([
  ['no wait', {}],
  ['wait: 50', { wait: 50 }],
  ['a signal', { signal: new AbortController().signal }],
])('LockedError.label names the holder (%s)', async (_name, options) => {
  const { _id: id } = await M.create({ title: 'labelled' });
  await M.lock(id, 'alice', { label: 'Alice' });
  const error = await M.lock(id, 'bob', options).catch((e: unknown) => e);
  expect(error).toBeInstanceOf(LockedError);
  expect((error as LockedError).label).toBe('Alice');
});

test('tryLock never waits, whatever the prototype of its options object carries', async () => {
  const { _id: id } = await M.create({ title: 'held' });
  await M.lock(id, 'carol');
  const started = Date.now();
  // An inherited wait of 10 s: a tryLock that honoured it would take that long; one that does not
  // answers in milliseconds (bound half of it, for a loaded machine).
  const result = await M.tryLock(id, 'dave', Object.create({ wait: 10_000 })).catch((e: unknown) => e);
  const elapsed = Date.now() - started;
  if (result instanceof InvalidLockOptionError) return; // refusing the inherited option is fine too
  expect(result).toBeNull();
  expect(elapsed).toBeLessThan(5_000);
});
