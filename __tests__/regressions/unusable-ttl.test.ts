/**
 * ttl edge values against the lease (src/lease.ts): a lease is `granted − (1% of granted + 2 ms)`
 * from the send, so a ttl of 1 or 2 ms gives a lease of at most 0 before any round trip: such a
 * grant can NEVER be handed out, however fast the database is. validateTtl (src/options.ts)
 * accepts any whole number from 1, so:
 *
 *  - `lock(id, owner, { ttl: 1 })` sends 3 grants and 3 releases, then throws
 *    LockExpiredOnArrivalError with `retryable: true` and status 503 ("trying again can succeed:
 *    the database was slow", src/errors.ts), which is false: the same call can never succeed.
 *    The brief's rule for bad input: a typed error that says what was wrong, before anything
 *    touches the database (InvalidLockOptionError, like ttl 0).
 *  - with `wait`, the call loops without any pause for the whole wait (lock-waiter.ts
 *    acquireWaiting: a LockExpiredOnArrivalError `continue`s at once), taking and releasing the
 *    lock thousands of times per second. Each of those grants holds the lock on the server for a
 *    moment, so another owner's tryLock meanwhile can find it held by a caller that never holds
 *    it: a lock nobody will ever hold refuses others.
 *  - `doc.extendLock(1)` gives a held lock up (released) and throws, instead of refusing the ttl.
 *
 * Runs on a replica set and on a standalone server.
 */
import { InvalidLockOptionError } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('unusablettl');
let conn: MonitoredConnection;
let other: MonitoredConnection;
let M: WorkItemModel;
let OtherM: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  other = await connect(db.name);
  M = await workItemModel(conn.connection, { ttl: 30_000 }, 'UnusableTtl');
  OtherM = await workItemModel(other.connection, { ttl: 30_000 }, 'UnusableTtl');
});

afterAll(async () => {
  await db.drop(conn.connection);
  await Promise.all([conn.close(), other.close()]);
});

const lockCommands = () => conn.commands.filter((name) => name === 'findAndModify' || name === 'update').length;

test.each([1, 2])('a ttl of %i ms, which no lease can cover, is refused before anything is sent', async (ttl) => {
  const { _id: id } = await M.create({ title: `ttl ${ttl}` });
  conn.resetCommands();
  const error = await M.lock(id, 'alice', { ttl }).catch((e: unknown) => e);
  expect({ error: (error as Error).constructor.name, commands: lockCommands() }).toEqual({ error: InvalidLockOptionError.name, commands: 0 });
  expect(error).toBeInstanceOf(InvalidLockOptionError);
});

test('doc.extendLock(1) is refused before anything is sent, and the lock stays held', async () => {
  const { _id: id } = await M.create({ title: 'extend 1' });
  const doc = await M.lock(id, 'alice');
  conn.resetCommands();
  const error = await doc.extendLock(1).catch((e: unknown) => e);
  expect({ error: (error as Error).constructor.name, commands: lockCommands(), held: doc.heldLock() !== null }).toEqual({
    error: InvalidLockOptionError.name,
    commands: 0,
    held: true,
  });
  await doc.unlock();
});

test('a waiting lock call whose grants cannot be handed out does not take the lock from others while it waits', async () => {
  const { _id: id } = await M.create({ title: 'spinning waiter' });
  conn.resetCommands();
  const waiting = M.lock(id, 'alice', { ttl: 2, wait: 2_000 }).catch((e: unknown) => e);
  // bob tries while alice's call waits: the lock is free (alice can never hold it).
  let refusedForBob = 0;
  let triesForBob = 0;
  const until = Date.now() + 1_500;
  while (Date.now() < until) {
    triesForBob++;
    const bob = await OtherM.tryLock(id, 'bob', { ttl: 30_000 });
    if (bob) await bob.unlock();
    else refusedForBob++;
  }
  await waiting;
  const sent = lockCommands();
  process.stdout.write(`spinning waiter: ${sent} lock commands in 2 s, bob refused ${refusedForBob} of ${triesForBob}\n`);
  // Polling backs off (README, Waiting: 20 ms doubling to 1 s); this loop has no pause at all.
  expect({ refusedForBob, lockCommandsUnder100: sent < 100 }).toEqual({ refusedForBob: 0, lockCommandsUnder100: true });
  expect(triesForBob).toBeGreaterThan(0);
}, 30_000);
