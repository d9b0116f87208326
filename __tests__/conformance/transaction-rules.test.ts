/**
 * What a transaction may and may not contain, and collections/indexes created inside one.
 *
 * Sources:
 *  - count: not allowed in a transaction, OperationNotSupportedInTransaction (263) — transactions spec
 *    test source/transactions/tests/unified/count.json; "Cannot run 'count' in a multi-document
 *    transaction. Please see http://dochub.mongodb.org/core/transaction-count for a recommended
 *    alternative." (CommandHelpers::canUseTransactions, src/mongo/db/commands.cpp, re-read: count has
 *    its own message, checked before "Cannot run '<cmd>' in a multi-document transaction.").
 *  - writeConcern on a statement other than commit/abort: InvalidOptions (72) "writeConcern is not
 *    allowed within a multi-statement transaction" — validateWriteConcernForTransaction,
 *    src/mongo/db/transaction/transaction_validation.cpp.
 *  - startTransaction on commitTransaction: OperationNotSupportedInTransaction "Cannot start a
 *    transaction with a commit" (same file, validateSessionOptions).
 *  - Collections and indexes created in a transaction (4.4+) are invisible outside until commit:
 *    transactions spec tests create-collection.json and create-index.json; a new index on a
 *    collection that exists outside the transaction: OperationNotSupportedInTransaction "Cannot
 *    create new indexes on existing collection <ns> in a multi-document transaction."
 *    (src/mongo/db/commands/create_indexes_cmd.cpp).
 */
import type { ClientSession, Db, Document, MongoClient } from 'mongodb';
import { deploymentFacts, describeIf, expectServerError, openClient, uniqueDbName } from './support/server';

const dbName = uniqueDbName('conf_txn_rules');
let client: MongoClient;
let db: Db;
const sessions: ClientSession[] = [];

const facts = deploymentFacts();

describeIf(facts.setName !== undefined, 'transactions need a replica set; this deployment is a standalone')('transaction rules', () => {
  beforeAll(async () => {
    client = await openClient();
    db = client.db(dbName);
    await db.createCollection('existing');
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

  function started(): ClientSession {
    const s = client.startSession();
    sessions.push(s);
    s.startTransaction();
    return s;
  }

  test('count in a transaction fails with 263', async () => {
    const s = started();
    await db.collection('existing').findOne({}, { session: s });
    const error = await expectServerError(db.command({ count: 'existing' }, { session: s }), 263);
    expect(error.codeName).toBe('OperationNotSupportedInTransaction');
    expect(error.message).toBe(
      "Cannot run 'count' in a multi-document transaction. Please see http://dochub.mongodb.org/core/transaction-count for a recommended alternative.",
    );
  });

  test('a writeConcern on a statement in a transaction fails with InvalidOptions (72)', async () => {
    const s = started();
    const error = await expectServerError(db.command({ insert: 'existing', documents: [{ _id: 'wc' }], writeConcern: { w: 1 } }, { session: s }), 72);
    expect(error.message).toBe('writeConcern is not allowed within a multi-statement transaction');
  });

  test('collections created in a transaction (create, or an insert) appear outside only at commit', async () => {
    const s = started();
    await db.createCollection('made_by_create', { session: s });
    await db.collection('made_by_insert').insertOne({ _id: 1 } as Document, { session: s });
    const outside = async (): Promise<string[]> => (await db.listCollections({}, { nameOnly: true }).toArray()).map((c) => c.name).sort();
    expect(await outside()).toEqual(['existing']);
    expect(await db.collection('made_by_insert').findOne({ _id: 1 } as Document, { session: s })).toEqual({ _id: 1 });
    await s.commitTransaction();
    expect(await outside()).toEqual(['existing', 'made_by_create', 'made_by_insert']);
    expect(await db.collection('made_by_insert').find().toArray()).toEqual([{ _id: 1 }]);
  });

  test('an index on a collection new in the transaction is created at commit; on an existing collection it is refused (263)', async () => {
    const s = started();
    await db.collection('indexed_new').createIndex({ x: 1 }, { name: 'x_1', session: s });
    expect(await db.listCollections({ name: 'indexed_new' }).toArray()).toEqual([]);
    await s.commitTransaction();
    expect((await db.collection('indexed_new').listIndexes().toArray()).map((i) => i.name)).toEqual(['_id_', 'x_1']);

    const t = started();
    await db.collection('existing').findOne({}, { session: t });
    const error = await expectServerError(db.collection('existing').createIndex({ y: 1 }, { session: t }), 263);
    expect(error.message).toBe(`Cannot create new indexes on existing collection ${dbName}.existing in a multi-document transaction.`);
  });
});

// ReplSetConfig's write-concern check (src/mongo/db/repl/repl_set_config.cpp): a `w` larger than the
// number of data-bearing members cannot be satisfied; the write is applied and the reply carries
// writeConcernError UnsatisfiableWriteConcern (100) "Not enough data-bearing nodes".
describeIf(facts.setName !== undefined, 'write concern w > 1 needs a replica set; this deployment is a standalone')('unsatisfiable write concern', () => {
  let wcClient: MongoClient;
  beforeAll(async () => {
    wcClient = await openClient({ retryWrites: false });
  });
  afterAll(async () => {
    await wcClient.db(dbName).dropDatabase();
    await wcClient.close();
  });

  test('w above the number of members: applied, with writeConcernError 100', async () => {
    const hello = await wcClient.db('admin').command({ hello: 1 });
    const w = (hello.hosts as string[]).length + 1;
    // The driver turns an ok: 1 reply with writeConcernError into a MongoWriteConcernError carrying the reply.
    const error = await wcClient
      .db(dbName)
      .command({ insert: 'wc', documents: [{ _id: 1 }], writeConcern: { w } })
      .then(
        () => undefined,
        (e: unknown) => e as { code?: number; codeName?: string; message?: string; result?: Document },
      );
    expect({ code: error?.code, codeName: error?.codeName, message: error?.message }).toEqual({ code: 100, codeName: 'UnsatisfiableWriteConcern', message: 'Not enough data-bearing nodes' });
    expect(error?.result).toMatchObject({ ok: 1, n: 1 });
    expect(await wcClient.db(dbName).collection('wc').countDocuments()).toBe(1);
  });
});
