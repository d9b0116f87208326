/**
 * The condition check mode adds to a sorted single-document write (src/guard/sort-key.ts): it
 * must match the found document exactly while its sort-key values are what the search read, and
 * stop matching once they change (or be stricter: a null that became missing), so that a demoted
 * target is searched again. Each case reads a document as the guard's search does (sortProjection),
 * builds the condition, and counts through the raw driver collection, before and after a change,
 * `{ _id, ...condition }` (the shape of the narrowed write's filter) with a `find`.
 */
import { mongo } from 'mongoose';
import { sortKeyCondition, sortPaths, sortProjection } from '../../../src/guard/sort-key';
import { describeIf, testBackendKind } from '../../conformance/support/server';
import { connect, testDatabase, type MonitoredConnection } from '../../support/db';

const db = testDatabase('sortkeycondition');
let conn: MonitoredConnection;
let raw: mongo.Collection;

beforeAll(async () => {
  conn = await connect(db.name);
  raw = conn.connection.getClient().db(db.name).collection('items');
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

/** Inserts `doc`, reads it as the guard's search does for `sort`, and returns a counter of `{ _id, condition }`. */
async function conditionFor(doc: mongo.Document, sort: mongo.Document, collation?: mongo.CollationOptions) {
  const { insertedId: _id } = await raw.insertOne(doc);
  const paths = sortPaths(sort)!;
  const found = (await raw.findOne({ _id }, { projection: sortProjection(paths) }))!;
  const condition = sortKeyCondition(found, paths);
  const matches = async () => (condition ? (await raw.find({ $and: [{ _id }, condition] }, collation ? { collation } : {}).toArray()).length : 'no condition');
  return { _id, condition, matches, set: (update: mongo.Document) => raw.updateOne({ _id }, update) };
}

test.each<[string, mongo.Document, mongo.Document, mongo.Document, number]>([
  ['a number changed', { edits: 5 }, { edits: -1 }, { $set: { edits: 0 } }, 0],
  ['a number rewritten as another numeric type of the same value', { edits: 5 }, { edits: -1 }, { $set: { edits: new mongo.Double(5) } }, 1],
  ['another field changed', { edits: 5, title: 'a' }, { edits: -1 }, { $set: { title: 'b' } }, 1],
  ['a missing key set to null (sorts the same; searched again all the same)', { title: 'a' }, { edits: 1 }, { $set: { edits: null } }, 0],
  ['a missing key set', { title: 'a' }, { edits: 1 }, { $set: { edits: 1 } }, 0],
  ['a null key removed', { edits: null }, { edits: 1 }, { $unset: { edits: '' } }, 0],
  ['a dotted key changed', { a: { b: 3 } }, { 'a.b': 1 }, { $set: { 'a.b': 4 } }, 0],
  ['a dotted key whose parent became an array of documents', { a: { b: 3 } }, { 'a.b': 1 }, { $set: { a: [{ b: 3 }] } }, 0],
  ['an array key changed', { tags: [1, 5] }, { tags: -1 }, { $set: { tags: [1, 6] } }, 0],
  ['an array key unchanged', { tags: [1, 5] }, { tags: -1 }, { $set: { title: 'x' } }, 1],
  ['an array under a dotted key whose parent became an array', { a: { b: [3] } }, { 'a.b': 1 }, { $set: { a: [{ b: [3] }] } }, 0],
  ['two keys, the second changed', { edits: 5, title: 'a' }, { edits: -1, title: 1 }, { $set: { title: 'b' } }, 0],
  ["a string key holding '$edits' is compared as data", { title: '$edits', edits: 5 }, { title: 1 }, { $set: { edits: 6 } }, 1],
])('%s', async (_name, doc, sort, change, after) => {
  const { matches, set } = await conditionFor(doc, sort);
  expect(await matches()).toBe(1);
  await set(change);
  expect(await matches()).toBe(after);
});

// The emulator implements no collation (FIDELITY.md, "Not implemented"): this runs on a real server.
describeIf(testBackendKind() !== 'emulator', 'the emulator refuses collation (NotImplemented)')('collation', () => {
  test('under a case-insensitive collation a change of case keeps the sort key (and the match)', async () => {
    const collation = { locale: 'en', strength: 2 };
    const { matches, set } = await conditionFor({ title: 'abc' }, { title: 1 }, collation);
    await set({ $set: { title: 'ABC' } });
    expect(await matches()).toBe(1);
    await set({ $set: { title: 'abd' } });
    expect(await matches()).toBe(0);
  });
});

test.each<[string, mongo.Document, mongo.Document]>([
  ['an array on the way to the key', { a: [{ b: 1 }, { b: 2 }] }, { 'a.b': 1 }],
  ['a JavaScript RegExp value (its flags may not come back exactly)', { r: /x/i }, { r: 1 }],
])('no condition where the key cannot be compared exactly: %s', async (_name, doc, sort) => {
  const { condition } = await conditionFor(doc, sort);
  expect(condition).toBeUndefined();
});

test.each<[string, unknown, string[] | undefined]>([
  ['an object', { edits: -1, title: 1 }, ['edits', 'title']],
  ['a Map', new Map([['edits', -1]]), ['edits']],
  ['a string', 'edits', ['edits']],
  ['a pair', ['edits', -1], ['edits']],
  ['a list of pairs', [['edits', -1], ['title', 1]], ['edits', 'title']],
  ['$natural', { $natural: 1 }, undefined],
  ['a $meta sort', { score: { $meta: 'textScore' } }, undefined],
  ['a path with a $ component', { 'a.$b': 1 }, undefined],
])('sortPaths of %s', (_name, sort, paths) => {
  expect(sortPaths(sort)).toEqual(paths);
});

test('the projection reads a path under another one with it, and never _id twice', () => {
  expect(sortProjection(['a', 'a.b', '_id', '_id.x', 'c'])).toEqual({ _id: 1, a: 1, c: 1 });
});
