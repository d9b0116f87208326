/**
 * An upsert whose query seeds no `_id` may give the inserted document its `_id` with `$setOnInsert`
 * (or `$set`); one whose query seeds an `_id` may not change it.
 *
 * Sources (MongoDB server, mongodb/mongo):
 *  - src/mongo/db/exec/upsert_stage.cpp, UpsertStage::_produceNewDocumentForInsert: `_id` is an
 *    immutable path; the query's equality fields seed the document, the update runs over it
 *    (isInsert), then _ensureIdFieldIsFirst puts `_id` first (generating one if absent).
 *  - src/mongo/db/update/modifier_node.cpp, ModifierNode::applyToNonexistentElement: a created path
 *    fails with ImmutableField only when the immutable path is a prefix of the path already taken
 *    ("adding '_id.x' will illegally modify '_id'"), so creating an absent `_id` is allowed;
 *    applyToExistingElement / checkImmutablePathsNotModifiedFromOriginal: changing an existing
 *    `_id` is ImmutableField (66).
 *  - jstests/core/upsert_and.js: `update({$and: [{c: 1}, {d: 1}]}, {$setOnInsert: {_id: 1}}, true)`
 *    is writeOK and inserts `{_id: 1, c: 1, d: 1}`; with `{c: 2, $and: [{c: 1}, {d: 1}]}` it fails.
 *  - jstests/core/write/update/update_setOnInsert.js (SERVER-9958, "Allow _id $setOnInsert during
 *    insert"): with the query seeding `_id` (`{_id: 1}`, `{'_id.a': 4}`), `$setOnInsert` of
 *    `'_id.a'`, `'_id.b'` or a different whole `_id` is a write error.
 */
import type { Db, MongoClient } from 'mongodb';
import { MongoServerError } from 'mongodb';
import { openClient, uniqueDbName } from './support/server';

/** Documents whose _id is any BSON value (the driver's default Document types it as an ObjectId). */
type AnyId = { _id?: any; [key: string]: any }; // eslint-disable-line @typescript-eslint/no-explicit-any

const dbName = uniqueDbName('conf_upsert_id');
let client: MongoClient;
let db: Db;

beforeAll(async () => {
  client = await openClient();
  db = client.db(dbName);
});

afterAll(async () => {
  await db.dropDatabase();
  await client.close();
});

describe('an upsert whose query seeds no _id', () => {
  test('$setOnInsert: { _id } gives the inserted document that _id, first (upsert_and.js)', async () => {
    const coll = db.collection<AnyId>('and_seed');
    const res = await coll.updateOne({ $and: [{ c: 1 }, { d: 1 }] }, { $setOnInsert: { _id: 1 } }, { upsert: true });
    expect(res.upsertedId).toBe(1);
    const docs = await coll.find().toArray();
    expect(docs).toEqual([{ _id: 1, c: 1, d: 1 }]);
    expect(Object.keys(docs[0])).toEqual(['_id', 'c', 'd']);
  });

  test('$setOnInsert: { _id } next to other operators; the next upsert matches and leaves _id alone', async () => {
    const coll = db.collection<AnyId>('with_set');
    await coll.updateOne({ name: 'n' }, { $set: { v: 1 }, $setOnInsert: { _id: 'chosen' } }, { upsert: true });
    // The document now exists: $setOnInsert is skipped, so its different _id is not a change.
    const again = await coll.updateOne({ name: 'n' }, { $set: { v: 2 }, $setOnInsert: { _id: 'other' } }, { upsert: true });
    expect(again.matchedCount).toBe(1);
    expect(again.upsertedCount).toBe(0);
    expect(await coll.find().toArray()).toEqual([{ _id: 'chosen', name: 'n', v: 2 }]);
  });

  test('through findAndModify (findOneAndUpdate with upsert, returning the new document)', async () => {
    const coll = db.collection<AnyId>('fam');
    const doc = await coll.findOneAndUpdate({ k: 'x' }, { $setOnInsert: { _id: 42 }, $inc: { n: 1 } }, { upsert: true, returnDocument: 'after' });
    expect(doc).toEqual({ _id: 42, k: 'x', n: 1 });
  });

  test("two equalities on one path: NotSingleValueField (54), \"path 'c' is matched twice\" (upsert_and.js, last case; path_support.cpp checkEqualityConflicts)", async () => {
    const coll = db.collection<AnyId>('contradiction');
    const error = await coll.updateOne({ c: 2, $and: [{ c: 1 }, { d: 1 }] }, { $setOnInsert: { _id: 1 } }, { upsert: true }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(MongoServerError);
    expect((error as MongoServerError).code).toBe(54);
    expect((error as MongoServerError).message).toBe("cannot infer query fields to set, path 'c' is matched twice");
    expect(await coll.countDocuments()).toBe(0);
  });
});

describe('an upsert whose query seeds the _id (update_setOnInsert.js)', () => {
  test('{_id: 1} with $setOnInsert of _id.a: a write error, nothing inserted', async () => {
    // mongod: the walk meets the scalar _id before the immutable check, so PathNotViable (28)
    // (UpdateLeafNode::checkViability); the emulator has not sourced that message and refuses the
    // update as NotImplemented (238). Either way the update fails and inserts nothing.
    const coll = db.collection<AnyId>('seeded_scalar');
    const error = await coll.updateOne({ _id: 1 }, { $setOnInsert: { '_id.a': new Date() } }, { upsert: true }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(MongoServerError);
    expect([28, 238]).toContain((error as MongoServerError).code);
    expect(await coll.countDocuments()).toBe(0);
  });

  test.each([
    ["{'_id.a': 4} with $setOnInsert of _id.b", { '_id.a': 4 }, { $setOnInsert: { '_id.b': 1 } }],
    ["{'_id.a': 4} with $setOnInsert of a different whole _id", { '_id.a': 4 }, { $setOnInsert: { _id: { a: 4, b: 1 } } }],
    ['{_id: 10} with $setOnInsert of _id 11', { _id: 10 }, { $setOnInsert: { _id: 11 } }],
  ])('%s: ImmutableField (66), nothing inserted', async (label, q, u) => {
    const coll = db.collection<AnyId>(`seeded_${label.replace(/\W+/g, '_')}`);
    const error = await coll.updateOne(q, u, { upsert: true }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(MongoServerError);
    expect((error as MongoServerError).code).toBe(66);
    expect(await coll.countDocuments()).toBe(0);
  });

  test('$setOnInsert of the same _id the query seeds is no change (checkImmutablePathsNotModifiedFromOriginal compares values)', async () => {
    const coll = db.collection<AnyId>('same_id');
    const res = await coll.updateOne({ _id: 9 }, { $setOnInsert: { _id: 9 } }, { upsert: true });
    expect(res.upsertedId).toBe(9);
    expect(await coll.find().toArray()).toEqual([{ _id: 9 }]);
  });
});
