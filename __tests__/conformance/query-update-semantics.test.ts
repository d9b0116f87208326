/**
 * Query, projection and update semantics that Mongoose's own test suite exercises (issue 9 lists
 * each as a wrong answer or a valid operation refused by the emulator).
 *
 * Sources (MongoDB manual unless noted):
 *  - "$type": matches BSON types by name or number (objectId 7, binData 5, timestamp 17); for an array
 *    field, matches when any element has the type.
 *  - "$all": equivalent to an $and of equality conditions, so a non-array field equal to the single
 *    listed value matches.
 *  - "$elemMatch (query)": operators on an array of scalars ({ results: { $elemMatch: { $gte: 80,
 *    $lt: 85 } } }).
 *  - "Bitwise Query Operators": BinData is a little-endian bit array.
 *  - "Projection": inclusion projections keep the document's field order; "$slice (projection)";
 *    "$ (projection)" returns the first element that matched the query; `{ _id: 1 }` alone returns
 *    only _id.
 *  - "$ (update)": 'grades.$' is the first element the query matched; two fields of the same element
 *    ('items.$.a', 'items.$.b') are distinct paths.
 *  - "$pull": a condition with $or removes the elements matching it.
 *  - "$push": a non-array target fails with BadValue "The field '<f>' must be an array but is of type
 *    <type> in document {_id: <id>}" (src/mongo/db/update/push_node_test.cpp).
 *  - "$set" with the unchanged _id is accepted; only a changed _id is ImmutableField (66).
 *  - "Field Names" (5.0+): top-level field names may start with '$' in inserted documents.
 */
import { Binary, DBRef, ObjectId, Timestamp, type Db, type Document, type MongoClient } from 'mongodb';
import { expectServerError, openClient, uniqueDbName, type Loose } from './support/server';

const dbName = uniqueDbName('conf_semantics');
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

const ids = (docs: Document[]): unknown[] => docs.map((d) => d._id);

