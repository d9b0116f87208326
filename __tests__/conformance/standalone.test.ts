/**
 * What a standalone mongod (started without --replSet) answers, on a private server of the active
 * kind started by this file (the emulator with topology 'standalone', or mongod through
 * mongodb-memory-server's MongoMemoryServer); on MONGODB_URI only when that deployment is itself a
 * standalone.
 *
 * Sources (MongoDB server, mongodb/mongo, and the driver specifications):
 *  - hello: src/mongo/db/repl/replication_info.cpp. `appendReplicationInfo` writes the replica-set
 *    fields (fillIsMasterForReplSet: hosts, setName, setVersion, primary, me, electionId, lastWrite,
 *    secondary) only on a replica-set member; a standalone writes `isWritablePrimary` and
 *    `topologyVersion`. CmdHello::run then appends maxBsonObjectSize, maxMessageSizeBytes,
 *    maxWriteBatchSize, localTime, logicalSessionTimeoutMinutes, connectionId, min/maxWireVersion,
 *    readOnly for every node.
 *  - No $clusterTime / operationTime in replies: appendClusterAndOperationTime
 *    (src/mongo/db/service_entry_point_common.cpp) returns early unless the node is a replica-set member.
 *  - Transactions and any txnNumber: initializeOperationSessionInfo
 *    (src/mongo/db/session/initialize_operation_session_info.cpp) uasserts IllegalOperation (20)
 *    "Transaction numbers are only allowed on a replica set member or mongos".
 *  - Retryable writes: the driver does not use them on a standalone (retryable-writes spec,
 *    "Supported Server Versions": "the server type is not standalone ... Drivers MUST NOT include a
 *    transaction ID in the write command").
 *  - Change streams: DocumentSourceChangeStream::assertIsLegalSpecification
 *    (src/mongo/db/pipeline/document_source_change_stream.cpp) uasserts 40573 "The $changeStream stage
 *    is only supported on replica sets".
 *  - $$CLUSTER_TIME: src/mongo/db/pipeline/variables.cpp (standalone: "the logical clock may not be
 *    running and $$CLUSTER_TIME is not available"); mongod 5.0-7.x fail with 51144 "Builtin variable
 *    '$$CLUSTER_TIME' is not available"; the newest jstests expect 10071200 "system variable
 *    $$CLUSTER_TIME is not available in standalone mode" instead (a later server release; file not
 *    pinned down). The emulator answers as 7.0 does; a real server may answer either.
 */
import { Long, MongoClient, type CommandStartedEvent, type CommandSucceededEvent, type Document, type TopologyDescription } from 'mongodb';
import * as os from 'node:os';
import { startPrivateBackend, testTopology } from '../../test-backend/test-env';
import { describeIf, expectServerError, testBackendKind, uniqueDbName } from './support/server';

const canRun = testBackendKind() !== 'uri' || testTopology() === 'standalone';
const dbName = uniqueDbName('conf_standalone');

