/**
 * Read-only views: `create` with viewOn + pipeline, reads through the view (find, aggregate, count,
 * distinct), the commands a view refuses, listCollections, drop, collMod of viewOn/pipeline, views
 * on views, cycles.
 *
 * Sources (mongodb/mongo unless noted):
 *  - jstests/core/views/views_all_commands.js: insert, update, delete, findAndModify,
 *    createIndexes, listIndexes, dropIndexes on a view fail with CommandNotSupportedOnView (166);
 *    aggregate, count, distinct, drop and collMod {viewOn, pipeline} work; cursors name the view.
 *  - "Namespace <ns> is a view, not a collection": AutoGetCollection (db_raii.cpp), reached by the
 *    write path (write_ops_exec.cpp: one write error per statement), createIndexes, listIndexes
 *    and change streams (run_aggregate.cpp); "Cannot drop indexes on view <ns>": drop_indexes.cpp.
 *  - create_command.cpp CmdCreate::typedRun / checkCollectionOptions: creating the same view again
 *    succeeds; a different viewOn is NamespaceExists "namespace <ns> already exists, but is a view
 *    on <ns> rather than <ns>"; a collection of that name is NamespaceExists.
 *  - src/mongo/db/views/view_graph.cpp ViewGraph::_validateChildren: GraphContainsCycle (5) "View
 *    cycle detected: ...".
 *  - list_collections.cpp buildViewBson: {name, type: 'view', options: {viewOn, pipeline}, info:
 *    {readOnly: true}}; drop_collection.cpp _dropView.
 *  - crud spec test estimatedDocumentCount.json "estimatedDocumentCount works correctly on views"
 *    (the driver sends `count`).
 */
import type { Db, Document, MongoClient } from 'mongodb';
import { describeIf, expectServerError, openClient, testTopology, uniqueDbName, type Loose } from './support/server';

const dbName = uniqueDbName('conf_views');
let client: MongoClient;
let db: Db;

beforeAll(async () => {
  client = await openClient();
  db = client.db(dbName);
  await db.collection<Loose>('src').insertMany([
    { _id: 1, x: 1, tags: ['a', 'b'] },
    { _id: 2, x: 2, tags: ['b'] },
    { _id: 3, x: 3, tags: ['c'] },
    { _id: 4, x: 4, tags: [] },
  ]);
  await db.command({ create: 'big', viewOn: 'src', pipeline: [{ $match: { x: { $gt: 1 } } }] });
});

afterAll(async () => {
  await db.dropDatabase();
  await client.close();
});

const notCollection = (name: string): string => `Namespace ${dbName}.${name} is a view, not a collection`;

test('find through a view: the view pipeline, then filter, sort, skip, limit and projection', async () => {
  const docs = await db.collection('big').find({ x: { $lt: 4 } }, { projection: { x: 1 } }).sort({ x: -1 }).toArray();
  expect(docs).toEqual([{ _id: 3, x: 3 }, { _id: 2, x: 2 }]);
  const window = await db.collection('big').find({}).sort({ x: 1 }).skip(1).limit(1).toArray();
  expect(window).toEqual([{ _id: 3, x: 3, tags: ['c'] }]);
});

test('a find cursor on a view names the view and continues with getMore', async () => {
  const res = await db.command({ find: 'big', filter: {}, sort: { x: 1 }, batchSize: 2 });
  expect(res.cursor.ns).toBe(`${dbName}.big`);
  expect(res.cursor.firstBatch.map((d: Document) => d._id)).toEqual([2, 3]);
  const more = await db.command({ getMore: res.cursor.id, collection: 'big' });
  expect(more.cursor.ns).toBe(`${dbName}.big`);
  expect(more.cursor.nextBatch.map((d: Document) => d._id)).toEqual([4]);
});

test('aggregate, count (estimatedDocumentCount) and distinct read the view', async () => {
  const agg = await db.collection('big').aggregate([{ $group: { _id: null, s: { $sum: '$x' } } }]).toArray();
  expect(agg).toEqual([{ _id: null, s: 9 }]);
  expect(await db.collection('big').estimatedDocumentCount()).toBe(3);
  expect((await db.command({ count: 'big', query: { x: { $gte: 3 } } })).n).toBe(2);
  expect((await db.collection('big').distinct('tags')).sort()).toEqual(['b', 'c']);
});

test('a view on a view resolves both pipelines, innermost first', async () => {
  await db.command({ create: 'bigger', viewOn: 'big', pipeline: [{ $match: { x: { $gt: 2 } } }, { $project: { x: 1 } }] });
  expect(await db.collection('bigger').find().sort({ _id: 1 }).toArray()).toEqual([{ _id: 3, x: 3 }, { _id: 4, x: 4 }]);
  await db.command({ drop: 'bigger' });
});

