/**
 * The client's wall clock jumps (NTP stepping it, a VM resumed, a user changing the time).
 * The brief: "Time is the server's; leases are conservative"; README, Leases: the lease is timed
 * "on its own monotonic clock".
 *
 *  - Held: a lock's lease (`msLeft()`, a handle's signal, a guarded save) does not move when
 *    `Date.now()` jumps an hour forward or back.
 *  - Found: the registry of open caller transactions (src/guard/open-transactions.ts) times them
 *    with `Date.now()` (`since`, and "open for at most OPEN_TRANSACTION_LIMIT_MS"). A forward jump
 *    of more than 60 s while a caller's transaction is open makes it look ended: a lock call on a
 *    document that transaction wrote, awaited inside it, is no longer refused with
 *    LockedByTransactionError but sent, and waits on the server for the transaction it is part of
 *    (R17), the self-deadlock that registry exists to prevent (README, Limits, "Lock calls inside
 *    your own transaction").
 */
import { LockedByTransactionError } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { replicaSetOnly } from '../support/topology';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('clockjumps');
let conn: MonitoredConnection;
let M: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  M = await workItemModel(conn.connection, { ttl: 30_000 }, 'ClockJumps');
});

afterEach(() => {
  jest.restoreAllMocks();
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

const realNow = Date.now.bind(Date);

/** Moves this process's wall clock by `ms` (Date.now only; the monotonic clock is untouched). */
function jumpWallClock(ms: number): void {
  jest.spyOn(Date, 'now').mockImplementation(() => realNow() + ms);
}

test.each([3_600_000, -3_600_000])("a wall-clock jump of %i ms changes nothing in a lock's lease", async (jump) => {
  const { _id: id } = await M.create({ title: 'clock jump' });
  const doc = await M.lock(id, 'alice', { ttl: 20_000 });
  const handleDoc = await M.create({ title: 'clock jump handle' });
  const handle = await M.acquireLock(handleDoc._id, 'alice', { ttl: 20_000 });
  const before = doc.heldLock()!.msLeft();
  jumpWallClock(jump);
  const after = doc.heldLock()!.msLeft();
  expect(after).toBeLessThanOrEqual(before);
  expect(before - after).toBeLessThan(5_000);
  expect(handle.signal.aborted).toBe(false);
  expect(handle.msLeft()).toBeGreaterThan(10_000);
  doc.title = 'saved after the jump';
  await doc.save();
  jest.restoreAllMocks();
  await doc.unlock();
  await handle.release();
});

async function within<T>(promise: Promise<T>, ms: number): Promise<{ settled: true; error: unknown } | { settled: false }> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<{ settled: false }>((resolve) => {
    timer = setTimeout(() => resolve({ settled: false }), ms);
  });
  try {
    return await Promise.race([
      promise.then(
        () => ({ settled: true as const, error: undefined }),
        (error: unknown) => ({ settled: true as const, error }),
      ),
      timeout,
    ]);
  } finally {
    clearTimeout(timer);
  }
}

replicaSetOnly('caller transactions need a replica set')(
  'a forward wall-clock jump while a caller transaction is open: a lock call inside it is still refused at once',
  async () => {
    const { _id: id } = await M.create({ title: 'open transaction' });
    const session = await conn.connection.startSession();
    let pending: Promise<unknown> | undefined;
    try {
      session.startTransaction();
      await M.updateOne({ _id: id }, { $set: { status: 'open' } }, { session });
      jumpWallClock(61_000);
      pending = M.lock(id, 'bob');
      const settled = await within(pending, 5_000);
      expect(settled.settled).toBe(true);
      expect((settled as { error: unknown }).error).toBeInstanceOf(LockedByTransactionError);
    } finally {
      jest.restoreAllMocks();
      await session.abortTransaction().catch(() => undefined);
      await session.endSession();
      // A lock call that was sent waits for the transaction; after the abort it takes the lock.
      const late = (await pending?.catch(() => null)) as { unlock?: () => Promise<void> } | null | undefined;
      await late?.unlock?.();
    }
  },
  30_000,
);
