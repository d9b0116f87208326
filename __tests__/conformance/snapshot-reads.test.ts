/**
 * Snapshot reads outside transactions (readConcern `{level: 'snapshot'}`, `atClusterTime`;
 * MongoDB 5.0+), as mongod answers them.
 *
 * Sources (mongodb/mongo unless stated):
 *  - Which commands accept the level outside a transaction: find, aggregate, distinct
 *    (jstests/noPassthrough/readConcern_snapshot.js; jstests/libs/override_methods/
 *    read_and_write_concern_helpers.js `kCommandsSupportingSnapshot`); count refuses with
 *    InvalidOptions: _extractReadConcern (src/mongo/db/service_entry_point_common.cpp) "Command
 *    <name> does not support <ReadConcernArgs::toString()> :: caused by :: <reason>", count_cmd.cpp
 *    "read concern snapshot not supported"; the provenance "clientSupplied" is set before the check.
 *  - The reply's time: `cursor.atClusterTime` after `ns` (CursorResponseBuilder::done,
 *    src/mongo/db/query/cursor_response.cpp), also on getMore (readConcern_snapshot.js;
 *    jstests/libs/global_snapshot_reads_util.js: the getMore's atClusterTime equals the find's and
 *    its documents do not show a later update); distinct's top-level `atClusterTime` after `values`
 *    (src/mongo/db/commands/query_cmd/distinct.cpp).
 *  - Renames and hints at a time: jstests/noPassthrough/point_in_time_lookups.js (requires_fcv_70).
 *  - Reading at a given time: global_snapshot_reads_util.js reads at an insert's operationTime and
 *    sees exactly the documents then, `$lookup` included; driver spec sessions/tests/
 *    snapshot-sessions.json (a snapshot session keeps reading at its first read's time).
 *  - Refusals: ReadConcernArgs::parse (src/mongo/db/repl/read_concern_args.cpp) for atClusterTime
 *    without level snapshot and with afterClusterTime; waitForReadConcernImpl
 *    (src/mongo/db/read_concern_mongod.cpp) for a time above the current cluster time (InvalidOptions,
 *    LogicalTime::toString `{ ts: Timestamp(s, i) }`) and for a standalone (NotAReplicaSet 123,
 *    src/mongo/base/error_codes.yml); WiredTigerRecoveryUnit::_txnOpen for a time older than the
 *    kept history (SnapshotTooOld 239 "Read timestamp Timestamp(s, i) is older than the oldest
 *    available timestamp."), the history being minSnapshotHistoryWindowInSeconds (300 s) behind the
 *    stable timestamp (WiredTigerKVEngine::_calculateHistoryLagFromStableTimestamp).
 */
import { MongoClient, Timestamp, type Document } from 'mongodb';
import * as os from 'node:os';
import { startPrivateBackend, testTopology } from '../../test-backend/test-env';
import { describeIf, expectServerError, openClient, testBackendKind, uniqueDbName, type Loose } from './support/server';

const dbName = uniqueDbName('conf_snapshot');
const isReplSet = testTopology() === 'replset';

