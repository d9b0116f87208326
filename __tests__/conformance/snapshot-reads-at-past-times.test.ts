/**
 * Snapshot reads outside transactions at a past time (readConcern snapshot / atClusterTime): the
 * catalog (renames, indexes) and the data as they were then. (Found by review 9.)
 *
 * The emulator may refuse with NotImplemented (238); any other answer must be mongod's.
 *
 * Sources (mongodb/mongo):
 *  - jstests/noPassthrough/point_in_time_lookups.js (requires_fcv_70): reading at a time before a
 *    rename finds the documents under the OLD name and none under the new one ("Reading at
 *    'secondInsertTS' from the renamed collection should not find any document as it was
 *    non-existent"); a hint of an index created after the read time fails with BadValue, one of an
 *    index dropped after it is usable.
 *  - src/mongo/db/pipeline/lite_parsed_pipeline.cpp (assertSupportsReadConcern): "Explain for the
 *    aggregate command cannot run with a readConcern other than 'local'. Current readConcern: ..."
 *    (InvalidOptions 72).
 *  - jstests/libs/global_snapshot_reads_util.js: a read at a time sees exactly the data then.
 */
import { MongoClient, MongoServerError, Timestamp, type Document } from 'mongodb';
import { testTopology } from '../../test-backend/test-env';
import { adminCommand, describeIf, openClient, uniqueDbName, type Loose } from './support/server';

const dbName = uniqueDbName('attack9_snap');
const isReplSet = testTopology() === 'replset';

/** Runs `p`; a NotImplemented refusal passes, anything else must satisfy `check`. */
async function answerOr238<T>(p: Promise<T>, check: (v: T) => void): Promise<void> {
  let v: T;
  try {
    v = await p;
  } catch (e) {
    if (e instanceof MongoServerError && e.code === 238) return;
    throw e;
  }
  check(v);
}

/** Runs `p`; a NotImplemented refusal passes, else it must fail with `code`. */
async function errorOr238(p: Promise<unknown>, code: number, msg?: RegExp): Promise<void> {
  let out: unknown;
  try {
    out = await p;
  } catch (e) {
    if (e instanceof MongoServerError && (e.code === 238 || e.code === code)) {
      if (e.code === code && msg) expect(e.message).toMatch(msg);
      return;
    }
    throw e;
  }
  throw new Error(`expected error ${code} (or 238), got answer ${JSON.stringify(out)}`);
}

