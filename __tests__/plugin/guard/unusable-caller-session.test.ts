/**
 * PRODUCT.md property 10: writes to documents nobody has locked behave as they would without the
 * plugin. The guard runs a write that carries a session outside a transaction on a session of its
 * own (src/guard/transaction.ts); a session the driver would refuse must still be refused.
 *
 * The driver refuses, before sending anything (executeOperation in mongodb's
 * src/operations/execute_operation.ts), a session that has ended (MongoExpiredSessionError) and a
 * session of another MongoClient (MongoInvalidArgumentError, "ClientSession must be from the same
 * MongoClient"). The guarded write must fail the same way, nothing written.
 */
import { mongo } from 'mongoose';
import { replicaSetOnly } from '../../support/topology';
import { connect, testDatabase, type MonitoredConnection } from '../../support/db';
import { workItemModel, type WorkItemModel } from '../../support/work-item';
import { outcome, rawCollection } from './support';

const db = testDatabase('guard_unusablesession');
let conn: MonitoredConnection;
let other: MonitoredConnection;
let M: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  other = await connect(db.name);
  M = await workItemModel(conn.connection, { ttl: 30_000 });
});

afterAll(async () => {
  await db.drop(conn.connection);
  await other.close();
  await conn.close();
});

const atomic = replicaSetOnly('the guard runs its own transaction on replica sets');

atomic('a guarded write carrying an ended session is refused as the driver refuses it', async () => {
  const { _id: x } = await M.create({ title: 'x' });
  const session = await conn.connection.startSession();
  await session.endSession();
  const unguarded = await outcome(rawCollection(M).updateOne({ _id: x }, { $set: { title: 'raw' } }, { session }));
  expect((unguarded as { error: unknown }).error).toBeInstanceOf(mongo.MongoExpiredSessionError);
  const writes: (() => PromiseLike<unknown>)[] = [
    () => M.updateOne({ _id: x }, { $set: { title: 'guarded' } }, { session }),
    () => M.updateMany({ _id: x }, { $set: { title: 'guarded' } }, { session }),
    () => M.findOneAndDelete({ _id: x }, { session }),
    () => M.bulkWrite([{ deleteOne: { filter: { _id: x } } }], { session }),
  ];
  for (const write of writes) {
    const guarded = await outcome(Promise.resolve(write()));
    expect((guarded as { error: unknown }).error).toBeInstanceOf(mongo.MongoExpiredSessionError);
  }
  expect((await M.findById(x).lean())?.title).toBe('x');
}, 20_000);

atomic("a guarded write carrying another client's session is refused as the driver refuses it", async () => {
  const { _id: x } = await M.create({ title: 'x' });
  const session = await other.connection.startSession();
  try {
    const unguarded = await outcome(rawCollection(M).updateOne({ _id: x }, { $set: { title: 'raw' } }, { session }));
    expect((unguarded as { error: unknown }).error).toBeInstanceOf(mongo.MongoInvalidArgumentError);
    const guarded = await outcome(M.updateOne({ _id: x }, { $set: { title: 'guarded' } }, { session }));
    expect((guarded as { error: unknown }).error).toBeInstanceOf(mongo.MongoInvalidArgumentError);
    expect((guarded as { error: Error }).error.message).toBe('ClientSession must be from the same MongoClient');
  } finally {
    await session.endSession();
  }
  expect((await M.findById(x).lean())?.title).toBe('x');
}, 20_000);
