/**
 * The emulator's R22 rule (writes.ts `takeCreatedId`, `upsertSeed`): "an upsert whose
 * query seeds no `_id` may create it". Whether the query seeds an `_id` is decided by mongod on the
 * CANONICALIZED query (UpdateDriver::populateDocumentWithQueryFields, src/mongo/db/update/
 * update_driver.cpp: "We canonicalize the query to collapse $and/$or"), and jstests/core/
 * upsert_fields.js lists what that extracts: `{_id: {$in: [1]}}`, `{_id: {$all: [1]}}` and
 * `{$or: [{_id: 1}]}` all give the inserted document `_id: 1`. So on those queries a `$setOnInsert`
 * of a different `_id` changes a seeded immutable `_id` (ImmutableField 66), where the emulator,
 * seeing no `$eq`, lets it create the `_id`.
 *
 * Also `$rename` to `_id`: UpdateObjectNode::parseAndMerge places a RenameNode at the "to" path
 * (and a ConflictPlaceholderNode at the "from" path), so another operator on `_id` conflicts
 * (ConflictingUpdateOperators 40, "Updating the path '_id' would create a conflict at '_id'"), and
 * RenameNode::apply is a no-op when the source does not exist ("The element we want to rename
 * does not exist. When that happens, we treat the operation as a no-op."), so an upsert inserting
 * a document without the source field succeeds.
 *
 * Each test accepts mongod's answer or NotImplemented (238).
 */
import type { Db, MongoClient } from 'mongodb';
import { MongoServerError } from 'mongodb';
import { openClient, uniqueDbName } from './support/server';

type AnyId = { _id?: any; [key: string]: any }; // eslint-disable-line @typescript-eslint/no-explicit-any

const dbName = uniqueDbName('conf_attack7');
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

async function codeOf(p: Promise<unknown>): Promise<number | 'ok'> {
  try {
    await p;
    return 'ok';
  } catch (e) {
    if (e instanceof MongoServerError) return e.code as number;
    throw e;
  }
}

describe('a query that seeds _id only after canonicalization (upsert_fields.js)', () => {
  test.each([
    ['{_id: {$in: [1]}}', { _id: { $in: [1] } }],
    ['{_id: {$all: [1]}}', { _id: { $all: [1] } }],
    ['{$or: [{_id: 1}]}', { $or: [{ _id: 1 }] }],
  ])('%s with $setOnInsert: {_id: 2}: ImmutableField 66 (the seeded _id 1 would change), nothing inserted', async (label, q) => {
    const coll = db.collection<AnyId>(`canon_${label.replace(/\W+/g, '_')}`);
    const code = await codeOf(coll.updateOne(q as AnyId, { $setOnInsert: { _id: 2 } }, { upsert: true }));
    const docs = await coll.find().toArray();
    expect({ code: code === 238 ? 66 : code, inserted: code === 238 ? [] : docs }).toEqual({ code: 66, inserted: [] });
  });
});

describe('$rename to _id on an upsert', () => {
  test('the source absent from the inserted document: the rename is a no-op and the upsert inserts', async () => {
    const coll = db.collection<AnyId>('rename_noop');
    const code = await codeOf(coll.updateOne({ k: 1 }, { $rename: { old: '_id' }, $set: { n: 1 } }, { upsert: true }));
    if (code === 238) return;
    expect({ code, docs: (await coll.find().toArray()).map(({ _id, ...rest }) => rest) }).toEqual({ code: 'ok', docs: [{ k: 1, n: 1 }] });
  });

  test('with $setOnInsert of _id: ConflictingUpdateOperators 40, nothing inserted', async () => {
    const coll = db.collection<AnyId>('rename_conflict');
    const code = await codeOf(coll.updateOne({ k: 1 }, { $rename: { old: '_id' }, $setOnInsert: { _id: 5 } }, { upsert: true }));
    expect({ code: code === 238 ? 40 : code, count: code === 238 ? 0 : await coll.countDocuments() }).toEqual({ code: 40, count: 0 });
  });

  test('$rename {a: "b"} with $set of b: ConflictingUpdateOperators 40 (the rename target is an update path)', async () => {
    const coll = db.collection<AnyId>('rename_conflict_b');
    const code = await codeOf(coll.updateOne({ k: 1 }, { $rename: { a: 'b' }, $set: { b: 1 } }, { upsert: true }));
    expect({ code: code === 238 ? 40 : code, count: code === 238 ? 0 : await coll.countDocuments() }).toEqual({ code: 40, count: 0 });
  });
});

describe('checkEqualityConflicts after canonicalization', () => {
  test('{x: 2, $or: [{x: 1}]}: the single-child $or is an equality on x, matched twice: NotSingleValueField 54', async () => {
    const coll = db.collection<AnyId>('or_conflict');
    const code = await codeOf(coll.updateOne({ x: 2, $or: [{ x: 1 }] }, { $set: { n: 1 } }, { upsert: true }));
    expect({ code: code === 238 ? 54 : code, count: code === 238 ? 0 : await coll.countDocuments() }).toEqual({ code: 54, count: 0 });
  });
});
