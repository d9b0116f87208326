/**
 * Update paths mongod cannot create (PathNotViable, 28) and upsert queries whose equalities conflict
 * (NotSingleValueField, 54): a write error for the statement, nothing written; the paths mongod
 * creates are created.
 *
 * Sources:
 *  - pathsupport::createPathAt (src/mongo/db/update/path_support.cpp), called by
 *    ModifierNode::applyToNonexistentElement (modifier_node.cpp) for the creating modifiers: under
 *    an element that is neither a document nor an array (null included), or an array reached with a
 *    name that is not an index, PathNotViable "Cannot create field '<part>' in element {<element>}",
 *    the element as BSONElement::toString prints it. mongod answers quoted in the wild: "Cannot
 *    create field 'amount' in element {eatenBy: [ { name: \"alice\", amount: 2.0 }, ... ]}" (code
 *    28), "Cannot create field 'autoCommit' in element {github: null}"; the unit test
 *    update_array_node_test.cpp "Cannot create field 'b' in element {0: 0}". The paths of one update
 *    apply in field-name order, so the first failing one in that order is reported.
 *  - checkEqualityConflicts (path_support.cpp) over the canonical query's equalities (sorted by path,
 *    so a prefix comes first): NotSingleValueField "cannot infer query fields to set, both paths
 *    '<path>' and '<prefix>' are matched", "... path '<path>' is matched twice"; the equalities land
 *    in a std::map, so the upserted document holds them in path order (jstests/core/write/update/
 *    upsert_fields.js).
 */
import type { Db, Document, MongoClient } from 'mongodb';
import { expectWriteError, openClient, uniqueDbName } from './support/server';

const dbName = uniqueDbName('conf_refuse_paths');
let client: MongoClient;
let db: Db;

beforeAll(async () => {
  client = await openClient();
  db = client.db(dbName);
});

beforeEach(async () => {
  await db.collection('c').deleteMany({});
  await db.collection('c').insertMany([
    { _id: 'scalar', a: 1 },
    { _id: 'null', a: null },
    { _id: 'array', a: [1, 2] },
    { _id: 'docs', a: [{ name: 'x', n: 2.5 }] },
    { _id: 'nested', a: { b: 'str' } },
    { _id: 'empty', a: [] },
  ] as Document[]);
});

afterAll(async () => {
  await db.dropDatabase();
  await client.close();
});

const notViable = (errmsg: string): { code: number; codeName: string; errmsg: string } => ({ code: 28, codeName: 'PathNotViable', errmsg });

