/**
 * Document validation with query-operator validators: create/collMod options, the
 * DocumentValidationFailure (121) "Document failed validation" with errInfo {failingDocumentId,
 * details}, validationLevel, validationAction and bypassDocumentValidation.
 *
 * Sources (mongodb/mongo unless noted):
 *  - CollectionImpl::checkValidationAndParseResult (src/mongo/db/catalog/collection_impl.cpp) and
 *    doc_validation_error::generateError (src/mongo/db/matcher/doc_validation_error.cpp);
 *  - the expected `details` below are those of src/mongo/db/matcher/doc_validation_error_test.cpp
 *    (BasicType, EqNoOperator, BasicGt, ImplicitAnd, BasicExists, TypeMissingPath,
 *    TypeImplicitArrayTraversal, BasicOr, BasicAnd);
 *  - crud spec test findOneAndUpdate-errorResponse.json "document validation errInfo is
 *    accessible" (collMod validator {x: {$type: 'string'}}, then findOneAndUpdate {$set: {x: 1}});
 *  - manual "Specify Validation Level for Existing Documents" (moderate), "Choose How to Handle
 *    Invalid Documents" (warn), "Bypass Schema Validation".
 */
import type { Db, Document, MongoClient, MongoServerError } from 'mongodb';
import { expectServerError, openClient, uniqueDbName, type Loose } from './support/server';

const dbName = uniqueDbName('conf_validation');
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

/** The single write error of an insert/update command reply. */
function writeError(reply: Document): Document {
  expect(reply.writeErrors).toHaveLength(1);
  return reply.writeErrors[0] as Document;
}

test('insert failing a $type validator: writeError 121 with the details of doc_validation_error_test BasicType', async () => {
  await db.createCollection('t1', { validator: { a: { $type: 'int' } } });
  const reply = await db.command({ insert: 't1', documents: [{ _id: 1, a: 'one' }] });
  const e = writeError(reply);
  expect(e.code).toBe(121);
  expect(e.errmsg).toBe('Document failed validation');
  expect(e.errInfo).toEqual({
    failingDocumentId: 1,
    details: { operatorName: '$type', specifiedAs: { a: { $type: 'int' } }, reason: 'type did not match', consideredValue: 'one', consideredType: 'string' },
  });
  expect(await db.collection('t1').countDocuments()).toBe(0);
  // A valid document goes in.
  expect((await db.command({ insert: 't1', documents: [{ _id: 2, a: 5 }] })).n).toBe(1);
});

test('missing field, implicit equality, arrays, $exists', async () => {
  await db.createCollection('t2', { validator: { a: { $type: 'double' } } });
  const missing = writeError(await db.command({ insert: 't2', documents: [{ _id: 1, b: 1 }] }));
  expect(missing.errInfo.details).toEqual({ operatorName: '$type', specifiedAs: { a: { $type: 'double' } }, reason: 'field was missing' });
  const arr = writeError(await db.command({ insert: 't2', documents: [{ _id: 1, a: ['x', 'y', 'z'] }] }));
  expect(arr.errInfo.details).toEqual({ operatorName: '$type', specifiedAs: { a: { $type: 'double' } }, reason: 'type did not match', consideredValues: ['x', 'y', 'z'], consideredType: 'string' });

  await db.createCollection('t3', { validator: { a: 2 } });
  const eq = writeError(await db.command({ insert: 't3', documents: [{ _id: 1, a: 1 }] }));
  expect(eq.errInfo.details).toEqual({ operatorName: '$eq', specifiedAs: { a: 2 }, reason: 'comparison failed', consideredValue: 1 });

  await db.createCollection('t4', { validator: { a: { $exists: true } } });
  const ex = writeError(await db.command({ insert: 't4', documents: [{ _id: 1, b: 1 }] }));
  expect(ex.errInfo.details).toEqual({ operatorName: '$exists', specifiedAs: { a: { $exists: true } }, reason: 'path does not exist' });
});

test('implicit and explicit $and report the failing clauses by index; $or reports every clause', async () => {
  await db.createCollection('t5', { validator: { a: { $gt: 0, $lt: 10 } } });
  const implicitAnd = writeError(await db.command({ insert: 't5', documents: [{ _id: 1, a: 11 }] }));
  expect(implicitAnd.errInfo.details).toEqual({
    operatorName: '$and',
    clausesNotSatisfied: [{ index: 1, details: { operatorName: '$lt', specifiedAs: { a: { $lt: 10 } }, reason: 'comparison failed', consideredValue: 11 } }],
  });
  await db.createCollection('t6', { validator: { $and: [{ b: { $gt: 0 } }, { a: { $lt: 10 } }] } });
  const and = writeError(await db.command({ insert: 't6', documents: [{ _id: 1, a: 11, b: 2 }] }));
  expect(and.errInfo.details).toEqual({
    operatorName: '$and',
    clausesNotSatisfied: [{ index: 1, details: { operatorName: '$lt', specifiedAs: { a: { $lt: 10 } }, reason: 'comparison failed', consideredValue: 11 } }],
  });
  await db.createCollection('t7', { validator: { $or: [{ a: { $lt: 10 } }, { a: { $gt: 20 } }] } });
  const or = writeError(await db.command({ insert: 't7', documents: [{ _id: 1, a: 15 }] }));
  expect(or.errInfo.details).toEqual({
    operatorName: '$or',
    clausesNotSatisfied: [
      { index: 0, details: { operatorName: '$lt', specifiedAs: { a: { $lt: 10 } }, reason: 'comparison failed', consideredValue: 15 } },
      { index: 1, details: { operatorName: '$gt', specifiedAs: { a: { $gt: 20 } }, reason: 'comparison failed', consideredValue: 15 } },
    ],
  });
});

