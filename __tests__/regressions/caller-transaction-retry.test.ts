/**
 * Attack: `doc.saveAndUnlock({ session })` inside the caller's own transaction (README, Document
 * methods: "Inside your own transaction ... the release joins it and commits with it").
 *
 * saveAndUnlock marks the instance's lock as released (`state.lost = 'released'`) as soon as the
 * release and the save have been sent, before the caller's transaction commits. When that
 * transaction aborts instead (a TransientTransactionError that `connection.transaction()` /
 * `session.withTransaction()` answers by running the callback again, a failed commit, or the
 * caller's own abort), the release is rolled back and the lock is still held in the database, but
 * the instance believes it is gone:
 *  - the retried callback's saveAndUnlock throws LockNotHeldError('released'), so a transaction
 *    that the driver would have completed on its second attempt fails for good;
 *  - after an abort, `doc.heldLock()` is null and `doc.unlock()` says 'released' while the lock
 *    stays held (everybody else is refused) until its ttl.
 */
import { mongo } from 'mongoose';
import { replicaSetOnly } from '../support/topology';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('atk_txnretry');
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

function transientError(): Error {
  return new mongo.MongoServerError({ message: 'simulated write conflict', code: 112, codeName: 'WriteConflict', errorLabels: ['TransientTransactionError'] });
}

replicaSetOnly('transactions need a replica set')('saveAndUnlock in a transaction callback that is retried after a transient error commits on the retry', async () => {
  const { _id: id } = await M.create({ title: 'original' });
  const item = await M.lock(id, 'alice');
  let attempts = 0;
  const outcome = await conn.connection
    .transaction(async (session) => {
      attempts++;
      item.title = 'saved in a transaction';
      await item.saveAndUnlock({ session });
      if (attempts === 1) throw transientError(); // e.g. a conflict on another statement of the callback
    })
    .then(
      () => 'committed',
      (error: unknown) => `${(error as Error).name}: ${(error as Error).message}`.slice(0, 140),
    );
  expect({ outcome, attempts }).toEqual({ outcome: 'committed', attempts: 2 });
  expect((await M.collection.findOne({ _id: id }))!.title).toBe('saved in a transaction');
  expect(await M.isLocked(id)).toBe(false);
});

replicaSetOnly('transactions need a replica set')('after the caller aborts, the instance still knows it holds the lock (and can release it)', async () => {
  const { _id: id } = await M.create({ title: 'original' });
  const item = await M.lock(id, 'alice');
  const session = await conn.connection.startSession();
  session.startTransaction();
  item.title = 'never committed';
  await item.saveAndUnlock({ session });
  await session.abortTransaction();
  await session.endSession();

  expect(await M.isLocked(id)).toBe(true); // the release was rolled back with the transaction
  expect(item.heldLock()).not.toBeNull();
  await expect(item.unlock()).resolves.toBeUndefined();
  expect(await M.isLocked(id)).toBe(false);
});
