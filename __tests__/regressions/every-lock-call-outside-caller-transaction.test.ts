/**
 * docs/transactions.md, "Lock calls inside your own transaction": "A lock call never joins your
 * transaction: ... the document it returns (`Model.lock`, `tryLock`, `acquireLock`, `withLock`, a
 * resume, `lockNext`, `lockMany`, `lockAll`) is loaded outside it too, as it is after the lock was
 * taken, also inside `connection.transaction()` with Mongoose's `transactionAsyncLocalStorage`
 * (whose snapshot may be older). Its save joins your transaction as any save does".
 * lock-load-outside-caller-transaction.test.ts and next-and-group-loads-in-caller-transaction.test.ts
 * pin lock, a resume, lockMany and lockNext; this file pins every other lock call that returns
 * documents (tryLock, acquireLock, withLock, acquireLocks, withLocks, lockAll, acquireAllLocks,
 * withAllLocks, acquireNext, withNext), each inside `connection.transaction()` with the async-local
 * session, after another process changed the document since the transaction's snapshot: the call
 * hands out the document as it is now, and sends no command in the transaction. And the documented
 * use still works there: a lock taken inside the transaction, saved and released with
 * `saveAndUnlock()` (no session passed: the async-local one), commits with the transaction, and
 * is rolled back with it (the lock, taken outside the transaction, is then still held).
 * Replica sets only (transactions).
 */
import mongoose, { type mongo, type Types } from 'mongoose';
import { LockNotHeldError, acquireAllLocks, lockAll, withAllLocks } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { jobModel, type JobModel } from '../support/job';
import { replicaSetOnly } from '../support/topology';

jest.setTimeout(60_000);
const db = testDatabase('every_call_outside_txn');
let conn: MonitoredConnection;
let other: MonitoredConnection;
let Job: JobModel;
let OtherJob: JobModel;

beforeAll(async () => {
  conn = await connect(db.name);
  other = await connect(db.name);
  mongoose.set('transactionAsyncLocalStorage', true);
  Job = await jobModel(conn.connection, { ttl: 30_000 }, 'EveryCallTxn');
  OtherJob = await jobModel(other.connection, { ttl: 30_000 }, 'EveryCallTxn');
});

afterAll(async () => {
  mongoose.set('transactionAsyncLocalStorage', false);
  await db.drop(conn.connection);
  await Promise.all([conn.close(), other.close()]);
});

const rawOf = (): mongo.Collection => other.connection.getClient().db(db.name).collection(OtherJob.collection.collectionName);

type Doc = { payload: string };
type Call = (ids: [Types.ObjectId, Types.ObjectId]) => Promise<string[]>;

const calls: [string, Call][] = [
  ['tryLock', async ([a]) => [(await Job.tryLock(a, 'o'))!.payload]],
  ['acquireLock', async ([a]) => {
    const handle = await Job.acquireLock(a, 'o', { autoExtend: false });
    await handle.release();
    return [handle.document.payload];
  }],
  ['withLock', async ([a]) => [await Job.withLock(a, 'o', async (doc: Doc) => doc.payload)]],
  ['acquireLocks', async (ids) => {
    const handle = await Job.acquireLocks(ids, 'o', { autoExtend: false });
    await handle.release();
    return handle.documents.map((d) => d.payload);
  }],
  ['withLocks', (ids) => Job.withLocks(ids, 'o', async (docs: Doc[]) => docs.map((d) => d.payload))],
  ['lockAll', async ([a, b]) => {
    const docs = await lockAll([[Job, a], [Job, b]] as const, 'o');
    await Job.unlockMany(docs);
    return docs.map((d) => d.payload);
  }],
  ['acquireAllLocks', async ([a, b]) => {
    const handle = await acquireAllLocks([[Job, a], [Job, b]] as const, 'o', { autoExtend: false });
    await handle.release();
    return handle.documents.map((d) => d.payload);
  }],
  ['withAllLocks', ([a, b]) => withAllLocks([[Job, a], [Job, b]] as const, 'o', async (docs) => docs.map((d) => d.payload))],
  ['acquireNext', async ([a]) => {
    const handle = await Job.acquireNext({ _id: a, status: 'queued' }, 'o', { autoExtend: false });
    await handle!.release();
    return [handle!.document.payload];
  }],
  ['withNext', async ([a]) => [(await Job.withNext({ _id: a, status: 'queued' }, 'o', async (doc: Doc) => doc.payload)) as string]],
];

const txnTest = replicaSetOnly('caller transactions need a replica set');