describe('PathNotViable', () => {
  test.each([
    ['a field inside a number', 'scalar', { $set: { 'a.b': 1 } }, "Cannot create field 'b' in element {a: 1}"],
    ['a field inside null', 'null', { $set: { 'a.b': 1 } }, "Cannot create field 'b' in element {a: null}"],
    ['a named field inside an array', 'array', { $set: { 'a.b': 1 } }, "Cannot create field 'b' in element {a: [ 1, 2 ]}"],
    ['a named field inside an array of documents', 'docs', { $inc: { 'a.n': 1 } }, 'Cannot create field \'n\' in element {a: [ { name: "x", n: 2.5 } ]}'],
    ['a named field inside an empty array', 'empty', { $push: { 'a.list': 1 } }, "Cannot create field 'list' in element {a: []}"],
    ['a field inside an array element that is a number', 'array', { $set: { 'a.0.b': 1 } }, "Cannot create field 'b' in element {0: 1}"],
    ['deeper: the first missing part under the deepest element', 'nested', { $set: { 'a.b.c.d': 1 } }, 'Cannot create field \'c\' in element {b: "str"}'],
    ['$min, $max, $mul, $addToSet and $currentDate create too', 'scalar', { $max: { 'a.m': 5 } }, "Cannot create field 'm' in element {a: 1}"],
    ['the first path in field-name order is reported', 'scalar', { $set: { 'z.q': 1, 'a.y': 1 }, $inc: { 'a.b': 1 } }, "Cannot create field 'b' in element {a: 1}"],
  ])('%s', async (_what, id, u, errmsg) => {
    const before = await db.collection('c').findOne({ _id: id as never });
    const reply = await db.command({ update: 'c', updates: [{ q: { _id: id }, u }] });
    expectWriteError(reply, 0, notViable(errmsg));
    expect(reply.nModified).toBe(0);
    expect(await db.collection('c').findOne({ _id: id as never })).toEqual(before);
  });

  test('a multi-update stops at its first document that fails; when that is the first, nothing changes', async () => {
    await db.collection('m').insertMany([{ _id: 1, a: 1 }, { _id: 2, a: {} }] as Document[]);
    const reply = await db.command({ update: 'm', updates: [{ q: {}, u: { $set: { 'a.b': 1 } }, multi: true }] });
    expectWriteError(reply, 0, notViable("Cannot create field 'b' in element {a: 1}"));
    expect(await db.collection('m').find().sort({ _id: 1 }).toArray()).toEqual([{ _id: 1, a: 1 }, { _id: 2, a: {} }]);
  });

  test('an upsert that cannot create its path on the seeded document', async () => {
    const reply = await db.command({ update: 'c', updates: [{ q: { k: 5 }, u: { $set: { 'k.x': 1 } }, upsert: true }] });
    expectWriteError(reply, 0, notViable("Cannot create field 'x' in element {k: 5}"));
    expect(await db.collection('c').countDocuments({ k: 5 })).toBe(0);
  });

  test('findAndModify fails the command', async () => {
    await expect(db.command({ findAndModify: 'c', query: { _id: 'scalar' }, update: { $set: { 'a.b': 1 } } })).rejects.toMatchObject({ code: 28, codeName: 'PathNotViable', errmsg: "Cannot create field 'b' in element {a: 1}" });
  });

  test('what mongod creates: under documents, missing fields, and array indexes (padded with null)', async () => {
    await db.command({ update: 'c', updates: [{ q: { _id: 'nested' }, u: { $set: { 'a.c.d': 1 } } }] });
    expect(await db.collection('c').findOne({ _id: 'nested' as never })).toEqual({ _id: 'nested', a: { b: 'str', c: { d: 1 } } });
    await db.command({ update: 'c', updates: [{ q: { _id: 'empty' }, u: { $set: { 'a.1': 'x' } } }] });
    expect(await db.collection('c').findOne({ _id: 'empty' as never })).toEqual({ _id: 'empty', a: [null, 'x'] });
    await db.command({ update: 'c', updates: [{ q: { _id: 'docs' }, u: { $set: { 'a.0.m': 1 } } }] });
    expect(await db.collection('c').findOne({ _id: 'docs' as never })).toEqual({ _id: 'docs', a: [{ name: 'x', n: 2.5, m: 1 }] });
    const unset = await db.command({ update: 'c', updates: [{ q: { _id: 'scalar' }, u: { $unset: { 'a.b': '' } } }] });
    expect(unset).toMatchObject({ n: 1, nModified: 0 });
  });
});

describe('NotSingleValueField on upsert', () => {
  test.each([
    ['a path and its prefix', { a: 1, 'a.b': 2 }, "cannot infer query fields to set, both paths 'a.b' and 'a' are matched"],
    ['the prefix written last still sorts first', { 'a.b': 2, a: { b: 2 } }, "cannot infer query fields to set, both paths 'a.b' and 'a' are matched"],
    ['the longest prefix is named', { 'p.q.r': 1, p: 1, 'p.q': 1 }, "cannot infer query fields to set, both paths 'p.q' and 'p' are matched"],
    ['through $and', { $and: [{ 'x.y': 1 }, { x: { y: 1 } }] }, "cannot infer query fields to set, both paths 'x.y' and 'x' are matched"],
    ['one path twice', { $and: [{ w: 1 }, { w: 1 }] }, "cannot infer query fields to set, path 'w' is matched twice"],
  ])('%s', async (_what, q, errmsg) => {
    const before = await db.collection('c').countDocuments();
    const reply = await db.command({ update: 'c', updates: [{ q, u: { $set: { z: 1 } }, upsert: true }] });
    expectWriteError(reply, 0, { code: 54, codeName: 'NotSingleValueField', errmsg });
    expect(await db.collection('c').countDocuments()).toBe(before);
  });

  test('the seeded fields are in path order, whatever the query order', async () => {
    const reply = await db.command({ update: 'c', updates: [{ q: { _id: 'seed', y: 1, b: { c: 1 }, 'a.z': 1, 'a.b': 2 }, u: { $set: { m: 1 } }, upsert: true }] });
    expect(reply.upserted).toEqual([{ index: 0, _id: 'seed' }]);
    const doc = await db.collection('c').findOne({ _id: 'seed' as never });
    expect(doc).toEqual({ _id: 'seed', a: { b: 2, z: 1 }, b: { c: 1 }, y: 1, m: 1 });
    expect(Object.keys(doc ?? {})).toEqual(['_id', 'a', 'b', 'y', 'm']);
    expect(Object.keys((doc?.a ?? {}) as Document)).toEqual(['b', 'z']);
  });
});