test('collMod validator, then findOneAndUpdate (crud spec findOneAndUpdate-errorResponse.json)', async () => {
  const coll = db.collection<Loose>('fam');
  await coll.insertOne({ _id: 1, x: 'foo' });
  await db.command({ collMod: 'fam', validator: { x: { $type: 'string' } } });
  const err: MongoServerError = await expectServerError(coll.findOneAndUpdate({ _id: 1 }, { $set: { x: 1 } }), 121);
  expect(err.codeName).toBe('DocumentValidationFailure');
  expect(err.errInfo).toEqual({
    failingDocumentId: 1,
    details: { operatorName: '$type', specifiedAs: { x: { $type: 'string' } }, reason: 'type did not match', consideredValue: 1, consideredType: 'int' },
  });
  expect(await coll.findOne({ _id: 1 })).toEqual({ _id: 1, x: 'foo' });
  const infos = await db.listCollections({ name: 'fam' }, { nameOnly: false }).toArray();
  expect(infos[0].options).toEqual({ validator: { x: { $type: 'string' } } });
});

test('updates, replacements and upserts are validated; bypassDocumentValidation skips it', async () => {
  const coll = db.collection<Loose>('upd');
  await coll.insertOne({ _id: 1, n: 5 });
  await db.command({ collMod: 'upd', validator: { n: { $gte: 0 } } });
  const upd = writeError(await db.command({ update: 'upd', updates: [{ q: { _id: 1 }, u: { $set: { n: -1 } } }] }));
  expect(upd).toMatchObject({ index: 0, code: 121, errInfo: { failingDocumentId: 1, details: { operatorName: '$gte', reason: 'comparison failed', consideredValue: -1 } } });
  const repl = writeError(await db.command({ update: 'upd', updates: [{ q: { _id: 1 }, u: { m: 1 } }] }));
  expect(repl.errInfo.details).toEqual({ operatorName: '$gte', specifiedAs: { n: { $gte: 0 } }, reason: 'field was missing' });
  const ups = writeError(await db.command({ update: 'upd', updates: [{ q: { _id: 2 }, u: { $set: { n: -3 } }, upsert: true }] }));
  expect(ups.errInfo.failingDocumentId).toBe(2);
  expect(await coll.find().toArray()).toEqual([{ _id: 1, n: 5 }]);
  const bypass = await db.command({ update: 'upd', updates: [{ q: { _id: 1 }, u: { $set: { n: -1 } } }], bypassDocumentValidation: true });
  expect(bypass).toMatchObject({ n: 1, nModified: 1 });
  await coll.insertOne({ _id: 3, n: -7 }, { bypassDocumentValidation: true });
  expect(await coll.countDocuments({ n: { $lt: 0 } })).toBe(2);
});

test('validationLevel moderate skips updates of documents that were already invalid; off and warn let writes through', async () => {
  const coll = db.collection<Loose>('lvl');
  await coll.insertMany([{ _id: 1, n: 1 }, { _id: 2, n: -1 }]);
  await db.command({ collMod: 'lvl', validator: { n: { $gte: 0 } }, validationLevel: 'moderate' });
  // _id 2 was invalid: not checked. _id 1 was valid: checked.
  expect((await db.command({ update: 'lvl', updates: [{ q: { _id: 2 }, u: { $set: { n: -2 } } }] })).nModified).toBe(1);
  expect(writeError(await db.command({ update: 'lvl', updates: [{ q: { _id: 1 }, u: { $set: { n: -2 } } }] })).code).toBe(121);
  // Inserts are checked under moderate.
  expect(writeError(await db.command({ insert: 'lvl', documents: [{ _id: 3, n: -1 }] })).code).toBe(121);
  await db.command({ collMod: 'lvl', validationAction: 'warn' });
  expect((await db.command({ insert: 'lvl', documents: [{ _id: 4, n: -1 }] })).n).toBe(1);
  await db.command({ collMod: 'lvl', validationAction: 'error', validationLevel: 'off' });
  expect((await db.command({ insert: 'lvl', documents: [{ _id: 5, n: -1 }] })).n).toBe(1);
  const infos = await db.listCollections({ name: 'lvl' }, { nameOnly: false }).toArray();
  expect(infos[0].options).toEqual({ validator: { n: { $gte: 0 } }, validationLevel: 'off', validationAction: 'error' });
});

test('validators using operators whose details are not implemented are refused when set', async () => {
  const js = await expectServerError(db.createCollection('js', { validator: { $jsonSchema: { required: ['a'] } } }), 238);
  expect(js.message).toContain('$jsonSchema');
  const regex = await expectServerError(db.command({ create: 'rx', validator: { a: { $regex: '^x' } } }), 238);
  expect(regex.message).toContain('$regex');
  const expr = await expectServerError(db.command({ create: 'ex', validator: { $expr: { $eq: ['$a', 1] } } }), 238);
  expect(expr.message).toContain('$expr');
  await db.createCollection('later');
  const not = await expectServerError(db.command({ collMod: 'later', validator: { a: { $not: { $gt: 1 } } } }), 238);
  expect(not.message).toContain('$not');
  expect(await db.listCollections({ name: { $in: ['js', 'rx', 'ex'] } }).toArray()).toEqual([]);
});
