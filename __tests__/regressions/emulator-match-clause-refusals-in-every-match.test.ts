/**
 * The emulator "may refuse; it must never answer wrongly" (test-backend/emulator/FIDELITY.md):
 * refuse what mongod refuses with mongod's code, or NotImplemented (238).
 *
 * mongod refuses `$where`, `$near` and `$nearSphere` in EVERY aggregation `$match`, wherever it
 * sits: `DocumentSourceMatch` runs `uassertNoDisallowedClauses` on its expression
 * (src/mongo/db/pipeline/document_source_match.cpp: 16395 "$where is not allowed inside of a $match
 * aggregation expression", 16424 "$near is not allowed inside of a $match aggregation expression";
 * docs/mongodb-compatibility.md R33). The emulator refuses them with NotImplemented only in a
 * pipeline's first `$match` (the one it runs through its query engine, commands/crud.ts
 * `aggregate`); in a `$lookup` sub-pipeline (the stage lockNext's candidate read is built on), a
 * later `$match`, `$facet` or `$unionWith`, mingo parses the `$match` itself and answers BadValue
 * (2) with mingo's own messages ("$where only accepts a Function objects", "unknown operator:
 * $near"): codes and messages mongod never gives for these.
 */
import type { Db, Document, MongoClient } from 'mongodb';
import { openClient, uniqueDbName } from '../conformance/support/server';

const dbName = uniqueDbName('lookup_sub_refusals');
let client: MongoClient;
let db: Db;

beforeAll(async () => {
  client = await openClient();
  db = client.db(dbName);
  await db.collection('local').insertMany([{ _id: 1, a: 1 }] as never[]);
  await db.collection('foreign').insertMany([{ _id: 1, b: 1 }] as never[]);
});
afterAll(async () => {
  await db.dropDatabase();
  await client.close();
});

const where = { $where: 'true' };
const near = { loc: { $near: [0, 0] } };

const nearSphere = { loc: { $nearSphere: [0, 0] } };
const MESSAGES: Record<number, string> = {
  16395: '$where is not allowed inside of a $match aggregation expression',
  16424: '$near is not allowed inside of a $match aggregation expression',
  16426: '$nearSphere is not allowed inside of a $match aggregation expression',
};

const shapes: [string, Document[], number][] = [
  ['$where in the first $match', [{ $match: where }], 16395],
  ['$where nested in a first $match ($and)', [{ $match: { $and: [{ a: 1 }, where] } }], 16395],
  ['$nearSphere in a $lookup sub-pipeline', [{ $lookup: { from: 'foreign', pipeline: [{ $match: nearSphere }], as: 'x' } }], 16426],
  ['$where in a $lookup inside a $lookup', [{ $lookup: { from: 'foreign', pipeline: [{ $lookup: { from: 'local', pipeline: [{ $match: where }], as: 'y' } }], as: 'x' } }], 16395],
  ['$where in a $lookup sub-pipeline', [{ $lookup: { from: 'foreign', pipeline: [{ $match: where }], as: 'x' } }], 16395],
  ['$where in a concise $lookup sub-pipeline', [{ $lookup: { from: 'foreign', localField: '_id', foreignField: '_id', pipeline: [{ $match: where }], as: 'x' } }], 16395],
  ['$near in a $lookup sub-pipeline', [{ $lookup: { from: 'foreign', pipeline: [{ $match: near }], as: 'x' } }], 16424],
  ['$where in a second $match', [{ $match: { a: 1 } }, { $match: where }], 16395],
  ['$where in a $facet', [{ $facet: { f: [{ $match: where }] } }], 16395],
  ['$where in a $unionWith sub-pipeline', [{ $unionWith: { coll: 'foreign', pipeline: [{ $match: where }] } }], 16395],
];

// mongod: DocumentSourceMatch::createFromBson -> uassertNoDisallowedClauses
// (src/mongo/db/pipeline/document_source_match.cpp), recursive, for every $match it parses.
test.each(shapes)('%s: refused with mongod\'s code and errmsg', async (_name, pipeline, mongodCode) => {
  const outcome = await db
    .collection('local')
    .aggregate(pipeline)
    .toArray()
    .then(
      () => 'accepted',
      (error: { code?: number; message?: string }) => ({ code: error.code, message: error.message }),
    );
  expect(outcome).toEqual({ code: mongodCode, message: MESSAGES[mongodCode] });
});