test('writes and index commands on a view answer CommandNotSupportedOnView', async () => {
  const ins = await db.command({ insert: 'big', documents: [{ _id: 10 }, { _id: 11 }], ordered: false });
  expect(ins.n).toBe(0);
  expect(ins.writeErrors.map((e: Document) => [e.index, e.code, e.errmsg])).toEqual([
    [0, 166, notCollection('big')],
    [1, 166, notCollection('big')],
  ]);
  const upd = await db.command({ update: 'big', updates: [{ q: {}, u: { $set: { y: 1 } } }] });
  expect(upd.writeErrors[0]).toMatchObject({ index: 0, code: 166, errmsg: notCollection('big') });
  const del = await db.command({ delete: 'big', deletes: [{ q: {}, limit: 0 }] });
  expect(del.writeErrors[0]).toMatchObject({ index: 0, code: 166, errmsg: notCollection('big') });
  const fam = await expectServerError(db.command({ findAndModify: 'big', query: {}, update: { $set: { y: 1 } } }), 166);
  expect(fam.message).toBe(notCollection('big'));
  const ci = await expectServerError(db.command({ createIndexes: 'big', indexes: [{ key: { x: 1 }, name: 'x_1' }] }), 166);
  expect(ci.message).toBe(notCollection('big'));
  const li = await expectServerError(db.command({ listIndexes: 'big' }), 166);
  expect(li.message).toBe(notCollection('big'));
  const di = await expectServerError(db.command({ dropIndexes: 'big', index: '*' }), 166);
  expect(di.message).toBe(`Cannot drop indexes on view ${dbName}.big`);
  expect(di.codeName).toBe('CommandNotSupportedOnView');
  // Nothing was written and no collection appeared under the view's name.
  expect(await db.collection('src').countDocuments()).toBe(4);
});

test('listCollections reports the view with its definition', async () => {
  const infos = await db.listCollections({ name: 'big' }).toArray();
  expect(infos).toEqual([{ name: 'big', type: 'view', options: { viewOn: 'src', pipeline: [{ $match: { x: { $gt: 1 } } }] }, info: { readOnly: true } }]);
  const names = (await db.listCollections({}, { nameOnly: true }).toArray()).map((i) => `${i.name}:${i.type}`).sort();
  expect(names).toEqual(['big:view', 'src:collection', 'system.views:collection']);
});

test('create: the same view again is accepted, a different one or a collection of that name is NamespaceExists', async () => {
  await db.command({ create: 'big', viewOn: 'src', pipeline: [{ $match: { x: { $gt: 1 } } }] });
  const other = await expectServerError(db.command({ create: 'big', viewOn: 'other', pipeline: [] }), 48);
  expect(other.message).toBe(`namespace ${dbName}.big already exists, but is a view on ${dbName}.src rather than ${dbName}.other`);
  const onColl = await expectServerError(db.command({ create: 'src', viewOn: 'big', pipeline: [] }), 48);
  expect(onColl.message).toMatch(new RegExp(`^namespace ${dbName}\\.src already exists, but with different options: \\{ uuid: UUID\\("[0-9a-f-]{36}"\\) \\}$`));
  const noViewOn = await expectServerError(db.command({ create: 'v2', pipeline: [] }), 72);
  expect(noViewOn.message).toBe("'pipeline' requires 'viewOn' to also be specified");
});

test('cycles are refused with GraphContainsCycle', async () => {
  await db.command({ create: 'ca', viewOn: 'src', pipeline: [] });
  await db.command({ create: 'cb', viewOn: 'ca', pipeline: [] });
  const err = await expectServerError(db.command({ collMod: 'ca', viewOn: 'cb', pipeline: [] }), 5);
  expect(err.codeName).toBe('GraphContainsCycle');
  expect(err.message).toBe(`View cycle detected: ${dbName}.ca => ${dbName}.ca => ${dbName}.cb => ${dbName}.ca`);
  // The failed collMod changed nothing.
  expect(await db.collection('ca').countDocuments()).toBe(4);
  await db.command({ drop: 'cb' });
  await db.command({ drop: 'ca' });
});

test('collMod changes viewOn and pipeline; drop removes the view', async () => {
  await db.command({ create: 'm', viewOn: 'src', pipeline: [] });
  expect(await db.collection('m').countDocuments()).toBe(4);
  expect(await db.command({ collMod: 'm', viewOn: 'src', pipeline: [{ $match: { x: 4 } }] })).toMatchObject({ ok: 1 });
  expect(await db.collection('m').find().toArray()).toEqual([{ _id: 4, x: 4, tags: [] }]);
  expect(await db.command({ drop: 'm' })).toMatchObject({ ns: `${dbName}.m`, ok: 1 });
  expect(await db.listCollections({ name: 'm' }).toArray()).toEqual([]);
});

test('features a view does not support here are refused loudly', async () => {
  await expectServerError(db.command({ create: 'wc', viewOn: 'src', pipeline: [], collation: { locale: 'fr' } }), 238);
  await expectServerError(db.command({ create: 'wo', viewOn: 'src', pipeline: [{ $out: 'x' }] }), 238);
  await expectServerError(db.command({ find: 'big', filter: {}, hint: { _id: 1 } }), 238);
  await expectServerError(db.command({ explain: { find: 'big', filter: {} } }), 238);
});

describeIf(testTopology() === 'replset', 'change streams need a replica set')('change streams', () => {
  test('a change stream on a view is refused as mongod refuses it', async () => {
    const err = await expectServerError(db.command({ aggregate: 'big', pipeline: [{ $changeStream: {} }], cursor: {} }), 166);
    expect(err.message).toBe(notCollection('big'));
  });
});
