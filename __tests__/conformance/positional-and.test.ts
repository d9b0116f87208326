/**
 * The positional `$` update operator when the query's condition on the array sits inside `$and`.
 *
 * Source: UpdateStage::transformAndUpdate (src/mongo/db/exec/update_stage.cpp) re-matches the
 * document against the whole query with `matchDetails.requestElemMatchKey()`, and
 * AndMatchExpression::matches (src/mongo/db/matcher/expression_tree.cpp) passes the details to
 * every child, so `{ $and: [{ tags: 'y' }, { _id: 1 }] }` yields the position of 'y' exactly as
 * `{ tags: 'y', _id: 1 }` does (manual, "$ (update)": the operator "identifies an element in an array
 * to update without explicitly specifying the position of the element in the array").
 * Found by the attack suite (emulator-positional-and.test.ts): a guarded updateMany narrows its
 * filter per document to `{ $and: [filter, { _id: K }] }`.
 */
import type { Db, MongoClient } from 'mongodb';
import { openClient, uniqueDbName } from './support/server';

const dbName = uniqueDbName('conf_positional_and');
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

test('a positional $ update whose array condition sits inside $and updates the matched element', async () => {
  const c = db.collection<{ _id: number; tags: string[] }>('tags');
  await c.insertOne({ _id: 1, tags: ['x', 'y'] });
  const result = await c.updateOne({ $and: [{ tags: 'y' }, { _id: 1 }] }, { $set: { 'tags.$': 'Y' } });
  expect(result.modifiedCount).toBe(1);
  expect((await c.findOne({ _id: 1 }))?.tags).toEqual(['x', 'Y']);
});

test('nested $and and element conditions on an array of documents', async () => {
  const c = db.collection<{ _id: number; items: Array<{ k: string; n: number }> }>('items');
  await c.insertOne({ _id: 1, items: [{ k: 'a', n: 1 }, { k: 'b', n: 2 }] });
  await c.updateOne({ $and: [{ _id: 1 }, { $and: [{ 'items.k': 'b' }] }] }, { $inc: { 'items.$.n': 10 } });
  expect((await c.findOne({ _id: 1 }))?.items).toEqual([{ k: 'a', n: 1 }, { k: 'b', n: 12 }]);
});
