/**
 * PRODUCT.md property 10 (the guard must not turn ordinary work into a hang) and README Limits,
 * "Lock calls inside your own transaction": a guarded write of the guard's own transaction to a
 * document whose lock record an open caller transaction of this process writes is refused at once
 * with LockedByTransactionError, like a lock call.
 *
 * Inside an open caller transaction a guarded write of X ran (X's lock record is part of that
 * transaction). Still inside it, the code writes X without the session (a forgotten
 * `{ session }`). The guard's own transaction would claim X's record, get WriteConflict from the
 * caller's transaction on every attempt and retry for 120 s, while the caller's transaction waits
 * for it. It must settle at once, refused, nothing written; after the transaction ends the same
 * write goes through.
 */
import { LockedByTransactionError } from '../../../src';
import { replicaSetOnly } from '../../support/topology';
import { connect, testDatabase, type MonitoredConnection } from '../../support/db';
import { workItemModel, type WorkItemModel } from '../../support/work-item';
import { outcome } from './support';

const db = testDatabase('guard_outsidetxn');
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

async function settlesWithin(promise: Promise<unknown>, ms: number): Promise<{ ok: boolean; error?: unknown } | 'pending'> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<'pending'>((resolve) => {
    timer = setTimeout(() => resolve('pending'), ms);
  });
  try {
    return await Promise.race([outcome(promise) as Promise<{ ok: boolean; error?: unknown }>, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

const needsTransactions = replicaSetOnly('caller transactions need a replica set');

needsTransactions('a guarded write of X without the session, inside the open transaction that wrote X, is refused at once', async () => {
  const { _id: x } = await M.create({ title: 'x' });
  const { _id: y } = await M.create({ title: 'y' });
  const session = await conn.connection.startSession();
  const pending: Promise<unknown>[] = [];
  try {
    session.startTransaction();
    await M.updateOne({ _id: x }, { $set: { status: 'in txn' } }, { session });
    const writes = [
      M.updateOne({ _id: x }, { $set: { title: 'forgot the session' } }),
      M.updateMany({ _id: { $in: [y, x] } }, { $set: { title: 'forgot the session' } }),
      M.findOneAndDelete({ title: 'x' }),
    ];
    pending.push(...writes);
    for (const write of writes) {
      const settled = await settlesWithin(write, 5_000);
      expect(settled).not.toBe('pending');
      expect((settled as { error?: unknown }).error).toBeInstanceOf(LockedByTransactionError);
    }
  } finally {
    await session.abortTransaction().catch(() => undefined);
    await session.endSession();
    await Promise.all(pending.map((write) => outcome(write)));
  }
  expect((await M.find({ _id: { $in: [x, y] } }).sort({ title: 1 }).lean()).map((d) => d.title)).toEqual(['x', 'y']);
  await M.updateOne({ _id: x }, { $set: { title: 'after' } });
  expect((await M.findById(x).lean())?.title).toBe('after');
}, 30_000);
