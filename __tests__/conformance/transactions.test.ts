/**
 * Multi-document transactions: isolation (snapshot at the first operation plus own writes),
 * commit and abort, write-write conflicts between transactions (WriteConflict 112 with the
 * TransientTransactionError label), a non-transactional write waiting for a transaction that
 * holds the document, and a transaction failing on a document written after its snapshot.
 *
 * Sources ((*): location or wording recalled, not re-read for this audit): shared/MONGOD-SEMANTICS.md "Writes and transactions" (each item cited there); manual
 * "Transactions and Write Conflicts" (*) (a transaction writing a document another transaction wrote
 * fails with WriteConflict and the TransientTransactionError label; a write outside a transaction
 * waits for the transaction to finish); transactions spec (mongodb/specifications
 * source/transactions/transactions.md) for commitTransaction retries being allowed after commit;
 * WriteConflict 112 in error_codes.yml; the outside write re-evaluating its filter after the wait:
 * write_stage_common.cpp ensureStillMatches.
 */
import type { ClientSession, Collection, Db, Document, MongoClient, TransactionOptions } from 'mongodb';
import { deploymentFacts, describeError, describeIf, expectServerError, openClient, sleep, uniqueDbName, within, type Loose } from './support/server';

const dbName = uniqueDbName('conf_txn');
let client: MongoClient;
let db: Db;
const sessions: ClientSession[] = [];

const TXN: TransactionOptions = { readConcern: { level: 'snapshot' }, writeConcern: { w: 'majority' } };

function session(): ClientSession {
  const s = client.startSession();
  sessions.push(s);
  return s;
}

async function withDocs(name: string, docs: Loose[]): Promise<Collection<Loose>> {
  await db.collection(name).drop().catch(() => undefined);
  const coll = await db.createCollection<Loose>(name);
  if (docs.length) await coll.insertMany(docs);
  return coll;
}

/** Tracks a promise's state ('pending', or how it settled), without awaiting it. */
function track<T>(promise: Promise<T>): { promise: Promise<T>; state: () => string } {
  let state = 'pending';
  promise.then(
    (value) => {
      state = `resolved ${JSON.stringify(value)}`;
    },
    (error: unknown) => {
      state = `rejected ${describeError(error)}`;
    },
  );
  return { promise, state: () => state };
}

const facts = deploymentFacts();

