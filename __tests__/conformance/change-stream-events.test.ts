/**
 * renameCollection, the expanded change events (showExpandedEvents), pre- and post-images
 * (changeStreamPreAndPostImages) and updateDescription's truncatedArrays / disambiguatedPaths.
 *
 * Sources:
 * - renameCollection: src/mongo/db/commands/rename_collection_cmd.cpp (RenameCollectionCommand::typedRun:
 *   "Can't rename a collection to itself", IllegalOperation), src/mongo/db/catalog/rename_collection.cpp
 *   (checkSourceAndTargetNamespaces: "Database <db> does not exist or is drop pending" and
 *   "Source collection <ns> does not exist", NamespaceNotFound; "target namespace exists",
 *   NamespaceExists), service_entry_point_common.cpp ("<cmd> may only be run against the admin
 *   database.", Unauthorized); manual "renameCollection" (indexes and documents kept).
 * - events: src/mongo/db/pipeline/change_stream_event_transform.cpp (rename's top-level `to` and
 *   operationDescription { to, dropTarget }; create's operationDescription = options + idIndex;
 *   createIndexes / dropIndexes { indexes: [...] }; modify's stateBeforeChange; collectionUUID with
 *   showExpandedEvents), src/mongo/db/op_observer/op_observer_impl.cpp (the oplog entries),
 *   change_stream_filter_helpers.cpp (a collection stream is invalidated by a rename from or to it);
 *   change streams spec tests change-streams.json ("Test rename and invalidate event types") and
 *   change-streams-showExpandedEvents.json.
 * - images: document_source_change_stream_add_pre_image.cpp / add_post_image.cpp (NoMatchingDocument
 *   and its message for 'required'; null for 'whenAvailable'), jstests/noPassthrough/
 *   change_stream_pre_and_post_images_options.js (the option is listed only while enabled);
 *   change streams spec test change-streams-pre_and_post_images.json.
 * - updateDescription: src/mongo/db/update/pipeline_executor.cpp + document_diff_calculator.cpp
 *   (a pipeline update's diff: array resize = truncatedArrays; a diff not smaller than the document is
 *   logged as a replacement), change_stream_document_diff_parser.cpp (disambiguatedPaths); manual
 *   "Change Events: update" and the Node driver's UpdateDescription docs ("truncatedArrays ... record
 *   array truncations performed with pipeline-based updates").
 * - the diff-or-replacement decision is exact: computeDocDiff keeps a diff only when
 *   `postObjSize > diffNode->getObjSize()` (document_diff_calculator.cpp, same at the 7.0-era commit
 *   6805bd38 and on master), the root diff padded by kSizeOfDeltaOplogEntryMetadata (15,
 *   update_oplog_entry_serialization.h; pipeline_executor.cpp), sizes per ApproxBSONSizeTracker
 *   (document_diff_serialization.h/.cpp: 5 for an empty diff, field name + 2 + value size per entry,
 *   8 per section).
 * - transactions: change_stream_filter_helpers.cpp (buildTransactionFilter: "All events in a
 *   transaction share the same clusterTime, lsid, and txNumber values"); their tokens differ by
 *   txnOpIndex (resume_token.cpp ResumeTokenData) and a stream resumes after any of them.
 * - modifier updates: push_node.cpp (PushNode::insertElementsWithPosition / performPush /
 *   logUpdate: only appended elements are logged, as `<path>.<index>`, when a push appends to a
 *   non-empty array with no $sort, no trimming $slice and no $position <= size; otherwise the whole
 *   array), modifier_node.cpp (ModifierNode::logUpdate: the whole new value, used by $pull, $pullAll,
 *   $pop, $bit). Refused (NotImplemented 238): $addToSet adding to an existing array (its logUpdate
 *   differs between releases), positional paths and $rename.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { MongoClient, type ChangeStream, type Collection, type Db, type Document } from 'mongodb';
import { startRestartableBackend } from '../../test-backend/test-env';
import { adminCommand, deploymentFacts, describeIf, expectServerError, openClient, testBackendKind, uniqueDbName, type Loose } from './support/server';

const dbName = uniqueDbName('conf_cs_events');
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

async function fresh(name: string, docs: Loose[] = [], options: Document = {}): Promise<Collection<Loose>> {
  await db.collection(name).drop().catch(() => undefined);
  const coll = await db.createCollection<Loose>(name, options);
  if (docs.length) await coll.insertMany(docs);
  return coll;
}

function rename(from: string, to: string, extra: Document = {}): Promise<Document> {
  return adminCommand(client, { renameCollection: `${dbName}.${from}`, to: `${dbName}.${to}`, ...extra });
}

describe('renameCollection', () => {
  test('moves the documents and indexes; the source is gone', async () => {
    const coll = await fresh('rn_src', [{ _id: 1, a: 1 }, { _id: 2, a: 2 }]);
    await coll.createIndex({ a: 1 }, { unique: true, name: 'a_unique' });
    await db.collection('rn_dst').drop().catch(() => undefined);
    expect(await rename('rn_src', 'rn_dst')).toMatchObject({ ok: 1 });
    const names = (await db.listCollections({}, { nameOnly: true }).toArray()).map((c) => c.name);
    expect(names).toContain('rn_dst');
    expect(names).not.toContain('rn_src');
    const dst = db.collection<Loose>('rn_dst');
    expect(await dst.find().sort({ _id: 1 }).toArray()).toEqual([{ _id: 1, a: 1 }, { _id: 2, a: 2 }]);
    expect((await dst.listIndexes().toArray()).map((i) => i.name)).toEqual(['_id_', 'a_unique']);
    await expectServerError(dst.insertOne({ _id: 3, a: 1 }), 11000);
  });

  test("errors: missing source or database, existing target, to itself, outside admin", async () => {
    await fresh('rn_a', [{ _id: 1 }]);
    await fresh('rn_b', [{ _id: 1 }]);
    expect((await expectServerError(rename('rn_missing', 'rn_x'), 26)).message).toBe(`Source collection ${dbName}.rn_missing does not exist`);
    expect((await expectServerError(adminCommand(client, { renameCollection: 'conf_cs_no_such_db.x', to: 'conf_cs_no_such_db.y' }), 26)).message).toBe(
      'Database conf_cs_no_such_db does not exist or is drop pending',
    );
    expect((await expectServerError(rename('rn_a', 'rn_b'), 48)).message).toBe('target namespace exists');
    expect((await expectServerError(rename('rn_a', 'rn_a'), 20)).message).toBe("Can't rename a collection to itself");
    const notAdmin = await expectServerError(db.command({ renameCollection: `${dbName}.rn_a`, to: `${dbName}.rn_c` }), 13);
    expect(notAdmin.message).toBe('renameCollection may only be run against the admin database.');
  });

  test('dropTarget replaces an existing target', async () => {
    await fresh('rn_c', [{ _id: 'from-c' }]);
    await fresh('rn_d', [{ _id: 'from-d' }]);
    await rename('rn_c', 'rn_d', { dropTarget: true });
    expect(await db.collection('rn_d').find().toArray()).toEqual([{ _id: 'from-c' }]);
  });
});

const restartable = testBackendKind() !== 'uri';
describeIf(restartable, 'the deployment behind MONGODB_URI cannot be restarted')('renameCollection and persistence', () => {
  test('a rename survives a restart on the same data directory', async () => {
    const dbpath = mkdtempSync(join(tmpdir(), 'mpl-conf-rename-'));
    try {
      for (const step of ['write', 'read'] as const) {
        const server = await startRestartableBackend(dbpath);
        if ('unsupported' in server) throw new Error(server.unsupported);
        const c = new MongoClient(server.uri, { serverSelectionTimeoutMS: 10_000 });
        try {
          await c.connect();
          const d = c.db('mpl_conf_rename');
          if (step === 'write') {
            await d.collection<Loose>('old').insertOne({ _id: 1 });
            await d.collection('old').createIndex({ k: 1 }, { name: 'k_1' });
            await c.db('admin').command({ renameCollection: 'mpl_conf_rename.old', to: 'mpl_conf_rename.new' });
          } else {
            expect((await d.listCollections({}, { nameOnly: true }).toArray()).map((x) => x.name)).toEqual(['new']);
            expect(await d.collection('new').find().toArray()).toEqual([{ _id: 1 }]);
            expect((await d.collection('new').listIndexes().toArray()).map((i) => i.name)).toEqual(['_id_', 'k_1']);
          }
        } finally {
          await c.close();
          await server.stop();
        }
      }
    } finally {
      rmSync(dbpath, { recursive: true, force: true });
    }
  });
});

/** Opens a stream and sends its aggregate, so that it sees every write made after this returns. */
async function watch(target: Collection<Loose> | Db, options: Document = {}, pipeline: Document[] = []): Promise<ChangeStream<Loose, Document>> {
  const stream = target.watch<Loose, Document>(pipeline, { maxAwaitTimeMS: 200, ...options });
  streams.push(stream as unknown as ChangeStream);
  expect(await stream.tryNext()).toBeNull();
  return stream;
}