describeIf(isReplSet, 'snapshot reads need a replica set member')('snapshot reads outside transactions', () => {
  let client: MongoClient;

  beforeAll(async () => {
    client = await openClient();
    // The emulator keeps history for snapshot reads from its first snapshot read on (FIDELITY.md);
    // mongod keeps it always. One read first makes the later atClusterTime reads independent of
    // test order.
    await client.db(dbName).command({ find: 'warm_up', readConcern: { level: 'snapshot' } });
  });

  afterAll(async () => {
    await client?.db(dbName).dropDatabase().catch(() => undefined);
    await client?.close();
  });

  const db = (): ReturnType<MongoClient['db']> => client.db(dbName);

  /** Inserts `docs` into a fresh collection and returns the insert's operationTime. */
  async function seed(coll: string, docs: Document[]): Promise<Timestamp> {
    const r = await db().command({ insert: coll, documents: docs });
    return r.operationTime as Timestamp;
  }

  test('find answers cursor.atClusterTime after ns, and a write after the snapshot is not seen at that time', async () => {
    await seed('c1', [{ _id: 1, x: 1 }, { _id: 2, x: 2 }]);
    const first = await db().command({ find: 'c1', sort: { _id: 1 }, readConcern: { level: 'snapshot' } });
    expect(Object.keys(first.cursor)).toEqual(['firstBatch', 'id', 'ns', 'atClusterTime']);
    const at = first.cursor.atClusterTime as Timestamp;
    expect(at).toBeInstanceOf(Timestamp);
    expect(first.cursor.firstBatch).toEqual([{ _id: 1, x: 1 }, { _id: 2, x: 2 }]);

    await db().command({ update: 'c1', updates: [{ q: { _id: 1 }, u: { $set: { x: 10 } } }] });
    await db().command({ insert: 'c1', documents: [{ _id: 3, x: 3 }] });
    await db().command({ delete: 'c1', deletes: [{ q: { _id: 2 }, limit: 1 }] });

    const again = await db().command({ find: 'c1', sort: { _id: 1 }, readConcern: { level: 'snapshot', atClusterTime: at } });
    expect(again.cursor.firstBatch).toEqual([{ _id: 1, x: 1 }, { _id: 2, x: 2 }]);
    expect(again.cursor.atClusterTime).toEqual(at);
    const latest = await db().command({ find: 'c1', sort: { _id: 1 } });
    expect(latest.cursor.firstBatch).toEqual([{ _id: 1, x: 10 }, { _id: 3, x: 3 }]);
    expect(latest.cursor.atClusterTime).toBeUndefined();
  });

  test('a read at an insert operationTime sees exactly the documents then ($lookup included)', async () => {
    const t1 = await seed('c2', [{ _id: 1, k: 'a' }]);
    await seed('c2b', [{ _id: 'a', v: 1 }]);
    const t2 = (await db().command({ insert: 'c2', documents: [{ _id: 2, k: 'a' }] })).operationTime as Timestamp;
    await db().command({ update: 'c2b', updates: [{ q: { _id: 'a' }, u: { $set: { v: 2 } } }] });

    const atT1 = await db().command({ find: 'c2', readConcern: { level: 'snapshot', atClusterTime: t1 } });
    expect(atT1.cursor.firstBatch).toEqual([{ _id: 1, k: 'a' }]);
    const agg = await db().command({
      aggregate: 'c2',
      pipeline: [{ $lookup: { from: 'c2b', localField: 'k', foreignField: '_id', as: 'j' } }, { $sort: { _id: 1 } }],
      cursor: {},
      readConcern: { level: 'snapshot', atClusterTime: t2 },
    });
    expect(agg.cursor.atClusterTime).toEqual(t2);
    expect(agg.cursor.firstBatch).toEqual([
      { _id: 1, k: 'a', j: [{ _id: 'a', v: 1 }] },
      { _id: 2, k: 'a', j: [{ _id: 'a', v: 1 }] },
    ]);
  });

  test('getMore continues at the snapshot and repeats atClusterTime', async () => {
    await seed('c3', [1, 2, 3, 4, 5].map((i) => ({ _id: i, x: i })));
    const first = await db().command({ find: 'c3', sort: { _id: 1 }, batchSize: 2, readConcern: { level: 'snapshot' } });
    const at = first.cursor.atClusterTime as Timestamp;
    expect(first.cursor.firstBatch.map((d: Document) => d._id)).toEqual([1, 2]);
    await db().command({ update: 'c3', updates: [{ q: {}, u: { $set: { x: 0 } }, multi: true }] });
    await db().command({ insert: 'c3', documents: [{ _id: 6, x: 6 }] });

    const more = await db().command({ getMore: first.cursor.id, collection: 'c3' });
    expect(Object.keys(more.cursor)).toEqual(['nextBatch', 'id', 'ns', 'atClusterTime']);
    expect(more.cursor.atClusterTime).toEqual(at);
    expect(more.cursor.nextBatch).toEqual([3, 4, 5].map((i) => ({ _id: i, x: i })));
    expect(Number(more.cursor.id)).toBe(0);
  });

  test('distinct answers a top-level atClusterTime after values', async () => {
    await seed('c4', [{ _id: 1, x: 'a' }, { _id: 2, x: 'b' }]);
    const r = await db().command({ distinct: 'c4', key: 'x', readConcern: { level: 'snapshot' } });
    expect(Object.keys(r).slice(0, 3)).toEqual(['values', 'atClusterTime', 'ok']);
    expect(r.values.sort()).toEqual(['a', 'b']);
    await db().command({ update: 'c4', updates: [{ q: {}, u: { $set: { x: 'z' } }, multi: true }] });
    const old = await db().command({ distinct: 'c4', key: 'x', readConcern: { level: 'snapshot', atClusterTime: r.atClusterTime } });
    expect(old.values.sort()).toEqual(['a', 'b']);
    expect(old.atClusterTime).toEqual(r.atClusterTime);
  });

  test('a driver snapshot session keeps reading at its first read', async () => {
    await seed('c5', [{ _id: 1, n: 1 }]);
    const session = client.startSession({ snapshot: true });
    try {
      const coll = db().collection<Loose>('c5');
      expect(await coll.findOne({ _id: 1 }, { session })).toEqual({ _id: 1, n: 1 });
      await db().command({ update: 'c5', updates: [{ q: { _id: 1 }, u: { $inc: { n: 1 } } }] });
      expect(await coll.findOne({ _id: 1 }, { session })).toEqual({ _id: 1, n: 1 });
      expect(await coll.countDocuments({}, { session })).toBe(1);
      expect(await coll.findOne({ _id: 1 })).toEqual({ _id: 1, n: 2 });
    } finally {
      await session.endSession();
    }
  });

  test('a committed transaction is seen whole: not at the time before its commit, entirely at its commit time', async () => {
    const before = await seed('c6', [{ _id: 0 }]);
    const session = client.startSession();
    let commitTime: Timestamp | undefined;
    try {
      session.startTransaction();
      await db().collection<Loose>('c6').insertOne({ _id: 1 }, { session });
      await db().collection<Loose>('c6').insertOne({ _id: 2 }, { session });
      await session.commitTransaction();
      commitTime = session.operationTime;
    } finally {
      await session.endSession();
    }
    const atBefore = await db().command({ find: 'c6', sort: { _id: 1 }, readConcern: { level: 'snapshot', atClusterTime: before } });
    expect(atBefore.cursor.firstBatch).toEqual([{ _id: 0 }]);
    const atCommit = await db().command({ find: 'c6', sort: { _id: 1 }, readConcern: { level: 'snapshot', atClusterTime: commitTime } });
    expect(atCommit.cursor.firstBatch).toEqual([{ _id: 0 }, { _id: 1 }, { _id: 2 }]);
  });

  test('count refuses readConcern snapshot (InvalidOptions, _extractReadConcern)', async () => {
    await seed('c7', [{ _id: 1 }]);
    const e = await expectServerError(db().command({ count: 'c7', readConcern: { level: 'snapshot' } }), 72);
    expect(e.codeName).toBe('InvalidOptions');
    expect(e.message).toBe('Command count does not support { readConcern: { level: "snapshot", provenance: "clientSupplied" } } :: caused by :: read concern snapshot not supported');
  });

  test('atClusterTime above the current cluster time is refused (InvalidOptions)', async () => {
    const now = (await db().command({ insert: 'c8', documents: [{ _id: 1 }] })).operationTime as Timestamp;
    const future = new Timestamp({ t: now.t + 1000, i: 1 });
    const e = await expectServerError(db().command({ find: 'c8', readConcern: { level: 'snapshot', atClusterTime: future } }), 72);
    expect(e.message).toMatch(
      new RegExp(`^readConcern atClusterTime value must not be greater than the current clusterTime\\. Requested clusterTime: \\{ ts: Timestamp\\(${future.t}, 1\\) \\}; current clusterTime: \\{ ts: Timestamp\\(\\d+, \\d+\\) \\}$`),
    );
  });

  test('atClusterTime older than minSnapshotHistoryWindowInSeconds answers SnapshotTooOld', async () => {
    await seed('c9', [{ _id: 1 }]);
    const old = new Timestamp({ t: Math.floor(Date.now() / 1000) - 3600, i: 1 });
    const e = await expectServerError(db().command({ find: 'c9', readConcern: { level: 'snapshot', atClusterTime: old } }), 239);
    expect(e.codeName).toBe('SnapshotTooOld');
    expect(e.message).toBe(`Read timestamp Timestamp(${old.t}, 1) is older than the oldest available timestamp.`);
  });

  test('ReadConcernArgs::parse: atClusterTime needs level snapshot and excludes afterClusterTime', async () => {
    const t = (await db().command({ insert: 'c10', documents: [{ _id: 1 }] })).operationTime as Timestamp;
    let e = await expectServerError(db().command({ find: 'c10', readConcern: { level: 'majority', atClusterTime: t } }), 72);
    expect(e.message).toBe('atClusterTime field can be set only if level is equal to snapshot');
    e = await expectServerError(db().command({ find: 'c10', readConcern: { level: 'snapshot', atClusterTime: t, afterClusterTime: t } }), 72);
    expect(e.message).toBe(
      'Specifying a timestamp for readConcern snapshot in a causally consistent session is not allowed. See https://docs.mongodb.com/manual/core/read-isolation-consistency-recency/#causal-consistency',
    );
  });

  test('afterClusterTime with snapshot reads the latest state at or after it', async () => {
    const t = await seed('c11', [{ _id: 1 }]);
    const r = await db().command({ find: 'c11', readConcern: { level: 'snapshot', afterClusterTime: t } });
    expect(r.cursor.firstBatch).toEqual([{ _id: 1 }]);
    expect((r.cursor.atClusterTime as Timestamp).greaterThanOrEqual(t)).toBe(true);
  });

  // jstests/noPassthrough/point_in_time_lookups.js: a read at a time at or after a rename finds the
  // collection under its new name and nothing under the old one. (Reads at a time before the rename
  // are refused by the emulator, see snapshot-reads-at-past-times.test.ts and FIDELITY.md.)
  test('a read at or after a rename sees the collection under its new name only', async () => {
    await db().createCollection('rn_old');
    await seed('rn_old', [{ _id: 1 }, { _id: 2 }]);
    const renamed = await client.db('admin').command({ renameCollection: `${dbName}.rn_old`, to: `${dbName}.rn_new` });
    const at = renamed.operationTime as Timestamp;
    const find = (coll: string, t: Timestamp): Promise<Document> =>
      db().command({ find: coll, sort: { _id: 1 }, readConcern: { level: 'snapshot', atClusterTime: t } });
    expect((await find('rn_new', at)).cursor.firstBatch).toEqual([{ _id: 1 }, { _id: 2 }]);
    expect((await find('rn_old', at)).cursor.firstBatch).toEqual([]);
    const later = await seed('rn_new', [{ _id: 3 }]);
    expect((await find('rn_new', later)).cursor.firstBatch).toEqual([{ _id: 1 }, { _id: 2 }, { _id: 3 }]);
    expect((await find('rn_old', later)).cursor.firstBatch).toEqual([]);
  });

  // point_in_time_lookups.js resolves a hint against the indexes of the read time; at a time after
  // the last index build the current indexes are those (hint.ts: an unknown index is BadValue).
  test('a hint at a time after the index build is resolved against the index', async () => {
    await db().createCollection('hinted');
    await db().collection('hinted').createIndex({ x: 1 });
    const t = await seed('hinted', [{ _id: 1, x: 1 }, { _id: 2 }]);
    const r = await db().command({ find: 'hinted', hint: { x: 1 }, sort: { _id: 1 }, readConcern: { level: 'snapshot', atClusterTime: t } });
    expect(r.cursor.firstBatch).toEqual([{ _id: 1, x: 1 }, { _id: 2 }]);
    const e = await expectServerError(db().command({ find: 'hinted', hint: { y: 1 }, readConcern: { level: 'snapshot', atClusterTime: t } }), 2);
    expect(e.message).toMatch(/hint provided does not correspond to an existing index/);
  });
});

