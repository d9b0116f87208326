/**
 * PRODUCT.md property 10 (a write the caller runs inside its own transaction commits or aborts
 * with that transaction; the guard must not make ordinary work hang).
 *
 * Inside a caller's transaction a guarded write of document X writes X's lock record in that
 * transaction (a claim, or a holder's verify). A lock call on X outside the transaction
 * (`Model.lock`, `tryLock`, `Model.unlock`, `forceUnlock`, `doc.unlock()`, `doc.extendLock()`, a
 * resume) writes that record too, and mongod makes such a write wait until the transaction ends
 * (docs/mongodb-compatibility.md R17; jstests/core/txns/write_conflicts_with_non_txns.js). Awaited
 * inside the transaction's own callback, it never ends: the caller deadlocked with itself until
 * mongod's transactionLifetimeLimitSeconds (60 s) aborted the transaction. Such calls are now
 * refused at once with LockedByTransactionError (a LockedError), before anything is sent, and work
 * again once the transaction has ended.
 *
 * Found by the attack on the guard.
 */
import { LockedByTransactionError, LockedError } from '../../../src';
import { replicaSetOnly } from '../../support/topology';
import { connect, testDatabase, type MonitoredConnection } from '../../support/db';
import { workItemModel, type WorkItemModel } from '../../support/work-item';
import { outcome } from './support';

const db = testDatabase('guard_lockintxn');
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

async function within<T>(promise: Promise<T>, ms: number): Promise<{ settled: true; result: Awaited<ReturnType<typeof outcome<T>>> } | { settled: false }> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<{ settled: false }>((resolve) => {
    timer = setTimeout(() => resolve({ settled: false }), ms);
  });
  try {
    return await Promise.race([outcome(promise).then((result) => ({ settled: true as const, result })), timeout]);
  } finally {
    clearTimeout(timer);
  }
}

needsTransactions('a guarded write, then Model.lock of the same document in one caller transaction: refused at once, nothing sent; works after the commit', async () => {
  const { _id: id } = await M.create({ title: 'new' });
  const session = await conn.connection.startSession();
  try {
    session.startTransaction();
    await M.updateOne({ _id: id }, { $set: { status: 'open' } }, { session });
    conn.resetCommands();
    const settled = await within(M.lock(id, 'alice'), 5_000);
    expect(settled.settled).toBe(true);
    const { result } = settled as { result: { ok: false; error: unknown } };
    expect(result.error).toBeInstanceOf(LockedByTransactionError);
    expect(result.error).toBeInstanceOf(LockedError);
    expect((result.error as LockedError).documentId).toEqual(id);
    expect(conn.commands).toEqual([]);
    await expect(M.tryLock(id, 'alice')).resolves.toBeNull(); // tryLock: null, as for any LockedError
    await expect(M.forceUnlock(id)).rejects.toBeInstanceOf(LockedByTransactionError);
    await expect(M.unlock(id, 'alice')).rejects.toBeInstanceOf(LockedByTransactionError);
    await session.commitTransaction();
  } finally {
    await session.endSession();
  }
  const item = await M.lock(id, 'alice');
  expect(item.status).toBe('open');
  await item.unlock();
}, 30_000);

needsTransactions("the holder's doc.unlock() / extendLock() after its save in the caller's transaction: refused at once; saveAndUnlock({ session }) is the way", async () => {
  const { _id: id } = await M.create({ title: 'held' });
  const held = await M.lock(id, 'alice');
  const session = await conn.connection.startSession();
  try {
    session.startTransaction();
    held.title = 'saved in the transaction';
    await held.save({ session });
    expect((await within(held.unlock(), 5_000)).settled).toBe(true);
    await expect(held.unlock()).rejects.toBeInstanceOf(LockedByTransactionError);
    await expect(held.extendLock()).rejects.toBeInstanceOf(LockedByTransactionError);
    expect(held.heldLock()).not.toBeNull();
    await held.saveAndUnlock({ session });
    await session.commitTransaction();
  } finally {
    await session.endSession();
  }
  expect(await M.isLocked(id)).toBe(false);
  expect((await M.findById(id).lean())?.title).toBe('saved in the transaction');
}, 30_000);

needsTransactions('after an abort the document can be locked again; and a lock taken before the transaction writes is unaffected', async () => {
  const { _id: id } = await M.create({ title: 'x' });
  const held = await M.lock(id, 'alice'); // before the transaction: fine
  const session = await conn.connection.startSession();
  try {
    session.startTransaction();
    held.title = 'never';
    await held.save({ session });
    await expect(M.lock(id, 'alice')).rejects.toBeInstanceOf(LockedByTransactionError);
    await session.abortTransaction();
  } finally {
    await session.endSession();
  }
  const again = await M.lock(id, 'alice');
  expect(again.title).toBe('x');
  await again.unlock();
}, 30_000);

needsTransactions("another flow waiting for the lock (wait) gets it once the caller's transaction committed", async () => {
  const { _id: id } = await M.create({ title: 'y' });
  const session = await conn.connection.startSession();
  let waiter: Promise<unknown> | undefined;
  try {
    session.startTransaction();
    await M.updateOne({ _id: id }, { $set: { status: 'done' } }, { session });
    waiter = M.lock(id, 'bob', { wait: 10_000 });
    await new Promise((resolve) => setTimeout(resolve, 50));
    await session.commitTransaction();
  } finally {
    await session.endSession();
  }
  const doc = (await waiter) as Awaited<ReturnType<typeof M.lock>>;
  expect(doc.status).toBe('done');
  await doc.unlock();
}, 30_000);