async function next(stream: ChangeStream<Loose, Document>, timeoutMs = 5000): Promise<Document> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    const event = await stream.tryNext();
    if (event) return event;
  }
  throw new Error(`no change event within ${timeoutMs} ms`);
}

async function uuidOf(name: string): Promise<unknown> {
  const [info] = await db.listCollections({ name }).toArray();
  return (info as Document).info.uuid;
}

const facts = deploymentFacts();
describeIf(facts.setName !== undefined, 'change streams need a replica set; this deployment is a standalone')('change events', () => {
  test('a collection stream reports its rename (with `to`) and is invalidated', async () => {
    const coll = await fresh('ev_ren');
    const stream = await watch(coll);
    await rename('ev_ren', 'ev_ren2');
    const ev = await next(stream);
    expect(ev).toMatchObject({ operationType: 'rename', ns: { db: dbName, coll: 'ev_ren' }, to: { db: dbName, coll: 'ev_ren2' } });
    expect(ev.operationDescription).toBeUndefined();
    expect((await next(stream)).operationType).toBe('invalidate');
  });

  test("the target's stream sees a rename with dropTarget onto it, then invalidate", async () => {
    await fresh('ev_src', [{ _id: 1 }]);
    const target = await fresh('ev_tgt');
    const stream = await watch(target);
    await rename('ev_src', 'ev_tgt', { dropTarget: true });
    expect(await next(stream)).toMatchObject({ operationType: 'rename', ns: { coll: 'ev_src' }, to: { coll: 'ev_tgt' } });
    expect((await next(stream)).operationType).toBe('invalidate');
  });

  test('showExpandedEvents: create, createIndexes, dropIndexes, modify and rename with operationDescription and collectionUUID', async () => {
    await db.collection('ex_a').drop().catch(() => undefined);
    await db.collection('ex_b').drop().catch(() => undefined);
    const stream = await watch(db, { showExpandedEvents: true });
    const coll = await db.createCollection<Loose>('ex_a');
    const uuid = await uuidOf('ex_a');
    await coll.createIndex({ x: 1 }, { name: 'x_1' });
    await coll.insertOne({ _id: 1, x: 1 });
    await coll.dropIndex('x_1');
    await db.command({ collMod: 'ex_a', changeStreamPreAndPostImages: { enabled: true } });
    await db.createCollection('ex_b');
    const uuidB = await uuidOf('ex_b');
    await rename('ex_a', 'ex_b', { dropTarget: true });

    const create = await next(stream);
    expect(create).toMatchObject({ operationType: 'create', ns: { db: dbName, coll: 'ex_a' }, operationDescription: { idIndex: { v: 2, key: { _id: 1 }, name: '_id_' } } });
    expect(create.collectionUUID).toEqual(uuid);
    const created = await next(stream);
    expect(created).toMatchObject({ operationType: 'createIndexes', operationDescription: { indexes: [{ v: 2, key: { x: 1 }, name: 'x_1' }] } });
    expect(created.collectionUUID).toEqual(uuid);
    const insert = await next(stream);
    expect(insert).toMatchObject({ operationType: 'insert', documentKey: { _id: 1 } });
    expect(insert.collectionUUID).toEqual(uuid);
    expect(await next(stream)).toMatchObject({ operationType: 'dropIndexes', operationDescription: { indexes: [{ v: 2, key: { x: 1 }, name: 'x_1' }] } });
    const modify = await next(stream);
    expect(modify).toMatchObject({ operationType: 'modify', operationDescription: { changeStreamPreAndPostImages: { enabled: true } } });
    expect(modify.stateBeforeChange).toEqual({ collectionOptions: { uuid } });
    expect((await next(stream)).operationType).toBe('create');
    const ren = await next(stream);
    expect(ren).toMatchObject({ operationType: 'rename', ns: { coll: 'ex_a' }, to: { coll: 'ex_b' }, operationDescription: { to: { db: dbName, coll: 'ex_b' } } });
    expect(ren.operationDescription.dropTarget).toEqual(uuidB);
    expect(ren.collectionUUID).toEqual(uuid);
  });

  test('without showExpandedEvents, DDL events are not reported and events carry no collectionUUID', async () => {
    await db.collection('ex_c').drop().catch(() => undefined);
    const stream = await watch(db);
    const coll = await db.createCollection<Loose>('ex_c');
    await coll.createIndex({ y: 1 });
    await coll.insertOne({ _id: 1 });
    const ev = await next(stream);
    expect(ev.operationType).toBe('insert');
    expect(ev.collectionUUID).toBeUndefined();
  });

  test('changeStreamPreAndPostImages: listed while enabled; pre- and post-images on update, replace and delete', async () => {
    const coll = await fresh('img_on', [{ _id: 1, n: 1 }], { changeStreamPreAndPostImages: { enabled: true } });
    const [info] = await db.listCollections({ name: 'img_on' }).toArray();
    expect((info as Document).options).toEqual({ changeStreamPreAndPostImages: { enabled: true } });
    const stream = await watch(coll, { fullDocument: 'required', fullDocumentBeforeChange: 'whenAvailable' });
    await coll.updateOne({ _id: 1 }, { $set: { n: 2 } });
    await coll.replaceOne({ _id: 1 }, { n: 3 });
    await coll.deleteOne({ _id: 1 });
    expect(await next(stream)).toMatchObject({ operationType: 'update', fullDocument: { _id: 1, n: 2 }, fullDocumentBeforeChange: { _id: 1, n: 1 } });
    expect(await next(stream)).toMatchObject({ operationType: 'replace', fullDocument: { _id: 1, n: 3 }, fullDocumentBeforeChange: { _id: 1, n: 2 } });
    expect(await next(stream)).toMatchObject({ operationType: 'delete', fullDocumentBeforeChange: { _id: 1, n: 3 } });
    await db.command({ collMod: 'img_on', changeStreamPreAndPostImages: { enabled: false } });
    const [after] = await db.listCollections({ name: 'img_on' }).toArray();
    expect((after as Document).options).toEqual({});
  });

  test("without pre-images: whenAvailable gives null, required fails NoMatchingDocument", async () => {
    const coll = await fresh('img_off', [{ _id: 1 }]);
    const lenient = await watch(coll, { fullDocument: 'whenAvailable', fullDocumentBeforeChange: 'whenAvailable' });
    const strict = await watch(coll, { fullDocumentBeforeChange: 'required' });
    await coll.updateOne({ _id: 1 }, { $set: { x: 1 } });
    expect(await next(lenient)).toMatchObject({ operationType: 'update', fullDocument: null, fullDocumentBeforeChange: null });
    const err = await expectServerError(next(strict), 47);
    expect(err.message).toMatch(
      new RegExp(`^Change stream was configured to require a pre-image for all update, delete and replace events, but the pre-image was not found for event: \\{operationType: "update", ns: \\{db: "${dbName}", coll: "img_off"\\}, clusterTime: Timestamp\\(\\d+, \\d+\\)\\}$`),
    );
  });

  test('updateDescription: a pipeline update that shrinks an array reports truncatedArrays; modifier paths into arrays and numeric field names', async () => {
    const coll = await fresh('ud', [{ _id: 1, a: 1, array: ['foo', { a: 'bar' }, 1, 2, 3] }, { _id: 2, a: [{ 1: 1 }], o: { 1: 1 } }]);
    const stream = await watch(coll, { showExpandedEvents: true });
    await coll.updateOne({ _id: 1 }, [{ $set: { array: ['foo', { a: 'bar' }] } }]);
    await coll.updateOne({ _id: 2 }, { $set: { 'a.0.1': 2, 'o.1': 3 } });
    const shrink = await next(stream);
    expect(shrink.updateDescription).toEqual({ updatedFields: {}, removedFields: [], truncatedArrays: [{ field: 'array', newSize: 2 }], disambiguatedPaths: {} });
    const paths = await next(stream);
    expect(paths.updateDescription).toEqual({
      updatedFields: { 'a.0.1': 2, 'o.1': 3 },
      removedFields: [],
      truncatedArrays: [],
      disambiguatedPaths: { 'a.0.1': ['a', 0, '1'], 'o.1': ['o', '1'] },
    });
  });

  test('a pipeline update whose diff is not smaller than the document is a replace event', async () => {
    const coll = await fresh('ud_rep', [{ _id: 1, a: 1 }]);
    const stream = await watch(coll);
    await coll.updateOne({ _id: 1 }, [{ $replaceWith: { _id: '$_id', b: 2 } }]);
    expect(await next(stream)).toMatchObject({ operationType: 'replace', fullDocument: { _id: 1, b: 2 }, documentKey: { _id: 1 } });
  });

  test('the diff-or-replacement decision is exact at the boundary (computeDocDiff: strictly smaller)', async () => {
    // post = {_id: int32, f: string(F), s: 'b'} is 31 + F bytes; the padded root diff {u: {s: 'b'}}
    // is estimated at 15 + 5 + (1 + 2 + 6) + 8 = 37 bytes: kept only when 37 < 31 + F, i.e. F >= 7.
    const coll = await fresh('ud_edge', [
      { _id: 1, f: 'x'.repeat(6), s: 'a' },
      { _id: 2, f: 'x'.repeat(7), s: 'a' },
    ]);
    const stream = await watch(coll);
    await coll.updateOne({ _id: 1 }, [{ $set: { s: 'b' } }]);
    await coll.updateOne({ _id: 2 }, [{ $set: { s: 'b' } }]);
    expect(await next(stream)).toMatchObject({ operationType: 'replace', documentKey: { _id: 1 }, fullDocument: { _id: 1, f: 'xxxxxx', s: 'b' } });
    const update = await next(stream);
    expect(update).toMatchObject({ operationType: 'update', documentKey: { _id: 2 } });
    expect(update.updateDescription).toEqual({ updatedFields: { s: 'b' }, removedFields: [], truncatedArrays: [] });
  });

  test('the events of one transaction share one clusterTime, carry lsid and txnNumber, and a stream resumes after each', async () => {
    const coll = await fresh('txn_ev', [{ _id: 0 }]);
    const stream = await watch(coll);
    const session = client.startSession();
    try {
      await session.withTransaction(async () => {
        await coll.insertOne({ _id: 1 }, { session });
        await coll.updateOne({ _id: 0 }, { $set: { x: 1 } }, { session });
        await coll.deleteOne({ _id: 1 }, { session });
      });
    } finally {
      await session.endSession();
    }
    await coll.insertOne({ _id: 9 });
    const events = [await next(stream), await next(stream), await next(stream)];
    const after = await next(stream);
    expect(events.map((e) => e.operationType)).toEqual(['insert', 'update', 'delete']);
    for (const e of events) {
      expect(e.clusterTime).toEqual(events[0].clusterTime);
      expect(e.lsid).toBeDefined();
      expect(e.txnNumber).toEqual(events[0].txnNumber);
    }
    expect(after.txnNumber).toBeUndefined();
    expect(after.clusterTime.greaterThan(events[0].clusterTime)).toBe(true);
    const tokens = events.map((e) => (e._id as { _data: string })._data);
    expect(new Set(tokens).size).toBe(3);
    expect([...tokens].sort()).toEqual(tokens);
    // Resuming after each event of the transaction yields exactly the events that follow it.
    for (let i = 0; i < events.length; i++) {
      const s = coll.watch<Loose, Document>([], { resumeAfter: events[i]._id, maxAwaitTimeMS: 200 });
      streams.push(s as unknown as ChangeStream);
      const rest = [...events.slice(i + 1), after];
      for (const want of rest) expect((await next(s))._id).toEqual(want._id);
    }
  });

  test('$push: appended elements are logged as <path>.<index>; otherwise the whole array (push_node.cpp)', async () => {
    const coll = await fresh('push_ev', [{ _id: 1, a: [1, 2], e: [], n: { b: [{ c: [1] }] } }]);
    const stream = await watch(coll);
    const cases: Array<[Document, Document]> = [
      [{ $push: { a: 3 } }, { 'a.2': 3 }],
      [{ $push: { a: { $each: [4, 5] } } }, { 'a.3': 4, 'a.4': 5 }],
      [{ $push: { a: { $each: [6], $position: 99 } } }, { 'a.5': 6 }],
      [{ $push: { a: { $each: [7], $slice: 100 } } }, { 'a.6': 7 }],
      // $position equal to the size is not "past the end": kNormalUpdate, the whole array.
      [{ $push: { a: { $each: [8], $position: 7 } } }, { a: [1, 2, 3, 4, 5, 6, 7, 8] }],
      [{ $push: { a: { $each: [0], $position: 0 } } }, { a: [0, 1, 2, 3, 4, 5, 6, 7, 8] }],
      [{ $push: { a: { $each: [9], $slice: -3 } } }, { a: [7, 8, 9] }],
      [{ $push: { a: { $each: [1], $sort: 1 } } }, { a: [1, 7, 8, 9] }],
      // An empty array: kNormalUpdate.
      [{ $push: { e: 1 } }, { e: [1] }],
      // A new field: the created array.
      [{ $push: { z: 1 } }, { z: [1] }],
      // Through an array index.
      [{ $push: { 'n.b.0.c': 2 } }, { 'n.b.0.c.1': 2 }],
      // ModifierNode::logUpdate: the whole new array.
      [{ $pull: { a: 8 } }, { a: [1, 7, 9] }],
      [{ $pop: { a: 1 } }, { a: [1, 7] }],
      [{ $pullAll: { a: [1] } }, { a: [7] }],
    ];
    for (const [update] of cases) await coll.updateOne({ _id: 1 }, update);
    for (const [update, updatedFields] of cases) {
      const ev = await next(stream);
      expect({ update, description: ev.updateDescription }).toEqual({ update, description: { updatedFields, removedFields: [], truncatedArrays: [] } });
    }
  });

  test('refused loudly: $addToSet adding to an existing array, positional paths, $rename', async () => {
    const coll = await fresh('mod_refused', [{ _id: 1, a: [1], b: [{ x: 1 }], r: 1 }]);
    const updates: Document[] = [{ $addToSet: { a: 2 } }, { $set: { 'b.$[].x': 2 } }, { $rename: { r: 's' } }];
    for (const update of updates) {
      const stream = await watch(coll);
      await coll.updateOne({ _id: 1 }, update);
      const err = await expectServerError(next(stream), 238);
      expect(err.message).toMatch(/updateDescription of a modifier update/);
    }
    // $addToSet creating the field is a plain insert (ModifierNode::logUpdate, kCreated).
    const stream = await watch(coll);
    await coll.updateOne({ _id: 1 }, { $addToSet: { t: 1 } } as Document);
    expect((await next(stream)).updateDescription.updatedFields).toEqual({ t: [1] });
  });
});
