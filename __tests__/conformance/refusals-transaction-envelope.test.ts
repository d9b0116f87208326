/**
 * The session fields of a command (lsid, txnNumber, autocommit, startTransaction) and the statement
 * rules of a transaction, refused as mongod refuses them; the driver's own transaction and
 * retryable-write traffic still runs.
 *
 * Sources (7.0):
 *  - OperationSessionInfoFromClient (src/mongo/db/session/logical_session_id.idl): txnNumber is a
 *    BSON long, autocommit and startTransaction bools; IDLParserContext::checkAndAssertTypeSlowPath
 *    (src/mongo/idl/idl_parser.cpp): TypeMismatch "BSON field 'OperationSessionInfo.<f>' is the
 *    wrong type '<t>', expected type '<t>'".
 *  - initializeOperationSessionInfo (src/mongo/db/session/initialize_operation_session_info.cpp):
 *    the InvalidOptions messages below, in that order.
 *  - validateSessionOptions (src/mongo/db/transaction_validation.cpp): NotARetryableWriteCommand
 *    (50768) for a txnNumber without autocommit on a command that is not a retryable write.
 *  - ExecCommandDatabase::_initiateCommand (src/mongo/db/service_entry_point_common.cpp):
 *    InvalidOptions "Only the first command in a transaction may specify a readConcern".
 *  - TransactionParticipant (src/mongo/db/transaction/transaction_participant.cpp):
 *    _verifyCanBeginMultiDocumentTransaction: ConflictingOperationInProgress "Only servers in a
 *    sharded cluster can start a new transaction at the active transaction number";
 *    _continueMultiDocumentTransaction: NoSuchTransaction "Given transaction number <n> does not
 *    match any in-progress transactions. The active transaction number is <m>" (m is -1 before the
 *    first); _beginOrContinueRetryableWrite: IncompleteTransactionHistory "Cannot retry a retryable
 *    write that has been converted into a transaction".
 *  - runCreateIndexesOnNewCollection (src/mongo/db/commands/create_indexes_cmd.cpp):
 *    OperationNotSupportedInTransaction "Cannot create new indexes on non-empty collection <ns> in a
 *    multi-document transaction."
 *  - Error labels: NoSuchTransaction carries TransientTransactionError outside commit/abort
 *    (isTransientTransactionError, src/mongo/db/error_labels.cpp).
 */
import * as net from 'node:net';
import { Binary, BSON, Long, type ClientSession, type Db, type Document, type MongoClient } from 'mongodb';
import { deploymentFacts, describeIf, expectRefusal, openClient, testUri, uniqueDbName } from './support/server';

const dbName = uniqueDbName('conf_refuse_txn');
let client: MongoClient;
let db: Db;
const sessions: ClientSession[] = [];

const facts = deploymentFacts();

/**
 * Sends one OP_MSG to the first host of the test URI, outside the driver (which would add an lsid of
 * its own), and returns the reply document.
 */
function raw(command: Document, database = dbName): Promise<Document> {
  const host = /^mongodb:\/\/([^/?,]+)/.exec(testUri())?.[1] ?? '127.0.0.1:27017';
  const [hostname, port] = host.split(':');
  const body = BSON.serialize({ ...command, $db: database });
  const header = Buffer.alloc(21);
  header.writeInt32LE(16 + 4 + 1 + body.length, 0);
  header.writeInt32LE(1, 4);
  header.writeInt32LE(0, 8);
  header.writeInt32LE(2013, 12);
  header.writeUInt32LE(0, 16);
  header.writeUInt8(0, 20);
  return new Promise((resolve, reject) => {
    const socket = net.connect(Number(port ?? 27017), hostname);
    let chunks = Buffer.alloc(0);
    socket.on('data', (d) => {
      chunks = Buffer.concat([chunks, d]);
      if (chunks.length >= 4 && chunks.length >= chunks.readInt32LE(0)) {
        socket.end();
        resolve(BSON.deserialize(chunks.subarray(21, chunks.readInt32LE(0))));
      }
    });
    socket.on('error', reject);
    socket.write(Buffer.concat([header, body]));
  });
}

