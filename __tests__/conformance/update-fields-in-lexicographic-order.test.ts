/**
 * The order in which an update's modifiers are applied, and what follows from it (the
 * stored field order, equality matches on embedded documents, a change stream's removedFields).
 *
 * mongod parses every modifier of an update into one tree of UpdateObjectNodes whose children are a
 * `std::map<std::string, clonable_ptr<UpdateNode>, pathsupport::cmpPathsAndArrayIndexes>`
 * (src/mongo/db/update/update_object_node.h), and UpdateObjectNode::apply iterates `_children` in
 * that map's order (update_object_node.cpp: `for (const auto& pair : _children)`): fields are
 * processed in lexicographic order (numeric names numerically), whatever the order in the update
 * document. The manual says the same ($set, "Behavior": "Starting in MongoDB 5.0, update operators
 * process document fields with string-based names in lexicographic order. Fields with numeric
 * names are processed in numeric order."). So new fields are appended in that order, and the V2
 * log builder records the modifications in that order too (diff_tree DocumentSubDiffNode keeps
 * its deletes in insertion order; change_stream_document_diff_parser.cpp appends removedFields in
 * the diff's order).
 */
import type { ChangeStream, Db, Document, MongoClient } from 'mongodb';
import { testTopology } from '../../test-backend/test-env';
import { describeIf, openClient, uniqueDbName, type Loose } from './support/server';

type AnyDoc = Loose;

const dbName = uniqueDbName('conf_attack10o');
let client: MongoClient;
let db: Db;
const streams: ChangeStream[] = [];

beforeAll(async () => {
  client = await openClient();
  db = client.db(dbName);
});

afterAll(async () => {
  for (const s of streams) await s.close().catch(() => undefined);
  await db.dropDatabase();
  await client.close();
});

describe('modifiers apply in lexicographic field order (update_object_node.cpp)', () => {
  test('$set of two new top-level fields {z, y} appends y before z', async () => {
    const c = db.collection<AnyDoc>('order_top');
    await c.insertOne({ _id: 1, a: 1 });
    await c.updateOne({ _id: 1 }, { $set: { z: 1, y: 1 } });
    expect(Object.keys((await c.findOne({ _id: 1 }))!)).toEqual(['_id', 'a', 'y', 'z']);
  });

  test('$set creating n.b then n.a builds n as {a, b}; an equality on {a: 1, b: 2} matches it', async () => {
    const c = db.collection<AnyDoc>('order_nested');
    await c.insertOne({ _id: 1 });
    await c.updateOne({ _id: 1 }, { $set: { 'n.b': 2, 'n.a': 1 } });
    const doc = await c.findOne({ _id: 1 });
    expect(Object.keys(doc!.n as Document)).toEqual(['a', 'b']);
    // Embedded-document equality is field-order sensitive: mongod finds the document.
    expect(await c.countDocuments({ n: { a: 1, b: 2 } })).toBe(1);
  });

  test('an upsert with $set {z, y} inserts {_id, y, z}', async () => {
    const c = db.collection<AnyDoc>('order_upsert');
    await c.updateOne({ _id: 7 }, { $set: { z: 1, y: 1 } }, { upsert: true });
    expect(Object.keys((await c.findOne({ _id: 7 }))!)).toEqual(['_id', 'y', 'z']);
  });

  test('across operators: {$inc: {m: 1}, $set: {k: 1}} appends k before m', async () => {
    const c = db.collection<AnyDoc>('order_ops');
    await c.insertOne({ _id: 1 });
    await c.updateOne({ _id: 1 }, { $inc: { m: 1 }, $set: { k: 1 } } as Document);
    expect(Object.keys((await c.findOne({ _id: 1 }))!)).toEqual(['_id', 'k', 'm']);
  });
});

describeIf(testTopology() === 'replset', 'change streams need a replica set')('the change event records modifications in application order', () => {
  test('$unset {b, a}: removedFields is [a, b]', async () => {
    const c = db.collection<AnyDoc>('order_cs_unset');
    await c.insertOne({ _id: 1, a: 1, b: 1, c: 1 });
    const s = c.watch();
    streams.push(s as unknown as ChangeStream);
    await s.tryNext();
    await c.updateOne({ _id: 1 }, { $unset: { b: '', a: '' } });
    const ev = (await s.next()) as Document;
    expect(ev.updateDescription.removedFields).toEqual(['a', 'b']);
  });

  test('$set {z, y} of new fields: updatedFields lists y before z', async () => {
    const c = db.collection<AnyDoc>('order_cs_set');
    await c.insertOne({ _id: 1 });
    const s = c.watch();
    streams.push(s as unknown as ChangeStream);
    await s.tryNext();
    await c.updateOne({ _id: 1 }, { $set: { z: 1, y: 1 } });
    const ev = (await s.next()) as Document;
    expect(Object.keys(ev.updateDescription.updatedFields)).toEqual(['y', 'z']);
  });
});
