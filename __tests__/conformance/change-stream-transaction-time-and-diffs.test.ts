/**
 * Change streams: events of one transaction share its time, the updateDescription of modifier and
 * pipeline updates (byte-level diffs), rename events. (Found by review 9.)
 *
 * Sources (mongodb/mongo):
 *  - src/mongo/db/pipeline/change_stream_filter_helpers.cpp (buildTransactionFilter): "All events
 *    in a transaction share the same clusterTime, lsid, and txNumber values."
 *  - src/mongo/db/update/push_node.cpp (PushNode::logUpdate, kArrayAppendUpdate): "Rather than
 *    writing out the entire contents of the array, we create oplog entries for the newly appended
 *    elements" -> updateDescription.updatedFields { 'arr.<n>': value }.
 *  - src/mongo/db/update/document_diff_calculator.cpp (computeDocDiff: elements compared with
 *    binaryEqual, so a type change of an equal number, or 0.0 -> -0.0, is an update) and
 *    pipeline_executor.cpp (a pipeline update that changes the document's bytes is a write).
 */
import { Double, Long, MongoClient, type ChangeStream, type Db, type Document } from 'mongodb';
import { testTopology } from '../../test-backend/test-env';
import { describeIf, openClient, uniqueDbName, type Loose } from './support/server';

const dbName = uniqueDbName('attack9_cs');
const isReplSet = testTopology() === 'replset';

describeIf(isReplSet, 'change streams need a replica set')('change streams: transaction time, update descriptions, renames', () => {
  let client: MongoClient;
  let db: Db;
  const streams: ChangeStream[] = [];

  beforeAll(async () => {
    client = await openClient();
    db = client.db(dbName);
  });
  afterAll(async () => {
    for (const s of streams) await s.close().catch(() => undefined);
    await db.dropDatabase().catch(() => undefined);
    await client.close();
  });

  function watch(coll: string, options: Document = {}): ChangeStream {
    const s = db.collection(coll).watch([], options);
    streams.push(s);
    return s;
  }

  async function next(s: ChangeStream): Promise<Document> {
    return (await s.next()) as Document;
  }

  async function opened(s: ChangeStream): Promise<void> {
    // Make the aggregate run before the writes (an empty getMore round).
    await s.tryNext();
  }

  test('events of one transaction share one clusterTime (change_stream_filter_helpers.cpp)', async () => {
    const c = await db.createCollection<Loose>('txn');
    await c.insertOne({ _id: 0 });
    const s = watch('txn');
    await opened(s);
    const session = client.startSession();
    try {
      await session.withTransaction(async () => {
        await c.insertOne({ _id: 1 }, { session });
        await c.insertOne({ _id: 2 }, { session });
        await c.updateOne({ _id: 0 }, { $set: { x: 1 } }, { session });
      });
    } finally {
      await session.endSession();
    }
    const a = await next(s);
    const b = await next(s);
    const u = await next(s);
    expect([a.operationType, b.operationType, u.operationType]).toEqual(['insert', 'insert', 'update']);
    expect(a.txnNumber).toBeDefined();
    expect(b.clusterTime).toEqual(a.clusterTime);
    expect(u.clusterTime).toEqual(a.clusterTime);
  });

  test('$push appending to an array is described by the appended elements (push_node.cpp)', async () => {
    const c = await db.createCollection<Loose>('push');
    await c.insertOne({ _id: 1, arr: [1, 2] });
    const s = watch('push');
    await opened(s);
    await c.updateOne({ _id: 1 }, { $push: { arr: 3 } } as Document);
    const ev = await next(s);
    expect(ev.updateDescription).toEqual({ updatedFields: { 'arr.2': 3 }, removedFields: [], truncatedArrays: [] });
  });

  test('a pipeline update turning Int32 1 into Int64 1 is a write and an update event (binaryEqual)', async () => {
    const c = await db.createCollection<Loose>('numtype');
    await c.insertOne({ _id: 1, big: 'x'.repeat(200), a: 1 });
    const s = watch('numtype', { promoteLongs: false });
    await opened(s);
    const r = await c.updateOne({ _id: 1 }, [{ $set: { a: { $toLong: '$a' } } }]);
    expect(r.modifiedCount).toBe(1);
    const ev = await next(s);
    expect(ev.operationType).toBe('update');
    expect(ev.updateDescription.updatedFields).toEqual({ a: Long.fromNumber(1) });
    expect(ev.updateDescription.updatedFields.a).toBeInstanceOf(Long);
  });

  test('a pipeline update turning 0.0 into -0.0 is a write (binaryEqual)', async () => {
    const c = await db.createCollection<Loose>('negzero');
    await c.insertOne({ _id: 1, big: 'x'.repeat(200), a: new Double(0) });
    const r = await c.updateOne({ _id: 1 }, [{ $set: { a: { $multiply: ['$a', -1] } } }]);
    expect(r.modifiedCount).toBe(1);
    const doc = await c.findOne({ _id: 1 }, { promoteValues: false });
    expect(Object.is((doc!.a as Double).valueOf(), -0)).toBe(true);
  });

  test('a pipeline update reordering fields reports the moved field as updated (computeDocDiff)', async () => {
    const c = await db.createCollection<Loose>('reorder');
    await c.insertOne({ _id: 1, big: 'x'.repeat(200), a: 1, b: 2 });
    const s = watch('reorder');
    await opened(s);
    await c.updateOne({ _id: 1 }, [{ $replaceWith: { _id: '$_id', big: '$big', b: '$b', a: '$a' } }]);
    const ev = await next(s);
    expect(ev.operationType).toBe('update');
    expect(ev.updateDescription).toEqual({ updatedFields: { a: 1 }, removedFields: [], truncatedArrays: [] });
  });

  test('rename onto a watched collection with dropTarget: the target stream sees rename then invalidate', async () => {
    await db.createCollection('rt_src');
    await db.createCollection('rt_dst');
    const s = watch('rt_dst', { showExpandedEvents: true });
    await opened(s);
    await client.db('admin').command({ renameCollection: `${dbName}.rt_src`, to: `${dbName}.rt_dst`, dropTarget: true });
    const ev = await next(s);
    expect(ev.operationType).toBe('rename');
    expect(ev.ns).toEqual({ db: dbName, coll: 'rt_src' });
    expect(ev.to).toEqual({ db: dbName, coll: 'rt_dst' });
    expect(Object.keys(ev.operationDescription)).toEqual(['to', 'dropTarget']);
    const inv = await next(s);
    expect(inv.operationType).toBe('invalidate');
  });
});
