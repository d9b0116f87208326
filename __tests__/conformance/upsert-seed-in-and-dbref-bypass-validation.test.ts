/**
 * The emulator's upsert seed (writes.ts `upsertSeed`) from an `$in` of equal values and from a
 * DBRef equality, and the `bypassDocumentValidation` field of the write commands and aggregate.
 *
 * Each test accepts mongod 7.0's answer or NotImplemented (238), never another answer.
 */
import type { Db, MongoClient } from 'mongodb';
import { DBRef, MongoServerError, type ObjectId } from 'mongodb';
import { openClient, uniqueDbName } from './support/server';

type AnyDoc = { _id?: any; [key: string]: any }; // eslint-disable-line @typescript-eslint/no-explicit-any

const dbName = uniqueDbName('conf_attack10u');
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

/** The upserted document (without a generated _id), or the server error's code. */
async function upserted(name: string, q: AnyDoc, u: AnyDoc): Promise<AnyDoc | number> {
  const coll = db.collection<AnyDoc>(name);
  await coll.drop().catch(() => undefined);
  try {
    // A replacement goes through replaceOne: the driver refuses one in updateOne client-side.
    if (Object.keys(u).some((k) => k.startsWith('$'))) await coll.updateOne(q, u, { upsert: true });
    else await coll.replaceOne(q, u, { upsert: true });
  } catch (e) {
    if (e instanceof MongoServerError) return e.code as number;
    throw e;
  }
  const docs = await coll.find({}).toArray();
  expect(docs).toHaveLength(1);
  return docs[0];
}

/**
 * `$in` with duplicate values: InMatchExpression::setEqualities sorts the equalities and keeps one
 * of each (std::unique_copy into _equalitySet, src/mongo/db/matcher/expression_leaf.cpp), and
 * InMatchExpression::getOptimizer simplifies an $in whose _equalitySet has exactly one element and
 * no regex into an EqualityMatchExpression ("Simplify IN of exactly one equality"). The upsert
 * seed is taken from the canonicalized (optimized) query (UpdateDriver::
 * populateDocumentWithQueryFields), so `{x: {$in: [1, 1]}}` seeds `x: 1` exactly as
 * `{x: {$in: [1]}}` does (jstests/core/upsert_fields.js: `upsertedXVal({x: {$in: [1]}}, expr)` is 1).
 */
describe('an $in whose values are all equal seeds the path (deduplicated, then one equality)', () => {
  test('{x: {$in: [1, 1]}} with $set {a: 1} inserts {x: 1, a: 1}', async () => {
    const r = await upserted('in_dup_x', { x: { $in: [1, 1] } }, { $set: { a: 1 } });
    if (r === 238) return;
    expect(typeof r === 'number' ? r : { x: r.x, a: r.a }).toEqual({ x: 1, a: 1 });
  });

  test('{_id: {$in: [5, 5]}} with $set {a: 1} inserts _id 5', async () => {
    const r = await upserted('in_dup_id', { _id: { $in: [5, 5] } }, { $set: { a: 1 } });
    if (r === 238) return;
    expect(typeof r === 'number' ? r : r._id).toEqual(5);
  });

  test('{_id: {$in: [5, 5]}} replacement {a: 1} inserts _id 5', async () => {
    const r = await upserted('in_dup_id_repl', { _id: { $in: [5, 5] } }, { a: 1 });
    if (r === 238) return;
    expect(typeof r === 'number' ? r : r._id).toEqual(5);
  });
});

/**
 * A DBRef-shaped object is an equality, not an operator object: the parser's isExpressionDocument
 * (src/mongo/db/matcher/expression_parser.cpp) answers false when `isDBRefDocument` holds, so
 * `{x: {$ref: 'a', $id: 1}}` is `x $eq {$ref: 'a', $id: 1}`, an equality extractEqualityMatches
 * takes into the upsert seed (upsert_fields.js DBRef case, SERVER-14024).
 */