describe('query operators', () => {
  beforeAll(async () => {
    await db.collection<Loose>('q').insertMany([
      { _id: 1, oid: new ObjectId(), bin: new Binary(Buffer.from([0b0000_0011])), ts: new Timestamp({ t: 1, i: 1 }), tag: 'x', scores: [1, 5, 9] },
      { _id: 2, oid: 'not-an-oid', bin: 'not-bin', ts: new Date(0), tag: ['x', 'y'], scores: [20] },
      { _id: 3, many: [new ObjectId(), 'str'] },
    ]);
  });

  test('$type objectId / binData / timestamp, by name and by number, and on array elements', async () => {
    const q = db.collection<Loose>('q');
    expect(ids(await q.find({ oid: { $type: 'objectId' } }).toArray())).toEqual([1]);
    expect(ids(await q.find({ oid: { $type: 7 } }).toArray())).toEqual([1]);
    expect(ids(await q.find({ bin: { $type: 'binData' } }).toArray())).toEqual([1]);
    expect(ids(await q.find({ ts: { $type: 'timestamp' } }).toArray())).toEqual([1]);
    expect(ids(await q.find({ many: { $type: 'objectId' } }).toArray())).toEqual([3]);
  });

  test('$all on a non-array field matches when the field equals the value', async () => {
    expect(ids(await db.collection<Loose>('q').find({ tag: { $all: ['x'] } }).sort({ _id: 1 }).toArray())).toEqual([1, 2]);
    expect(ids(await db.collection<Loose>('q').find({ tag: { $all: ['x', 'y'] } }).toArray())).toEqual([2]);
    expect(await db.collection<Loose>('q').find({ tag: { $all: [] } }).toArray()).toEqual([]);
  });

  test('$elemMatch with operators on an array of scalars', async () => {
    expect(ids(await db.collection<Loose>('q').find({ scores: { $elemMatch: { $gte: 4, $lt: 6 } } }).toArray())).toEqual([1]);
  });

  // Manual, "Comparison/Sort Order": BinData compares by length, then subtype, then bytes; the
  // query operators compare within the operand's type bracket.
  test('$gt / $lt on BinData compare by length first, then bytes', async () => {
    const coll = db.collection<Loose>('q_bin_range');
    await coll.insertMany([
      { _id: 'long', b: new Binary(Buffer.from('über')) },
      { _id: 'x', b: new Binary(Buffer.from('x')) },
      { _id: 'y', b: new Binary(Buffer.from('y')) },
      { _id: 'str', b: 'zzz' },
    ]);
    expect(ids(await coll.find({ b: { $gt: new Binary(Buffer.from('x')) } }).sort({ _id: 1 }).toArray())).toEqual(['long', 'y']);
    expect(ids(await coll.find({ b: { $lt: new Binary(Buffer.from('xx')) } }).sort({ _id: 1 }).toArray())).toEqual(['x', 'y']);
  });

  // Manual, "Database References": $ref/$id/$db are DBRef field names; Mongoose's test "casts
  // $elemMatch with dbrefs (gh-8577)" matches on them with $elemMatch against mongod.
  test('$elemMatch on DBRef fields ($ref, $id)', async () => {
    const coll = db.collection<Loose>('q_dbref');
    const id = new ObjectId();
    await coll.insertMany([{ _id: 1, refs: [new DBRef('users', id)] }, { _id: 2, refs: [new DBRef('users', new ObjectId())] }]);
    expect(ids(await coll.find({ refs: { $elemMatch: { $ref: 'users', $id: id } } } as Document).toArray())).toEqual([1]);
    expect(ids(await coll.find({ refs: { $elemMatch: { $id: id } } } as Document).toArray())).toEqual([1]);
  });

  test('$bitsAllSet / $bitsAnyClear on BinData', async () => {
    expect(ids(await db.collection<Loose>('q').find({ bin: { $bitsAllSet: [0, 1] } }).toArray())).toEqual([1]);
    expect(ids(await db.collection<Loose>('q').find({ bin: { $bitsAllSet: [2] } }).toArray())).toEqual([]);
    expect(ids(await db.collection<Loose>('q').find({ bin: { $bitsAnyClear: [0, 2] } }).toArray())).toEqual([1]);
  });
});

describe('projections', () => {
  beforeAll(async () => {
    await db.collection<Loose>('p').insertOne({ _id: 1, a: 1, b: { c: 2, d: 3 }, arr: [1, 5, 9], items: [{ k: 'x', v: 1 }, { k: 'y', v: 2 }], z: 'last' });
  });

  test('an inclusion projection keeps the document order, whatever the projection order', async () => {
    const [doc] = await db.collection<Loose>('p').find({}, { projection: { z: 1, a: 1, 'b.d': 1 } }).toArray();
    expect(Object.keys(doc)).toEqual(['_id', 'a', 'b', 'z']);
    expect(doc).toEqual({ _id: 1, a: 1, b: { d: 3 }, z: 'last' });
  });

  test('{ _id: 1 } alone returns only _id; { _id: 0 } alone everything else', async () => {
    expect(await db.collection<Loose>('p').find({}, { projection: { _id: 1 } }).toArray()).toEqual([{ _id: 1 }]);
    const [rest] = await db.collection<Loose>('p').find({}, { projection: { _id: 0 } }).toArray();
    expect(Object.keys(rest)).toEqual(['a', 'b', 'arr', 'items', 'z']);
  });

  test('$slice keeps the other fields; positional $ and $elemMatch return the matching element', async () => {
    const [sliced] = await db.collection<Loose>('p').find({}, { projection: { arr: { $slice: -2 } } }).toArray();
    expect(sliced).toEqual({ _id: 1, a: 1, b: { c: 2, d: 3 }, arr: [5, 9], items: [{ k: 'x', v: 1 }, { k: 'y', v: 2 }], z: 'last' });
    const [windowed] = await db.collection<Loose>('p').find({}, { projection: { arr: { $slice: [1, 1] }, a: 1 } }).toArray();
    expect(windowed).toEqual({ _id: 1, a: 1, arr: [5] });
    expect(await db.collection<Loose>('p').find({ arr: { $gt: 4 } }, { projection: { 'arr.$': 1 } }).toArray()).toEqual([{ _id: 1, arr: [5] }]);
    expect(await db.collection<Loose>('p').find({ 'items.k': 'y' }, { projection: { 'items.$': 1 } }).toArray()).toEqual([{ _id: 1, items: [{ k: 'y', v: 2 }] }]);
    expect(await db.collection<Loose>('p').find({}, { projection: { items: { $elemMatch: { v: { $gt: 1 } } } } }).toArray()).toEqual([{ _id: 1, items: [{ k: 'y', v: 2 }] }]);
  });
});