describeIf(isReplSet, 'snapshot reads need a replica set')('snapshot reads at a past cluster time', () => {
  let client: MongoClient;
  const db = (): ReturnType<MongoClient['db']> => client.db(dbName);

  beforeAll(async () => {
    client = await openClient();
    await db().command({ find: 'warm', readConcern: { level: 'snapshot' } });
  });
  afterAll(async () => {
    await db().dropDatabase().catch(() => undefined);
    await client?.close();
  });

  const snapFind = (coll: string, at: Timestamp, extra: Document = {}): Promise<Document> =>
    db().command({ find: coll, sort: { _id: 1 }, readConcern: { level: 'snapshot', atClusterTime: at }, ...extra });

  test('a read at a time before a rename finds the documents under the old name (point_in_time_lookups.js)', async () => {
    await db().createCollection('rn_src');
    const t = (await db().command({ insert: 'rn_src', documents: [{ _id: 1 }, { _id: 2 }] })).operationTime as Timestamp;
    await adminCommand(client, { renameCollection: `${dbName}.rn_src`, to: `${dbName}.rn_dst` });
    await answerOr238(snapFind('rn_src', t), (r) => expect(r.cursor.firstBatch).toEqual([{ _id: 1 }, { _id: 2 }]));
  });

  test('a read at a time before a rename finds nothing under the new name (point_in_time_lookups.js)', async () => {
    await db().createCollection('rn2_src');
    const t = (await db().command({ insert: 'rn2_src', documents: [{ _id: 1 }, { _id: 2 }] })).operationTime as Timestamp;
    await adminCommand(client, { renameCollection: `${dbName}.rn2_src`, to: `${dbName}.rn2_dst` });
    await answerOr238(snapFind('rn2_dst', t), (r) => expect(r.cursor.firstBatch).toEqual([]));
  });

  test('a read at a time before a dropTarget rename finds the target\'s own documents', async () => {
    await db().createCollection('rn3_src');
    await db().createCollection('rn3_dst');
    await db().command({ insert: 'rn3_src', documents: [{ _id: 'src' }] });
    const t = (await db().command({ insert: 'rn3_dst', documents: [{ _id: 'dst' }] })).operationTime as Timestamp;
    await adminCommand(client, { renameCollection: `${dbName}.rn3_src`, to: `${dbName}.rn3_dst`, dropTarget: true });
    await answerOr238(snapFind('rn3_dst', t), (r) => expect(r.cursor.firstBatch).toEqual([{ _id: 'dst' }]));
  });

  test('$lookup at a time before its foreign collection was renamed away still joins', async () => {
    await db().createCollection('lk_local');
    await db().createCollection('lk_foreign');
    await db().command({ insert: 'lk_local', documents: [{ _id: 1, k: 'a' }] });
    const t = (await db().command({ insert: 'lk_foreign', documents: [{ _id: 9, k: 'a' }] })).operationTime as Timestamp;
    await adminCommand(client, { renameCollection: `${dbName}.lk_foreign`, to: `${dbName}.lk_foreign2` });
    await answerOr238(
      db().command({
        aggregate: 'lk_local',
        pipeline: [{ $lookup: { from: 'lk_foreign', localField: 'k', foreignField: 'k', as: 'j' } }],
        cursor: {},
        readConcern: { level: 'snapshot', atClusterTime: t },
      }),
      (r) => expect(r.cursor.firstBatch).toEqual([{ _id: 1, k: 'a', j: [{ _id: 9, k: 'a' }] }]),
    );
  });

  test('hint of an index created after the read time fails with BadValue (point_in_time_lookups.js)', async () => {
    await db().createCollection('hint_new');
    const t = (await db().command({ insert: 'hint_new', documents: [{ _id: 1, x: 1 }] })).operationTime as Timestamp;
    await db().collection('hint_new').createIndex({ x: 1 });
    await errorOr238(snapFind('hint_new', t, { hint: { x: 1 } }), 2);
  });

  test('hint of an index dropped after the read time is usable (point_in_time_lookups.js)', async () => {
    await db().createCollection('hint_drop');
    await db().collection('hint_drop').createIndex({ x: 1 });
    const t = (await db().command({ insert: 'hint_drop', documents: [{ _id: 1, x: 1 }] })).operationTime as Timestamp;
    await db().collection('hint_drop').dropIndex('x_1');
    await answerOr238(snapFind('hint_drop', t, { hint: { x: 1 } }), (r) => expect(r.cursor.firstBatch).toEqual([{ _id: 1, x: 1 }]));
  });

  test('aggregate explain with readConcern snapshot is refused with InvalidOptions (lite_parsed_pipeline.cpp)', async () => {
    await db().collection<Loose>('expl').insertOne({ _id: 1 });
    await errorOr238(
      db().command({ aggregate: 'expl', pipeline: [{ $match: {} }], explain: true, readConcern: { level: 'snapshot' } }),
      72,
      /Explain for the aggregate command cannot run with a readConcern other than 'local'/,
    );
  });

  test('index lookups at a past time see the indexed value of that time', async () => {
    const c = db().collection<Loose>('ix');
    await c.createIndex({ x: 1 }, { unique: true });
    const t = (await db().command({ insert: 'ix', documents: [{ _id: 1, x: 1 }, { _id: 2, x: 2 }] })).operationTime as Timestamp;
    await c.updateOne({ _id: 1 }, { $set: { x: 10 } });
    await c.deleteOne({ _id: 2 });
    await c.insertOne({ _id: 3, x: 2 });
    await answerOr238(db().command({ find: 'ix', filter: { x: 1 }, readConcern: { level: 'snapshot', atClusterTime: t } }), (r) =>
      expect(r.cursor.firstBatch).toEqual([{ _id: 1, x: 1 }]),
    );
    await answerOr238(db().command({ find: 'ix', filter: { x: 2 }, readConcern: { level: 'snapshot', atClusterTime: t } }), (r) =>
      expect(r.cursor.firstBatch).toEqual([{ _id: 2, x: 2 }]),
    );
    await answerOr238(db().command({ find: 'ix', filter: { x: { $gte: 2 } }, sort: { x: 1 }, readConcern: { level: 'snapshot', atClusterTime: t } }), (r) =>
      expect(r.cursor.firstBatch).toEqual([{ _id: 2, x: 2 }]),
    );
    await answerOr238(db().command({ find: 'ix', filter: { _id: 3 }, readConcern: { level: 'snapshot', atClusterTime: t } }), (r) =>
      expect(r.cursor.firstBatch).toEqual([]),
    );
    await answerOr238(db().command({ distinct: 'ix', key: 'x', readConcern: { level: 'snapshot', atClusterTime: t } }), (r) =>
      expect(r.values).toEqual([1, 2]),
    );
    await answerOr238(
      db().command({ aggregate: 'ix', pipeline: [{ $match: { x: { $in: [1, 2, 10] } } }, { $count: 'n' }], cursor: {}, readConcern: { level: 'snapshot', atClusterTime: t } }),
      (r) => expect(r.cursor.firstBatch).toEqual([{ n: 2 }]),
    );
  });

  test('a committed transaction is one point in time; a read at its commit time sees all of it', async () => {
    const c = db().collection<Loose>('txn');
    await c.insertMany([{ _id: 1, v: 0 }, { _id: 2, v: 0 }]);
    const session = client.startSession();
    let commitTime: Timestamp | undefined;
    try {
      session.startTransaction();
      await c.updateOne({ _id: 1 }, { $set: { v: 1 } }, { session });
      await c.updateOne({ _id: 2 }, { $set: { v: 1 } }, { session });
      await c.insertOne({ _id: 3, v: 1 }, { session });
      await session.commitTransaction();
      commitTime = session.operationTime;
    } finally {
      await session.endSession();
    }
    await c.updateOne({ _id: 1 }, { $set: { v: 2 } });
    await answerOr238(snapFind('txn', commitTime!), (r) =>
      expect(r.cursor.firstBatch).toEqual([{ _id: 1, v: 1 }, { _id: 2, v: 1 }, { _id: 3, v: 1 }]),
    );
    const before = new Timestamp({ t: commitTime!.t, i: commitTime!.i - 1 });
    await answerOr238(snapFind('txn', before), (r) => {
      const vs = (r.cursor.firstBatch as Document[]).map((d) => d.v);
      // all-or-nothing
      expect(vs.every((v) => v === 1) || vs.every((v) => v === 0)).toBe(true);
    });
  });

  test('getMore of a snapshot cursor keeps the snapshot and echoes atClusterTime', async () => {
    const c = db().collection<Loose>('gm');
    await c.insertMany([{ _id: 1, v: 0 }, { _id: 2, v: 0 }, { _id: 3, v: 0 }]);
    const first = await db().command({ find: 'gm', sort: { _id: 1 }, batchSize: 1, readConcern: { level: 'snapshot' } });
    await c.updateMany({}, { $set: { v: 9 } });
    await c.deleteOne({ _id: 3 });
    const more = await db().command({ getMore: first.cursor.id, collection: 'gm' });
    expect(more.cursor.nextBatch).toEqual([{ _id: 2, v: 0 }, { _id: 3, v: 0 }]);
    expect(more.cursor.atClusterTime).toEqual(first.cursor.atClusterTime);
  });

  test('a snapshot session reads all its reads at the first read\'s time', async () => {
    const c = db().collection<Loose>('sess');
    await c.insertMany([{ _id: 1, v: 0 }]);
    const session = client.startSession({ snapshot: true });
    try {
      expect(await c.find({}, { session }).toArray()).toEqual([{ _id: 1, v: 0 }]);
      await c.updateOne({ _id: 1 }, { $set: { v: 1 } });
      await c.insertOne({ _id: 2, v: 1 });
      expect(await c.find({}, { session }).toArray()).toEqual([{ _id: 1, v: 0 }]);
      expect(await c.distinct('v', {}, { session })).toEqual([0]);
      expect(await c.countDocuments({}, { session })).toBe(1);
    } finally {
      await session.endSession();
    }
  });
});
