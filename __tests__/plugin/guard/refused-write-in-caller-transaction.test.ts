/**
 * PRODUCT.md property 8 (only the holder releases, and the holder can) and property 10 (the guard
 * refuses only because of someone else's lock), with README Limits, "Lock calls inside your own
 * transaction": lock calls are refused with LockedByTransactionError only after a guarded write in
 * a caller's transaction has written the document's lock record in it.
 *
 * bob holds X. A batch job in the same process runs one transaction and tries guarded writes of X
 * in it; the guard refuses them (LockedError: bob holds X) and writes nothing to X's lock record;
 * the job catches the refusal and goes on with its transaction open. bob's `extendLock()` and
 * `unlock()` must succeed meanwhile: no transaction is writing X's lock record. (Before the fix the
 * guard noted X as "being written" before its claim was refused, so bob's lock calls failed with
 * LockedByTransactionError until the job's transaction ended, up to 60 s.)
 */
import { LockedByTransactionError, LockedError } from '../../../src';
import { replicaSetOnly } from '../../support/topology';
import { connect, testDatabase, type MonitoredConnection } from '../../support/db';
import { workItemModel, type WorkItemModel } from '../../support/work-item';
import { outcome } from './support';

const db = testDatabase('guard_refusednote');
let conn: MonitoredConnection;
let M: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  M = await workItemModel(conn.connection, { ttl: 30_000 });
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

const needsTransactions = replicaSetOnly('caller transactions need a replica set');

needsTransactions("a refused guarded write in a caller's transaction does not block the holder's extendLock() and unlock()", async () => {
  const { _id: x } = await M.create({ title: 'x' });
  const { _id: free } = await M.create({ title: 'free' });
  const bob = await M.lock(x, 'bob');
  const session = await conn.connection.startSession();
  try {
    session.startTransaction();
    // One target (its claim is a no-op on bob's record) and several (refused before any write).
    const single = await outcome(M.updateOne({ _id: x }, { $set: { status: 'batch' } }, { session }));
    const several = await outcome(M.updateMany({ _id: { $in: [free, x] } }, { $set: { status: 'batch' } }, { session }));
    for (const refused of [single, several]) {
      expect((refused as { error: unknown }).error).toBeInstanceOf(LockedError);
      expect((refused as { error: unknown }).error).not.toBeInstanceOf(LockedByTransactionError);
    }
    expect(session.inTransaction()).toBe(true);
    expect(await outcome(bob.extendLock())).toMatchObject({ ok: true });
    expect(await outcome(bob.unlock())).toMatchObject({ ok: true });
  } finally {
    await session.abortTransaction().catch(() => undefined);
    await session.endSession();
  }
}, 20_000);

needsTransactions("a joined write that wrote the lock record still refuses lock calls until its transaction ends", async () => {
  const { _id: x } = await M.create({ title: 'x' });
  const session = await conn.connection.startSession();
  try {
    session.startTransaction();
    await M.updateOne({ _id: x }, { $set: { status: 'in txn' } }, { session });
    const locked = await outcome(M.lock(x, 'bob'));
    expect((locked as { error: unknown }).error).toBeInstanceOf(LockedByTransactionError);
  } finally {
    await session.abortTransaction().catch(() => undefined);
    await session.endSession();
  }
  const bob = await M.lock(x, 'bob');
  await bob.unlock();
}, 20_000);