describe('a DBRef equality seeds the path', () => {
  test('{x: DBRef("a", 1)} with $set {y: 1} inserts x: DBRef("a", 1)', async () => {
    const r = await upserted('dbref_seed', { x: new DBRef('a', 1 as unknown as ObjectId) }, { $set: { y: 1 } });
    if (r === 238) return;
    expect(typeof r === 'number' ? r : { x: r.x instanceof DBRef ? { ref: r.x.collection, id: r.x.oid } : r.x, y: r.y }).toEqual({ x: { ref: 'a', id: 1 }, y: 1 });
  });
});

/**
 * The write commands' `bypassDocumentValidation` is a `safeBool` (WriteCommandBase in
 * src/mongo/db/ops/write_ops.idl; basic_types.idl safeBool: bool, long, int, decimal or double read
 * with BSONElement::trueValue), so 1 bypasses the validator as `true` does.
 */
describe('insert/update bypassDocumentValidation: 1 (safeBool) bypasses the validator', () => {
  test('insert {bypassDocumentValidation: 1} of an invalid document succeeds', async () => {
    const name = 'bypass_num_insert';
    await db.collection(name).drop().catch(() => undefined);
    await db.createCollection(name, { validator: { a: { $gt: 0 } } });
    let outcome: number | 'ok' = 'ok';
    try {
      await db.command({ insert: name, documents: [{ _id: 1, a: -1 }], bypassDocumentValidation: 1 });
    } catch (e) {
      if (!(e instanceof MongoServerError)) throw e;
      outcome = e.code as number;
    }
    // A write error comes back in the reply, not as a thrown error: read what went in.
    if (outcome === 238) return;
    expect({ outcome, docs: await db.collection(name).find().toArray() }).toEqual({ outcome: 'ok', docs: [{ _id: 1, a: -1 }] });
  });

  test('update {bypassDocumentValidation: 1} to an invalid document succeeds', async () => {
    const name = 'bypass_num_update';
    await db.collection(name).drop().catch(() => undefined);
    await db.createCollection(name, { validator: { a: { $gt: 0 } } });
    await db.collection(name).insertOne({ _id: 1, a: 1 } as AnyDoc);
    const reply = await db.command({ update: name, updates: [{ q: { _id: 1 }, u: { $set: { a: -1 } } }], bypassDocumentValidation: 1.0 }).catch((e: unknown) => {
      if (e instanceof MongoServerError && e.code === 238) return undefined;
      throw e;
    });
    if (reply === undefined) return;
    expect({ writeErrors: reply.writeErrors, docs: await db.collection(name).find().toArray() }).toEqual({ writeErrors: undefined, docs: [{ _id: 1, a: -1 }] });
  });
});

/**
 * A `safeBool` field of another type fails the IDL parse (basic_types.idl safeBool:
 * bson_serialization_type [bool, long, int, decimal, double]; the generated parser's
 * checkAndAssertTypes answers TypeMismatch 14 "BSON field '<cmd>.bypassDocumentValidation' is the
 * wrong type 'string', expected types '[bool, long, int, decimal, double]'") before the command
 * runs: aggregate_command.idl and write_ops.idl (WriteCommandBase) both declare it safeBool.
 */
describe('bypassDocumentValidation of a non-safeBool type: TypeMismatch 14', () => {
  async function codeOf(cmd: AnyDoc): Promise<number | 'ok'> {
    try {
      const reply = await db.command(cmd);
      return reply.writeErrors ? (reply.writeErrors[0].code as number) : 'ok';
    } catch (e) {
      if (e instanceof MongoServerError) return e.code as number;
      throw e;
    }
  }

  test('aggregate without a write stage', async () => {
    await db.collection('bdv_type').insertOne({ _id: 1 } as AnyDoc);
    const code = await codeOf({ aggregate: 'bdv_type', pipeline: [], cursor: {}, bypassDocumentValidation: 'yes' });
    expect(code === 238 ? 14 : code).toBe(14);
  });

  test('insert', async () => {
    const code = await codeOf({ insert: 'bdv_type_ins', documents: [{ _id: 1 }], bypassDocumentValidation: 'yes' });
    const docs = await db.collection('bdv_type_ins').find().toArray();
    expect({ code: code === 238 ? 14 : code, docs: code === 238 ? [] : docs }).toEqual({ code: 14, docs: [] });
  });
});