describe.each(calls)('%s inside connection.transaction()', (_name, call) => {
  txnTest('hands out the documents as they are now, and sends nothing in the transaction', async () => {
    const [a, b] = await Job.create([{ payload: 'a: before' }, { payload: 'b: before' }]);
    const inTransaction: string[] = [];
    const listener = (event: { commandName: string; command: mongo.Document }) => {
      // A command of a transaction carries `autocommit: false` (retryable writes carry a txnNumber too).
      if (event.command.autocommit === false) inTransaction.push(event.commandName);
    };
    const payloads = await conn.connection.transaction(async () => {
      await Job.findOne({ payload: 'nothing' }); // the transaction's first read: its snapshot
      await rawOf().updateMany({ _id: { $in: [a._id, b._id] } }, [{ $set: { payload: { $concat: [{ $substrCP: ['$payload', 0, 3] }, 'after'] } } }]);
      conn.connection.getClient().on('commandStarted', listener);
      try {
        return await call([a._id, b._id]);
      } finally {
        conn.connection.getClient().off('commandStarted', listener);
      }
    });
    expect(payloads).toEqual(payloads.length === 1 ? ['a: after'] : ['a: after', 'b: after']);
    expect(inTransaction).toEqual([]);
  });
});

txnTest('a lock taken inside the transaction, saveAndUnlock() there (async-local session): commits with it', async () => {
  const { _id: id } = await Job.create({ payload: 'original' });
  await conn.connection.transaction(async () => {
    const doc = await Job.lock(id, 'holder');
    doc.payload = 'saved in the transaction';
    await doc.saveAndUnlock();
  });
  expect((await rawOf().findOne({ _id: id }))?.payload).toBe('saved in the transaction');
  expect(await Job.isLocked(id)).toBe(false);
});

txnTest('the same, rolled back: the save is undone and the lock (taken outside the transaction) is still held', async () => {
  const { _id: id } = await Job.create({ payload: 'original' });
  let doc: Awaited<ReturnType<JobModel['lock']>> | undefined;
  const error = await conn.connection
    .transaction(async () => {
      doc = await Job.lock(id, 'holder');
      doc.payload = 'rolled back';
      await doc.saveAndUnlock();
      throw new Error('roll back');
    })
    .catch((e: unknown) => e);
  expect((error as Error).message).toBe('roll back');
  expect((await rawOf().findOne({ _id: id }))?.payload).toBe('original');
  expect(await Job.isLocked(id)).toBe(true);
  expect(doc!.heldLock()).not.toBeNull();
  await doc!.unlock();
});

/*
 * A transaction reads the snapshot taken at its first operation (R12). A lock taken after that
 * (outside the transaction, as every lock call is) has a record the transaction cannot see: the
 * guard's check inside it (LockStore.verify, an update of the record by its token) matches
 * nothing, and the explaining read, in the same snapshot, found no record (or an older
 * acquisition's). The save was refused, rightly (mongod gives the transaction no way to see the
 * lock), but told as 'vanished' ("the lock collection was dropped or the record deleted") or
 * 'taken_over', untrue, and the instance marked its lock lost for good: after the transaction its
 * holder could neither save nor release it (`unlock()` repeated the false reason without asking
 * the server) although it still held it. Expected: an error that says the lock was taken after the
 * transaction's snapshot, and the instance keeps its lock for use outside that transaction.
 */
describe.each([
  ['no record before', false],
  ['a record of an earlier, released acquisition', true],
])('a lock taken inside the transaction after its first read (%s), then saved in it', (_what, earlier) => {
  txnTest('is refused with an error that says so (not vanished / taken over), and the instance keeps its lock', async () => {
    const { _id: id } = await Job.create({ payload: 'original' });
    if (earlier) await (await Job.lock(id, 'someone')).unlock();
    let doc: Awaited<ReturnType<JobModel['lock']>> | undefined;
    const error = await conn.connection
      .transaction(async () => {
        await Job.findOne({}); // the transaction's first read: its snapshot
        doc = await Job.lock(id, 'holder');
        doc.payload = 'in the transaction';
        await doc.saveAndUnlock();
      })
      .catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockNotHeldError);
    expect((error as LockNotHeldError).reason).toBe('not_locked');
    expect((error as Error).message).toMatch(/snapshot/);
    expect((await rawOf().findOne({ _id: id }))?.payload).toBe('original');
    // Outside the transaction the instance still holds its lock.
    expect(await Job.isLocked(id)).toBe(true);
    doc!.payload = 'saved after the transaction';
    await doc!.saveAndUnlock();
    expect(await Job.isLocked(id)).toBe(false);
  });
});
