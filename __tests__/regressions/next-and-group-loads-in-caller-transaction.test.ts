/**
 * lockNext's load and lockMany's load run through Mongoose (`Model.findOne` / `Model.find`), so
 * with Mongoose's `transactionAsyncLocalStorage` they join the caller's open transaction and read
 * its snapshot (taken at the transaction's first operation), while the candidate read and the
 * acquisitions run outside it on the latest data. The documents are therefore not loaded "after
 * the lock was taken, as they are now" (src/lock-next.ts attempt(), src/lock-group.ts loadMembers;
 * docs/mongodb-compatibility.md R35: "it reads the latest committed version on the primary"):
 *  - lockNext: a queued, free job inserted after the transaction's snapshot is found by the
 *    candidate read, locked, then loaded from the older snapshot as missing, released and skipped;
 *    the call answers null although that job was free and matching during the whole call
 *    (PRODUCT.md property 14);
 *  - lockMany: a document inserted after the snapshot is reported missing
 *    (LockTargetNotFoundError) although it exists, and a document changed after the snapshot is
 *    handed out, locked, with its older content.
 * Replica sets only (transactions).
 */
import mongoose, { type mongo } from 'mongoose';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { jobModel } from '../support/job';
import { replicaSetOnly } from '../support/topology';

jest.setTimeout(60_000);
const db = testDatabase('loads_in_caller_txn');
let conn: MonitoredConnection;
let other: MonitoredConnection;

beforeAll(async () => {
  conn = await connect(db.name);
  other = await connect(db.name);
  mongoose.set('transactionAsyncLocalStorage', true);
});
afterAll(async () => {
  mongoose.set('transactionAsyncLocalStorage', false);
  await db.drop(conn.connection);
  await other.close();
  await conn.close();
});

/** The driver's collection on the other connection (outside the transaction: another process's writes). */
function rawOf(model: { collection: { collectionName: string } }): mongo.Collection {
  return other.connection.getClient().db(db.name).collection(model.collection.collectionName);
}

const txnTest = replicaSetOnly('caller transactions need a replica set');

txnTest('lockNext inside connection.transaction() claims a free queued job inserted after the transaction began', async () => {
  const Job = await jobModel(conn.connection, { ttl: 30_000 }, 'TxnQueue');
  const OtherJob = await jobModel(other.connection, { ttl: 30_000 }, 'TxnQueue');
  await Job.create({ status: 'done', payload: 'old' });
  const outcome = await conn.connection.transaction(async () => {
    await Job.findOne({}); // the transaction's first read: its snapshot
    // Another process queues a job.
    const fresh = new mongoose.Types.ObjectId();
    await rawOf(OtherJob).insertOne({ _id: fresh, status: 'queued', priority: 0, createdAt: new Date(), payload: 'fresh', attempts: 0 });
    const doc = await Job.lockNext({ status: 'queued' }, 'worker');
    return { fresh: String(fresh), claimed: doc === null ? null : String(doc._id) };
  });
  expect(outcome.claimed).toBe(outcome.fresh);
});

txnTest('lockMany inside connection.transaction() loads the documents as they are after the locks were taken', async () => {
  const Job = await jobModel(conn.connection, { ttl: 30_000 }, 'TxnGroup');
  const OtherJob = await jobModel(other.connection, { ttl: 30_000 }, 'TxnGroup');
  const [a] = await Job.create([{ payload: 'a: before' }]);
  const outcome = await conn.connection.transaction(async () => {
    await Job.findOne({}); // snapshot
    await rawOf(OtherJob).updateOne({ _id: a._id }, { $set: { payload: 'a: after' } });
    const b = new mongoose.Types.ObjectId();
    await rawOf(OtherJob).insertOne({ _id: b, status: 'queued', priority: 0, createdAt: new Date(), payload: 'b: new', attempts: 0 });
    const result = await Job.lockMany([a._id, b], 'owner').then(
      (docs) => docs.map((d) => d.payload),
      (error: Error) => `${error.name}: ${error.message}`,
    );
    return result;
  });
  expect(outcome).toEqual(['a: after', 'b: new']);
});