describeIf(facts.setName !== undefined, 'transactions need a replica set; this deployment is a standalone')('transactions', () => {
  beforeAll(async () => {
    client = await openClient({ maxPoolSize: 20 });
    db = client.db(dbName);
  });

  afterEach(async () => {
    for (const s of sessions.splice(0)) {
      if (s.inTransaction()) await s.abortTransaction().catch(() => undefined);
      await s.endSession();
    }
  });

  afterAll(async () => {
    await db.dropDatabase();
    await client.close();
  });

  test('writes are invisible outside until commit, then all visible', async () => {
    const coll = await withDocs('tx_commit', [{ _id: 1, v: 'a' }]);
    const s = session();
    s.startTransaction(TXN);
    await coll.insertOne({ _id: 2, v: 'new' }, { session: s });
    await coll.updateOne({ _id: 1 }, { $set: { v: 'b' } }, { session: s });
    expect(await coll.find().sort({ _id: 1 }).toArray()).toEqual([{ _id: 1, v: 'a' }]);
    expect(await coll.countDocuments()).toBe(1);
    await s.commitTransaction();
    expect(await coll.find().sort({ _id: 1 }).toArray()).toEqual([
      { _id: 1, v: 'b' },
      { _id: 2, v: 'new' },
    ]);
  });

  test('abort discards every write of the transaction', async () => {
    const coll = await withDocs('tx_abort', [{ _id: 1, v: 'a' }, { _id: 2, v: 'gone?' }]);
    const s = session();
    s.startTransaction(TXN);
    await coll.insertOne({ _id: 3 }, { session: s });
    await coll.updateOne({ _id: 1 }, { $set: { v: 'b' } }, { session: s });
    await coll.deleteOne({ _id: 2 }, { session: s });
    expect(await coll.countDocuments({}, { session: s })).toBe(2);
    await s.abortTransaction();
    expect(await coll.find().sort({ _id: 1 }).toArray()).toEqual([
      { _id: 1, v: 'a' },
      { _id: 2, v: 'gone?' },
    ]);
  });

  test('reads see the snapshot of the first operation plus own writes, not later outside commits', async () => {
    const coll = await withDocs('tx_snapshot', [{ _id: 'x', v: 0 }, { _id: 'y', v: 0 }]);
    const s = session();
    s.startTransaction(TXN);
    expect(await coll.findOne({ _id: 'x' }, { session: s })).toEqual({ _id: 'x', v: 0 });

    // Outside commits after the snapshot: an update of a doc the txn only read, and a new doc.
    await coll.updateOne({ _id: 'x' }, { $set: { v: 1 } });
    await coll.insertOne({ _id: 'z', v: 0 });

    expect(await coll.findOne({ _id: 'x' }, { session: s })).toEqual({ _id: 'x', v: 0 });
    expect(await coll.findOne({ _id: 'z' }, { session: s })).toBeNull();
    expect(await coll.countDocuments({}, { session: s })).toBe(2);

    await coll.insertOne({ _id: 'w', v: 'mine' }, { session: s });
    await coll.updateOne({ _id: 'y' }, { $set: { v: 'mine' } }, { session: s });
    expect(await coll.find({}, { session: s }).sort({ _id: 1 }).toArray()).toEqual([
      { _id: 'w', v: 'mine' },
      { _id: 'x', v: 0 },
      { _id: 'y', v: 'mine' },
    ]);
    expect(await coll.findOne({ _id: 'w' })).toBeNull();
    expect(await coll.findOne({ _id: 'y' })).toEqual({ _id: 'y', v: 0 });

    await s.commitTransaction();
    expect(await coll.find().sort({ _id: 1 }).toArray()).toEqual([
      { _id: 'w', v: 'mine' },
      { _id: 'x', v: 1 },
      { _id: 'y', v: 'mine' },
      { _id: 'z', v: 0 },
    ]);
  });

  test('withTransaction commits the callback, and aborts when the callback throws', async () => {
    const coll = await withDocs('tx_with', [{ _id: 1, n: 0 }]);
    const s = session();
    await s.withTransaction(async () => {
      await coll.updateOne({ _id: 1 }, { $inc: { n: 1 } } as Document, { session: s });
      await coll.insertOne({ _id: 2, n: 0 }, { session: s });
    }, TXN);
    expect(await coll.find().sort({ _id: 1 }).toArray()).toEqual([{ _id: 1, n: 1 }, { _id: 2, n: 0 }]);

    await expect(
      s.withTransaction(async () => {
        await coll.updateOne({ _id: 1 }, { $inc: { n: 100 } } as Document, { session: s });
        throw new Error('callback failed');
      }, TXN),
    ).rejects.toThrow('callback failed');
    expect(await coll.findOne({ _id: 1 })).toEqual({ _id: 1, n: 1 });
    expect(s.inTransaction()).toBe(false);
  });

  test('a second transaction writing the same document gets WriteConflict 112 with TransientTransactionError', async () => {
    const coll = await withDocs('tx_ww', [{ _id: 'doc', owner: null }]);
    const a = session();
    const b = session();
    a.startTransaction(TXN);
    b.startTransaction(TXN);
    await coll.updateOne({ _id: 'doc' }, { $set: { owner: 'a' } }, { session: a });
    const error = await within(
      expectServerError(coll.updateOne({ _id: 'doc' }, { $set: { owner: 'b' } }, { session: b }), 112),
      5000,
      'the conflicting transactional write must fail at once',
    );
    expect(error.codeName).toBe('WriteConflict');
    expect(error.hasErrorLabel('TransientTransactionError')).toBe(true);
    await b.abortTransaction();
    await a.commitTransaction();
    expect(await coll.findOne({ _id: 'doc' })).toEqual({ _id: 'doc', owner: 'a' });
  });

  test('an insert of the same _id by two transactions conflicts too', async () => {
    const coll = await withDocs('tx_ww_insert', []);
    const a = session();
    const b = session();
    a.startTransaction(TXN);
    b.startTransaction(TXN);
    await coll.insertOne({ _id: 'k', by: 'a' }, { session: a });
    const error = await within(
      expectServerError(coll.insertOne({ _id: 'k', by: 'b' }, { session: b }), 112),
      5000,
      'the conflicting transactional insert must fail at once',
    );
    expect(error.hasErrorLabel('TransientTransactionError')).toBe(true);
    await b.abortTransaction();
    await a.commitTransaction();
    expect(await coll.find().toArray()).toEqual([{ _id: 'k', by: 'a' }]);
  });

  // A non-transactional write whose filter matches the committed version of a document that an
  // open transaction has written conflicts with it; the server retries it until the transaction
  // ends, then evaluates the filter again against what was committed.
  test('a non-transactional write to a document held by a transaction waits for the commit, then sees the committed value', async () => {
    const coll = await withDocs('tx_wait_commit', [{ _id: 'doc', v: 'orig', n: 0 }]);
    const a = session();
    a.startTransaction(TXN);
    await coll.updateOne({ _id: 'doc' }, { $set: { v: 'txn' } }, { session: a });

    const byId = track(coll.updateOne({ _id: 'doc' }, { $inc: { n: 1 } } as Document));
    const byOldValue = track(coll.updateOne({ _id: 'doc', v: 'orig' }, { $inc: { n: 100 } } as Document));
    await sleep(500);
    expect({ byId: byId.state(), byOldValue: byOldValue.state() }).toEqual({ byId: 'pending', byOldValue: 'pending' });

    await a.commitTransaction();
    const first = await within(byId.promise, 5000, 'the waiting write by _id after commit');
    const second = await within(byOldValue.promise, 5000, 'the waiting write on the old value after commit');
    expect(first).toMatchObject({ matchedCount: 1, modifiedCount: 1 });
    // Re-evaluated after the commit: v is now 'txn', so the filter on the old value matches nothing.
    expect(second).toMatchObject({ matchedCount: 0, modifiedCount: 0 });
    expect(await coll.findOne({ _id: 'doc' })).toEqual({ _id: 'doc', v: 'txn', n: 1 });
  });

  test('a non-transactional write to a document held by a transaction waits for the abort, then sees the old value', async () => {
    const coll = await withDocs('tx_wait_abort', [{ _id: 'doc', v: 'orig', n: 0 }]);
    const a = session();
    a.startTransaction(TXN);
    await coll.updateOne({ _id: 'doc' }, { $set: { v: 'txn' } }, { session: a });

    const waiting = track(coll.updateOne({ _id: 'doc', v: 'orig' }, { $inc: { n: 1 } } as Document));
    await sleep(500);
    expect({ waiting: waiting.state() }).toEqual({ waiting: 'pending' });

    await a.abortTransaction();
    expect(await within(waiting.promise, 5000, 'the waiting update after abort')).toMatchObject({ matchedCount: 1, modifiedCount: 1 });
    expect(await coll.findOne({ _id: 'doc' })).toEqual({ _id: 'doc', v: 'orig', n: 1 });
  });

  test('a non-transactional delete of a document held by a transaction waits, then deletes the committed document', async () => {
    const coll = await withDocs('tx_wait_delete', [{ _id: 'doc', v: 'orig' }]);
    const a = session();
    a.startTransaction(TXN);
    await coll.updateOne({ _id: 'doc' }, { $set: { v: 'txn' } }, { session: a });
    const waiting = track(coll.findOneAndDelete({ _id: 'doc' }));
    await sleep(500);
    expect({ waiting: waiting.state() }).toEqual({ waiting: 'pending' });
    await a.commitTransaction();
    expect(await within(waiting.promise, 5000, 'the waiting delete after commit')).toEqual({ _id: 'doc', v: 'txn' });
    expect(await coll.countDocuments()).toBe(0);
  });

  test('a transaction writing a document changed outside after its snapshot fails with WriteConflict', async () => {
    const coll = await withDocs('tx_stale', [{ _id: 'x', v: 0 }, { _id: 'y', v: 0 }]);
    const a = session();
    a.startTransaction(TXN);
    // The first operation establishes the snapshot.
    expect(await coll.findOne({ _id: 'y' }, { session: a })).toEqual({ _id: 'y', v: 0 });
    await coll.updateOne({ _id: 'x' }, { $set: { v: 'outside' } });

    const error = await within(
      expectServerError(coll.updateOne({ _id: 'x' }, { $set: { v: 'txn' } }, { session: a }), 112),
      5000,
      'the stale transactional write must fail',
    );
    expect(error.codeName).toBe('WriteConflict');
    expect(error.hasErrorLabel('TransientTransactionError')).toBe(true);
    await a.abortTransaction();
    expect(await coll.findOne({ _id: 'x' })).toEqual({ _id: 'x', v: 'outside' });
  });

  test('after commit the transaction is over, and committing it again is accepted', async () => {
    const coll = await withDocs('tx_state', []);
    const s = session();
    s.startTransaction(TXN);
    await coll.insertOne({ _id: 1 }, { session: s });
    await s.commitTransaction();
    expect(s.inTransaction()).toBe(false);
    // A retried commit of a committed transaction succeeds (the driver resends commitTransaction).
    await s.commitTransaction();
    expect(await coll.countDocuments()).toBe(1);
  });
});