describe('updates', () => {
  test("'items.$.a' and 'items.$.b' in one update set two fields of the matched element", async () => {
    const coll = db.collection<Loose>('u_pos');
    await coll.insertOne({ _id: 1, items: [{ k: 'x' }, { k: 'y' }] });
    const r = await coll.updateOne({ _id: 1, 'items.k': 'y' }, { $set: { 'items.$.a': 1, 'items.$.b': 2 } });
    expect(r).toMatchObject({ matchedCount: 1, modifiedCount: 1 });
    expect(await coll.findOne({ _id: 1 })).toEqual({ _id: 1, items: [{ k: 'x' }, { k: 'y', a: 1, b: 2 }] });
  });

  // Manual, "$[<identifier>]": several fields of the elements one array filter selects can be set in
  // one update; only a path inside another conflicts (ConflictingUpdateOperators, 40).
  test("'children.$[c].name' and 'children.$[c].updatedAt' in one update; a path inside another conflicts (40)", async () => {
    const coll = db.collection<Loose>('u_af_two');
    await coll.insertOne({ _id: 1, children: [{ k: 'a' }, { k: 'b' }] });
    await coll.updateOne({ _id: 1 }, { $set: { 'children.$[c].name': 'B', 'children.$[c].n': 2 } } as Document, { arrayFilters: [{ 'c.k': 'b' }] });
    expect(await coll.findOne({ _id: 1 })).toEqual({ _id: 1, children: [{ k: 'a' }, { k: 'b', name: 'B', n: 2 }] });
    const error = await expectServerError(coll.updateOne({ _id: 1 }, { $set: { children: [], 'children.0': {} } } as Document), 40);
    expect(error.codeName).toBe('ConflictingUpdateOperators');
  });

  // UpdateObjectNode::parseAndMerge (src/mongo/db/update/update_object_node.cpp): paths are added in
  // order; the first one meeting an earlier path fails, "at" the earlier path when that path is one of
  // its prefixes, else at itself. The same path under two operators conflicts too.
  test('conflicting update paths name the later path and where it meets the earlier one (40)', async () => {
    const coll = db.collection<Loose>('u_conflict');
    await coll.insertOne({ _id: 1, a: { b: 1 } });
    const msg = async (update: Document): Promise<string> => (await expectServerError(coll.updateOne({ _id: 1 }, update), 40)).message;
    expect(await msg({ $set: { a: 1 }, $inc: { a: 1 } })).toBe("Updating the path 'a' would create a conflict at 'a'");
    expect(await msg({ $set: { 'a.b': 1 }, $inc: { a: 1 } })).toBe("Updating the path 'a' would create a conflict at 'a'");
    expect(await msg({ $set: { a: 1 }, $inc: { 'a.b': 1 } })).toBe("Updating the path 'a.b' would create a conflict at 'a'");
    expect(await coll.findOne({ _id: 1 })).toEqual({ _id: 1, a: { b: 1 } });
  });

  test('$pull with an $or condition removes the matching elements', async () => {
    const coll = db.collection<Loose>('u_pull');
    await coll.insertOne({ _id: 1, items: [{ a: 1 }, { b: 2 }, { a: 3 }] });
    await coll.updateOne({ _id: 1 }, { $pull: { items: { $or: [{ a: 1 }, { b: 2 }] } } } as Document);
    expect(await coll.findOne({ _id: 1 })).toEqual({ _id: 1, items: [{ a: 3 }] });
  });

  test('$push onto a non-array field fails with BadValue and changes nothing', async () => {
    const coll = db.collection<Loose>('u_push');
    await coll.insertOne({ _id: 1, tags: 'x' });
    const error = await expectServerError(coll.updateOne({ _id: 1 }, { $push: { tags: 'y' } } as Document), 2);
    expect(error.message).toBe("The field 'tags' must be an array but is of type string in document {_id: 1}");
    expect(await coll.findOne({ _id: 1 })).toEqual({ _id: 1, tags: 'x' });
  });

  test('$set and replacement carrying the unchanged _id are accepted; a changed _id is ImmutableField', async () => {
    const coll = db.collection<Loose>('u_id');
    await coll.insertOne({ _id: 'k', v: 1 });
    expect(await coll.updateOne({ _id: 'k' }, { $set: { _id: 'k', v: 2 } })).toMatchObject({ matchedCount: 1, modifiedCount: 1 });
    expect(await coll.replaceOne({ _id: 'k' }, { _id: 'k', v: 3 })).toMatchObject({ matchedCount: 1, modifiedCount: 1 });
    await expectServerError(coll.updateOne({ _id: 'k' }, { $set: { _id: 'other' } }), 66);
    expect(await coll.findOne({ _id: 'k' })).toEqual({ _id: 'k', v: 3 });
  });

  test('a top-level field name starting with $ can be inserted (5.0+)', async () => {
    const coll = db.collection<Loose>('u_dollar');
    await coll.insertOne({ _id: 1, $price: 5 } as Document);
    expect(await coll.findOne({ _id: 1 })).toEqual({ _id: 1, $price: 5 });
  });
});