describeIf(canRun, 'the deployment behind MONGODB_URI is not a standalone and the tests cannot start one next to it')('a standalone mongod', () => {
  let server: { uri: string; stop(): Promise<void> };
  let client: MongoClient;
  const started: CommandStartedEvent[] = [];
  const succeeded: CommandSucceededEvent[] = [];
  let description: TopologyDescription | undefined;

  beforeAll(async () => {
    const s = await startPrivateBackend('standalone');
    if ('unsupported' in s) throw new Error(s.unsupported);
    server = s;
    client = new MongoClient(server.uri, { serverSelectionTimeoutMS: 10_000, monitorCommands: true, runtimeAdapters: { os } });
    client.on('commandStarted', (e) => started.push(e));
    client.on('commandSucceeded', (e) => succeeded.push(e));
    client.on('topologyDescriptionChanged', (e) => {
      description = e.newDescription;
    });
    await client.connect();
  }, 90_000);

  afterAll(async () => {
    await client?.db(dbName).dropDatabase().catch(() => undefined);
    await client?.close();
    await server?.stop();
  }, 60_000);

  test('the URI names no replica set and the driver sees a standalone (topology Single)', () => {
    expect(server.uri).not.toContain('replicaSet=');
    expect(description?.type).toBe('Single');
    expect([...(description?.servers.values() ?? [])].map((s) => s.type)).toEqual(['Standalone']);
  });

  test('hello has no replica-set fields, and the common fields of every node', async () => {
    const hello = await client.db('admin').command({ hello: 1 });
    for (const field of ['setName', 'hosts', 'primary', 'me', 'electionId', 'setVersion', 'lastWrite', 'secondary', 'msg']) {
      expect({ field, present: field in hello }).toEqual({ field, present: false });
    }
    expect(hello.isWritablePrimary).toBe(true);
    expect(hello.topologyVersion).toEqual(expect.objectContaining({ processId: expect.anything() }));
    expect(hello.maxBsonObjectSize).toBe(16 * 1024 * 1024);
    expect(hello.maxMessageSizeBytes).toBe(48_000_000);
    expect(hello.maxWriteBatchSize).toBe(100_000);
    expect(hello.localTime).toBeInstanceOf(Date);
    expect(hello.logicalSessionTimeoutMinutes).toBe(30);
    expect(typeof hello.connectionId).toBe('number');
    expect(hello.minWireVersion).toBe(0);
    expect(hello.maxWireVersion).toBeGreaterThanOrEqual(17); // 6.0 and newer
    expect(hello.readOnly).toBe(false);
    expect(hello.ok).toBe(1);

    const legacy = await client.db('admin').command({ isMaster: 1 });
    expect(legacy.ismaster).toBe(true);
    expect('isWritablePrimary' in legacy).toBe(false);
    expect('setName' in legacy).toBe(false);
  });

  test('replies carry no $clusterTime and no operationTime', async () => {
    succeeded.length = 0;
    await client.db(dbName).command({ ping: 1 });
    await client.db(dbName).collection('c').insertOne({ _id: 'ct' } as Document);
    expect(succeeded.length).toBeGreaterThanOrEqual(2);
    for (const e of succeeded) {
      const reply = e.reply as Document;
      expect({ command: e.commandName, clusterTime: reply.$clusterTime, operationTime: reply.operationTime }).toEqual({
        command: e.commandName,
        clusterTime: undefined,
        operationTime: undefined,
      });
    }
  });

  test('a transaction fails with IllegalOperation (20) and writes nothing', async () => {
    const coll = client.db(dbName).collection('txn');
    const session = client.startSession();
    try {
      session.startTransaction();
      const outcome = await coll.insertOne({ _id: 'in-txn' } as Document, { session }).then(
        () => undefined,
        (e: unknown) => e,
      );
      // The Node driver rewraps a write's IllegalOperation as "does not support retryable writes"
      // (lib/operations/execute_operation.js) and keeps the server's reply as originalError.
      const original = (outcome as { originalError?: { code?: number; codeName?: string; message?: string } } | undefined)?.originalError;
      expect({ code: original?.code, codeName: original?.codeName, message: original?.message }).toEqual({
        code: 20,
        codeName: 'IllegalOperation',
        message: 'Transaction numbers are only allowed on a replica set member or mongos',
      });
    } finally {
      await session.abortTransaction().catch(() => undefined);
      await session.endSession();
    }
    expect(await coll.countDocuments()).toBe(0);
  });

  test('a raw command with lsid and txnNumber (a retryable write) fails with IllegalOperation (20)', async () => {
    const session = client.startSession();
    try {
      const error = await expectServerError(
        // txnNumber is a TxnNumber, a BSON long (logical_session_id.idl): an int32 would fail the
        // OperationSessionInfo parse with TypeMismatch before the replica-set check.
        client.db(dbName).command({ insert: 'raw_txn', documents: [{ _id: 1 }], lsid: session.id, txnNumber: Long.fromNumber(1) } as Document),
        20,
      );
      expect(error.message).toBe('Transaction numbers are only allowed on a replica set member or mongos');
    } finally {
      await session.endSession();
    }
    expect(await client.db(dbName).collection('raw_txn').countDocuments()).toBe(0);
  });

  test('the driver does not make writes retryable on a standalone: no txnNumber is sent, the write succeeds', async () => {
    started.length = 0;
    const result = await client.db(dbName).collection('retry').insertOne({ _id: 'once' } as Document);
    expect(result.insertedId).toBe('once');
    const inserts = started.filter((e) => e.commandName === 'insert');
    expect(inserts).toHaveLength(1);
    expect(inserts[0].command.txnNumber).toBeUndefined();
    expect(inserts[0].command.lsid).toBeDefined();
  });

  test('a change stream is refused with 40573', async () => {
    const coll = client.db(dbName).collection('cs');
    const error = await expectServerError(coll.aggregate([{ $changeStream: {} }]).toArray(), 40573);
    expect(error.message).toBe('The $changeStream stage is only supported on replica sets');
    const dbWide = await expectServerError(client.db(dbName).aggregate([{ $changeStream: {} }]).toArray(), 40573);
    expect(dbWide.message).toBe('The $changeStream stage is only supported on replica sets');
  });

  test('$$CLUSTER_TIME is not available; $$NOW is', async () => {
    const coll = client.db(dbName).collection('vars');
    await coll.insertOne({ _id: 1 } as Document);
    const error = await expectServerErrorIn(coll.find({}, { projection: { ct: '$$CLUSTER_TIME' } }).toArray(), testBackendKind() === 'emulator' ? [51144] : [51144, 10071200]);
    if (error.code === 51144) expect(error.message).toBe("Builtin variable '$$CLUSTER_TIME' is not available");
    await expectServerErrorIn(coll.aggregate([{ $project: { ct: '$$CLUSTER_TIME' } }]).toArray(), testBackendKind() === 'emulator' ? [51144] : [51144, 10071200]);
    const [doc] = await coll.find({}, { projection: { now: '$$NOW' } }).toArray();
    expect(doc.now).toBeInstanceOf(Date);
  });
});

async function expectServerErrorIn(promise: Promise<unknown>, codes: number[]): Promise<{ code?: number; message: string }> {
  try {
    await promise;
  } catch (error) {
    const code = (error as { code?: number }).code;
    if (code === undefined || !codes.includes(code)) throw new Error(`expected code ${codes.join(' or ')}, got ${String(code)}: ${(error as Error).message}`);
    return error as { code?: number; message: string };
  }
  throw new Error(`expected code ${codes.join(' or ')}, but the operation succeeded`);
}
