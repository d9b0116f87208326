/**
 * Beyond update-fields-in-lexicographic-order.test.ts and
 * upsert-seed-in-and-dbref-bypass-validation.test.ts: the order mongod applies an update's paths
 * in, the `$in` upsert seed, and the `bypassDocumentValidation` safeBool on every command that
 * declares it.
 *
 * Sources:
 *  - Path order: UpdateObjectNode keeps its children in a std::map ordered by
 *    pathsupport::cmpPathsAndArrayIndexes (src/mongo/db/update/update_object_node.h,
 *    path_support.h: names both starting with a digit and not zero-padded order by length first,
 *    everything else by bytes) and UpdateObjectNode::apply walks them in that order
 *    (update_object_node.cpp); manual, $set "Behavior" (5.0+: lexicographic, numeric names
 *    numerically). New fields are appended in that order; existing ones stay in place. The change
 *    event's updatedFields follow the log builder's order (the same walk).
 *  - `$in` seed: InMatchExpression::setEqualities de-duplicates by BSON comparison and the optimizer
 *    makes an `$in` of one distinct non-regex value an equality (src/mongo/db/matcher/
 *    expression_leaf.cpp); UpdateDriver::populateDocumentWithQueryFields seeds equalities
 *    (jstests/core/upsert_fields.js).
 *  - safeBool: basic_types.idl (bool, long, int, decimal, double; BSONElement::trueValue);
 *    write_ops.idl (WriteCommandRequestBase for insert/update/delete, findAndModify's own field);
 *    aggregate_command.idl; the wrong-type message from IDLParserContext::throwBadType
 *    (src/mongo/idl/idl_parser.cpp); null is ignored (checkAndAssertTypes);
 *    jstests/aggregation/sources/merge/bypass_doc_validation.js (a string is TypeMismatch).
 */
import type { ChangeStream, Db, Document, MongoClient } from 'mongodb';
import { Double, MongoServerError } from 'mongodb';
import { testTopology } from '../../test-backend/test-env';
import { describeIf, expectServerError, openClient, uniqueDbName, type Loose } from './support/server';

const dbName = uniqueDbName('conf_update_order');
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

async function after(name: string, doc: Loose, update: Document): Promise<Loose> {
  const c = db.collection<Loose>(name);
  await c.insertOne(doc);
  await c.updateOne({ _id: doc._id }, update);
  return (await c.findOne({ _id: doc._id }))!;
}

describe('paths apply in cmpPathsAndArrayIndexes order', () => {
  test('existing fields keep their place; new ones follow in name order', async () => {
    const d = await after('o_existing', { _id: 1, z: 0 }, { $set: { y: 1, a: 1, z: 2 } });
    expect(Object.keys(d)).toEqual(['_id', 'z', 'a', 'y']);
  });

  test('three operators creating fields of one embedded document: {a, b, c}', async () => {
    const d = await after('o_nested_ops', { _id: 1 }, { $set: { 'n.c': 1 }, $inc: { 'n.b': 1 }, $max: { 'n.a': 5 } });
    expect(d.n).toEqual({ a: 5, b: 1, c: 1 });
    expect(Object.keys(d.n as Document)).toEqual(['a', 'b', 'c']);
  });

  test('names starting with digits order by length first: 9a before 100x', async () => {
    // Byte order would put '100x' first; cmpPathsAndArrayIndexes compares lengths first.
    const d = await after('o_digits', { _id: 1 }, { $set: { '100x': 1, '9a': 1 } });
    expect(Object.keys(d)).toEqual(['_id', '9a', '100x']);
  });

  test('$rename target and $set: {_id, y, z}', async () => {
    const d = await after('o_rename', { _id: 1, a: 1 }, { $rename: { a: 'z' }, $set: { y: 1 } });
    expect(Object.keys(d)).toEqual(['_id', 'y', 'z']);
  });

  test('fields created in every array element through $[]', async () => {
    const d = await after('o_all_positional', { _id: 1, arr: [{ a: 1 }, { a: 2 }] }, { $set: { 'arr.$[].z': 1, 'arr.$[].y': 1 } });
    expect((d.arr as Document[]).map((e) => Object.keys(e))).toEqual([['a', 'y', 'z'], ['a', 'y', 'z']]);
  });

  test('an upsert seeds the query fields first, then the update creates its fields in order', async () => {
    const c = db.collection<Loose>('o_upsert_seed');
    await c.updateOne({ _id: 3, q: 1 }, { $setOnInsert: { z: 1 }, $set: { b: 1 } }, { upsert: true });
    expect(Object.keys((await c.findOne({ _id: 3 }))!)).toEqual(['_id', 'q', 'b', 'z']);
  });
});