describe('document size limit (16 MiB, BSONObjMaxUserSize)', () => {
  // src/mongo/db/ops/insert.cpp fixDocumentForInsert: BadValue "object to insert too large. size in
  // bytes: <n>, max size: 16777216". src/mongo/db/exec/update_stage.cpp: an update whose result
  // exceeds the limit fails with BSONObjectTooLarge (10334) "Resulting document after update is
  // larger than 16777216" (older servers: code 17419, same message).
  const big = 'x'.repeat(16 * 1024 * 1024);

  test('an insert over 16 MiB fails with BadValue and stores nothing', async () => {
    const coll = db.collection<Loose>('big');
    const error = await expectServerError(coll.insertOne({ _id: 'big', s: big }), 2);
    expect(error.message).toMatch(/^object to insert too large\. size in bytes: \d+, max size: 16777216$/);
    expect(await coll.countDocuments()).toBe(0);
  }, 60_000);

  test('an update growing a document over 16 MiB fails and changes nothing', async () => {
    const coll = db.collection<Loose>('big_update');
    await coll.insertOne({ _id: 1, s: 'x'.repeat(9 * 1024 * 1024) });
    const error = await expectServerErrorOf(coll.updateOne({ _id: 1 }, { $set: { t: 'y'.repeat(8 * 1024 * 1024) } }), [10334, 17419]);
    expect(error.message).toContain('Resulting document after update is larger than 16777216');
    expect(((await coll.findOne({ _id: 1 }, { projection: { t: 1 } })) as Loose).t).toBeUndefined();
  }, 60_000);
});

async function expectServerErrorOf(promise: Promise<unknown>, codes: number[]): Promise<Error & { code?: number }> {
  try {
    await promise;
  } catch (error) {
    const code = (error as { code?: number }).code;
    if (code === undefined || !codes.includes(code)) throw new Error(`expected code ${codes.join(' or ')}, got ${String(code)}: ${(error as Error).message}`);
    return error as Error & { code?: number };
  }
  throw new Error(`expected code ${codes.join(' or ')}, but the operation succeeded`);
}