const canStartStandalone = testBackendKind() !== 'uri' || testTopology() === 'standalone';

describeIf(canStartStandalone, 'the deployment behind MONGODB_URI is not a standalone and the tests cannot start one next to it')('snapshot reads on a standalone', () => {
  let server: { uri: string; stop(): Promise<void> };
  let client: MongoClient;

  beforeAll(async () => {
    const s = await startPrivateBackend('standalone');
    if ('unsupported' in s) throw new Error(s.unsupported);
    server = s;
    client = new MongoClient(server.uri, { serverSelectionTimeoutMS: 10_000, runtimeAdapters: { os } });
    await client.connect();
  }, 90_000);

  afterAll(async () => {
    await client?.db(dbName).dropDatabase().catch(() => undefined);
    await client?.close();
    await server?.stop();
  }, 60_000);

  test('find, aggregate and distinct answer NotAReplicaSet (waitForReadConcernImpl)', async () => {
    await client.db(dbName).collection<Loose>('s').insertOne({ _id: 1 });
    for (const cmd of [
      { find: 's', readConcern: { level: 'snapshot' } },
      { aggregate: 's', pipeline: [], cursor: {}, readConcern: { level: 'snapshot' } },
      { distinct: 's', key: 'x', readConcern: { level: 'snapshot' } },
    ]) {
      const e = await expectServerError(client.db(dbName).command(cmd), 123);
      expect(e.codeName).toBe('NotAReplicaSet');
      expect(e.message).toBe('node needs to be a replica set member to use readConcern: snapshot');
    }
  });
});