/** A raw reply that must be mongod's error `expected`. */
function expectRawRefusal(reply: Document, expected: { code: number; codeName: string; errmsg: string }): void {
  expect({ ok: reply.ok, code: reply.code, codeName: reply.codeName, errmsg: reply.errmsg }).toEqual({ ok: 0, ...expected });
}

const newLsid = (): Document => ({ id: new Binary(Buffer.from(Array.from({ length: 16 }, () => Math.floor(Math.random() * 256))), Binary.SUBTYPE_UUID) });

const invalid = (errmsg: string): { code: number; codeName: string; errmsg: string } => ({ code: 72, codeName: 'InvalidOptions', errmsg });

describeIf(facts.setName !== undefined, 'transactions and txnNumbers need a replica set; this deployment is a standalone')('the transaction envelope', () => {
  beforeAll(async () => {
    client = await openClient();
    db = client.db(dbName);
    await db.createCollection('existing');
    await db.collection('existing').insertOne({ _id: 1 } as Document);
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

  function session(): ClientSession {
    const s = client.startSession();
    sessions.push(s);
    return s;
  }

  describe('the session fields (initializeOperationSessionInfo)', () => {
    test('txnNumber must be a long', async () => {
      expectRawRefusal(await raw({ insert: 'existing', documents: [{ _id: 'i' }], lsid: newLsid(), txnNumber: 1 }), {
        code: 14,
        codeName: 'TypeMismatch',
        errmsg: "BSON field 'OperationSessionInfo.txnNumber' is the wrong type 'int', expected type 'long'",
      });
    });

    test('autocommit must be a bool', async () => {
      expectRawRefusal(await raw({ find: 'existing', lsid: newLsid(), txnNumber: Long.fromNumber(1), autocommit: 0 }), {
        code: 14,
        codeName: 'TypeMismatch',
        errmsg: "BSON field 'OperationSessionInfo.autocommit' is the wrong type 'int', expected type 'bool'",
      });
    });

    test('a txnNumber needs an lsid', async () => {
      expectRawRefusal(await raw({ insert: 'existing', documents: [{ _id: 'n' }], txnNumber: Long.fromNumber(1) }), invalid('Transaction number requires a session ID to also be specified'));
      expect(await db.collection('existing').findOne({ _id: 'n' as never })).toBeNull();
    });

    test('a txnNumber cannot be negative', async () => {
      expectRawRefusal(await raw({ insert: 'existing', documents: [{ _id: 'neg' }], lsid: newLsid(), txnNumber: Long.fromNumber(-1) }), invalid('Transaction number cannot be negative'));
    });

    test('autocommit needs a txnNumber', async () => {
      expectRawRefusal(await raw({ find: 'existing', lsid: newLsid(), autocommit: false }), invalid("'autocommit' field requires a transaction number to also be specified"));
    });

    test('autocommit: true is not allowed', async () => {
      expectRawRefusal(await raw({ find: 'existing', lsid: newLsid(), txnNumber: Long.fromNumber(1), autocommit: true }), invalid('Specifying autocommit=true is not allowed.'));
    });

    test('startTransaction needs autocommit', async () => {
      expectRawRefusal(await raw({ find: 'existing', lsid: newLsid(), txnNumber: Long.fromNumber(1), startTransaction: true }), invalid("'startTransaction' field requires 'autocommit' field to also be specified"));
    });

    test('startTransaction: false is not allowed', async () => {
      expectRawRefusal(await raw({ find: 'existing', lsid: newLsid(), txnNumber: Long.fromNumber(1), autocommit: false, startTransaction: false }), invalid('Specifying startTransaction=false is not allowed.'));
    });
  });

  describe('a txnNumber without autocommit belongs to retryable writes (validateSessionOptions)', () => {
    test.each([
      ['find', { find: 'existing' }],
      ['aggregate', { aggregate: 'existing', pipeline: [], cursor: {} }],
      ['count', { count: 'existing' }],
      ['createIndexes', { createIndexes: 'existing', indexes: [{ key: { x: 1 }, name: 'x_1' }] }],
      ['commitTransaction', { commitTransaction: 1 }],
    ])('%s: NotARetryableWriteCommand (50768)', async (name, command) => {
      expectRawRefusal(await raw({ ...command, lsid: newLsid(), txnNumber: Long.fromNumber(1) }, name === 'commitTransaction' ? 'admin' : dbName), {
        code: 50768,
        codeName: 'NotARetryableWriteCommand',
        errmsg: `txnNumber may only be provided for multi-document transactions and retryable write commands. autocommit:false was not provided, and ${name} is not a retryable write command.`,
      });
    });

    test('insert, update, delete and findAndModify take one (a retryable write)', async () => {
      const lsid = newLsid();
      expect(await raw({ insert: 'existing', documents: [{ _id: 'r' }], lsid, txnNumber: Long.fromNumber(1) })).toMatchObject({ ok: 1, n: 1 });
      expect(await raw({ update: 'existing', updates: [{ q: { _id: 'r' }, u: { $set: { v: 1 } } }], lsid, txnNumber: Long.fromNumber(2) })).toMatchObject({ ok: 1, nModified: 1 });
      expect(await raw({ findAndModify: 'existing', query: { _id: 'r' }, update: { $inc: { v: 1 } }, new: true, lsid, txnNumber: Long.fromNumber(3) })).toMatchObject({ ok: 1, value: { _id: 'r', v: 2 } });
      expect(await raw({ delete: 'existing', deletes: [{ q: { _id: 'r' }, limit: 1 }], lsid, txnNumber: Long.fromNumber(4) })).toMatchObject({ ok: 1, n: 1 });
    });
  });

  describe('statements of a transaction', () => {
    const txn = (lsid: Document, n: number): Document => ({ lsid, txnNumber: Long.fromNumber(n), autocommit: false });

    test('a readConcern on a statement after the first: InvalidOptions, and the first one may carry it', async () => {
      const lsid = newLsid();
      const first = await raw({ find: 'existing', filter: { _id: 1 }, ...txn(lsid, 1), startTransaction: true, readConcern: { level: 'snapshot' } });
      expect((first.cursor as Document).firstBatch).toEqual([{ _id: 1 }]);
      expectRawRefusal(await raw({ find: 'existing', ...txn(lsid, 1), readConcern: { level: 'snapshot' } }), invalid('Only the first command in a transaction may specify a readConcern'));
    });

    test('an empty readConcern document on a later statement is no readConcern', async () => {
      const lsid = newLsid();
      expect(await raw({ insert: 'existing', documents: [{ _id: 'rc' }], ...txn(lsid, 1), startTransaction: true })).toMatchObject({ ok: 1, n: 1 });
      const later = await raw({ find: 'existing', filter: { _id: 'rc' }, ...txn(lsid, 1), readConcern: {} });
      expect((later.cursor as Document).firstBatch).toEqual([{ _id: 'rc' }]);
      expect(await raw({ commitTransaction: 1, ...txn(lsid, 1) }, 'admin')).toMatchObject({ ok: 1 });
    });

    test.each([
      ['committed', 'commitTransaction'],
      ['aborted', 'abortTransaction'],
    ])('starting again a transaction number that was %s: ConflictingOperationInProgress (117)', async (_state, finish) => {
      const lsid = newLsid();
      expect(await raw({ insert: 'existing', documents: [{ _id: `again-${finish}` }], ...txn(lsid, 7), startTransaction: true })).toMatchObject({ ok: 1 });
      expect(await raw({ [finish]: 1, ...txn(lsid, 7) }, 'admin')).toMatchObject({ ok: 1 });
      expectRawRefusal(await raw({ find: 'existing', ...txn(lsid, 7), startTransaction: true }), {
        code: 117,
        codeName: 'ConflictingOperationInProgress',
        errmsg: 'Only servers in a sharded cluster can start a new transaction at the active transaction number',
      });
      // The next number starts a transaction.
      const found = await raw({ find: 'existing', filter: { _id: 1 }, ...txn(lsid, 8), startTransaction: true });
      expect((found.cursor as Document).firstBatch).toEqual([{ _id: 1 }]);
      expect(await raw({ abortTransaction: 1, ...txn(lsid, 8) }, 'admin')).toMatchObject({ ok: 1 });
    });

    test('starting a transaction at the number of a retryable write: 117', async () => {
      const lsid = newLsid();
      expect(await raw({ insert: 'existing', documents: [{ _id: 'rw' }], lsid, txnNumber: Long.fromNumber(3) })).toMatchObject({ ok: 1, n: 1 });
      expectRawRefusal(await raw({ find: 'existing', ...txn(lsid, 3), startTransaction: true }), {
        code: 117,
        codeName: 'ConflictingOperationInProgress',
        errmsg: 'Only servers in a sharded cluster can start a new transaction at the active transaction number',
      });
    });

    test('a retryable write at the number of a transaction: IncompleteTransactionHistory (217)', async () => {
      const lsid = newLsid();
      expect(await raw({ insert: 'existing', documents: [{ _id: 'conv' }], ...txn(lsid, 4), startTransaction: true })).toMatchObject({ ok: 1 });
      expect(await raw({ commitTransaction: 1, ...txn(lsid, 4) }, 'admin')).toMatchObject({ ok: 1 });
      expectRawRefusal(await raw({ insert: 'existing', documents: [{ _id: 'conv2' }], lsid, txnNumber: Long.fromNumber(4) }), {
        code: 217,
        codeName: 'IncompleteTransactionHistory',
        errmsg: 'Cannot retry a retryable write that has been converted into a transaction',
      });
      expect(await db.collection('existing').findOne({ _id: 'conv2' as never })).toBeNull();
    });

    test('continuing a number above the active one: NoSuchTransaction naming both, with TransientTransactionError', async () => {
      const lsid = newLsid();
      const fresh = await raw({ find: 'existing', ...txn(lsid, 5) });
      expectRawRefusal(fresh, {
        code: 251,
        codeName: 'NoSuchTransaction',
        errmsg: 'Given transaction number 5 does not match any in-progress transactions. The active transaction number is -1',
      });
      expect(fresh.errorLabels).toEqual(['TransientTransactionError']);
      expect(await raw({ insert: 'existing', documents: [{ _id: 'act' }], ...txn(lsid, 6), startTransaction: true })).toMatchObject({ ok: 1 });
      expectRawRefusal(await raw({ find: 'existing', ...txn(lsid, 9) }), {
        code: 251,
        codeName: 'NoSuchTransaction',
        errmsg: 'Given transaction number 9 does not match any in-progress transactions. The active transaction number is 6',
      });
    });

    test('createIndexes on a collection this transaction created and wrote to: 263; while it is empty it works', async () => {
      const s = session();
      s.startTransaction();
      await db.createCollection('made_in_txn', { session: s });
      await db.collection('made_in_txn').createIndex({ a: 1 }, { session: s });
      await db.collection('made_in_txn').insertOne({ _id: 1, a: 1 } as Document, { session: s });
      await expectRefusal(db.collection('made_in_txn').createIndex({ b: 1 }, { session: s }), {
        code: 263,
        codeName: 'OperationNotSupportedInTransaction',
        errmsg: `Cannot create new indexes on non-empty collection ${dbName}.made_in_txn in a multi-document transaction.`,
      });
    });
  });

  test('the driver’s own transactions and retryable writes run', async () => {
    const s = session();
    await s.withTransaction(async () => {
      await db.collection('existing').insertOne({ _id: 'drv' } as Document, { session: s });
      await db.collection('existing').updateOne({ _id: 'drv' as never }, { $set: { x: 1 } }, { session: s });
      expect(await db.collection('existing').findOne({ _id: 'drv' as never }, { session: s })).toEqual({ _id: 'drv', x: 1 });
    }, { readConcern: { level: 'snapshot' }, writeConcern: { w: 'majority' } });
    expect(await db.collection('existing').findOne({ _id: 'drv' as never })).toEqual({ _id: 'drv', x: 1 });
    await db.collection('existing').insertOne({ _id: 'drv2' } as Document, { session: s });
    expect(await db.collection('existing').countDocuments({}, { session: s })).toBeGreaterThan(1);
  });
});