describeIf(testTopology() === 'replset', 'change streams need a replica set')('updatedFields in path order across operators', () => {
  test('$set z and $inc y of existing fields: updatedFields is {y, z}', async () => {
    const c = db.collection<Loose>('o_cs_ops');
    await c.insertOne({ _id: 1, y: 0, z: 0 });
    const s = c.watch();
    streams.push(s as unknown as ChangeStream);
    await s.tryNext();
    await c.updateOne({ _id: 1 }, { $set: { z: 1 }, $inc: { y: 1 } } as Document);
    const ev = (await s.next()) as Document;
    expect(Object.keys(ev.updateDescription.updatedFields)).toEqual(['y', 'z']);
  });
});

describe('$in in the upsert seed', () => {
  async function upsertWith(name: string, q: Document): Promise<Loose> {
    const c = db.collection<Loose>(name);
    await c.updateOne(q, { $set: { k: 1 } }, { upsert: true });
    return (await c.findOne({ k: 1 }))!;
  }

  test('two equal embedded documents seed the path', async () => {
    const d = await upsertWith('in_docs', { x: { $in: [{ a: 1 }, { a: 1 }] } });
    expect(d.x).toEqual({ a: 1 });
  });

  test('two different values do not seed it', async () => {
    const d = await upsertWith('in_two', { x: { $in: [1, 2] } });
    expect(d.x).toBeUndefined();
  });

  test('equal values of different types (1 and 1.0): refused, which one mongod keeps is not pinned down', async () => {
    await expectServerError(upsertWith('in_types', { x: { $in: [1, new Double(1)] } }), 238);
  });
});

describe('bypassDocumentValidation is a safeBool on every command that declares it', () => {
  const wrongType = (cmd: string): string => `BSON field '${cmd}.bypassDocumentValidation' is the wrong type 'string', expected types '[bool, long, int, decimal, double']`;

  async function validated(name: string): Promise<void> {
    await db.collection(name).drop().catch(() => undefined);
    await db.createCollection(name, { validator: { a: { $gt: 0 } } });
    await db.collection<Loose>(name).insertOne({ _id: 1, a: 1 });
  }

  test('update, delete, findAndModify and aggregate with $out: TypeMismatch with the IDL message', async () => {
    await validated('bdv_msgs');
    const cases: Array<[string, Document]> = [
      ['update', { update: 'bdv_msgs', updates: [{ q: { _id: 1 }, u: { $set: { a: 2 } } }], bypassDocumentValidation: 'yes' }],
      ['delete', { delete: 'bdv_msgs', deletes: [{ q: { _id: 1 }, limit: 1 }], bypassDocumentValidation: 'yes' }],
      ['findAndModify', { findAndModify: 'bdv_msgs', query: { _id: 1 }, update: { $set: { a: 2 } }, bypassDocumentValidation: 'yes' }],
      ['findAndModify', { findandmodify: 'bdv_msgs', query: { _id: 1 }, update: { $set: { a: 2 } }, bypassDocumentValidation: 'yes' }],
      ['aggregate', { aggregate: 'bdv_msgs', pipeline: [{ $out: 'bdv_out' }], cursor: {}, bypassDocumentValidation: 'yes' }],
      ['insert', { insert: 'bdv_msgs', documents: [{ _id: 2, a: 1 }], bypassDocumentValidation: 'yes' }],
    ];
    for (const [name, cmd] of cases) {
      const e = await expectServerError(db.command(cmd), 14);
      expect(e.message).toBe(wrongType(name));
    }
    expect(await db.collection('bdv_msgs').find().toArray()).toEqual([{ _id: 1, a: 1 }]);
  });

  test('findAndModify {bypassDocumentValidation: 1} writes an invalid document', async () => {
    await validated('bdv_fam');
    await db.command({ findAndModify: 'bdv_fam', query: { _id: 1 }, update: { $set: { a: -1 } }, bypassDocumentValidation: 1 });
    expect(await db.collection('bdv_fam').find().toArray()).toEqual([{ _id: 1, a: -1 }]);
  });

  test('0 and null keep validation on (null is ignored by the IDL parser)', async () => {
    await validated('bdv_off');
    for (const flag of [0, null]) {
      const reply: Document = await db.command({ insert: 'bdv_off', documents: [{ _id: 2, a: -1 }], bypassDocumentValidation: flag }).catch((e: unknown) => {
        if (e instanceof MongoServerError) return { thrown: e.code };
        throw e;
      });
      expect(reply.writeErrors?.[0]?.code).toBe(121);
    }
  });
});
