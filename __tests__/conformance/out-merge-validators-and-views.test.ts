/**
 * $out/$merge against validators and views, and renames of views (found by review 8). Each test
 * states mongod's answer and the source it comes from (mongodb/mongo unless noted).
 */
import type { Db, MongoClient } from 'mongodb';
import { expectServerError, openClient, uniqueDbName, type Loose } from './support/server';

const dbName = uniqueDbName('attack8');
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

const ids = async (name: string): Promise<unknown[]> => (await db.collection<Loose>(name).find({}).sort({ _id: 1 }).toArray()).map((d) => d._id);

// jstests/core/doc_validation/bypass_doc_validation.js: "Test the aggregation command with a $out
// stage": the output collection has a validator; with bypassDocumentValidation: false the
// aggregate fails with DocumentValidationFailure and the output holds nothing.
test('$out into a collection with a validator: an invalid document fails with 121 and nothing is written', async () => {
  await db.collection<Loose>('outsrc').insertMany([{ _id: 1 }, { _id: 2 }]);
  await db.createCollection('outval', { validator: { a: { $exists: true } } });
  const err = await expectServerError(db.collection('outsrc').aggregate([{ $out: 'outval' }]).toArray(), 121);
  expect(err.codeName).toBe('DocumentValidationFailure');
  expect(await db.collection('outval').countDocuments()).toBe(0);
  // and with bypassDocumentValidation: true it works (same jstest).
  await db.collection('outsrc').aggregate([{ $out: 'outval' }], { bypassDocumentValidation: true }).toArray();
  expect(await ids('outval')).toEqual([1, 2]);
});

// jstests/aggregation/sources/merge/bypass_doc_validation.js testBypassDocValidationTrue: the flag
// is passed through to $merge's writes on the output collection.
test('$merge with bypassDocumentValidation: true writes documents the target validator refuses', async () => {
  await db.collection<Loose>('mrgsrc').insertOne({ _id: 0, a: 1 });
  await db.createCollection('mrgval', { validator: { a: 2 } });
  await db.collection('mrgsrc').aggregate([{ $merge: 'mrgval' }], { bypassDocumentValidation: true }).toArray();
  expect(await db.collection('mrgval').find().toArray()).toEqual([{ _id: 0, a: 1 }]);
  await db.collection('mrgsrc').aggregate([{ $replaceRoot: { newRoot: { _id: 1, a: 4 } } }, { $merge: { into: 'mrgval', whenMatched: 'fail', whenNotMatched: 'insert' } }], { bypassDocumentValidation: true }).toArray();
  expect(await ids('mrgval')).toEqual([0, 1]);
});

// jstests/core/views/views_aggregation.js testAggStagesWritingToViews: $out and $merge (every
// mode) into a view namespace fail with CommandNotSupportedOnView (166).
test('$out into a view fails with 166 and the view stays a view', async () => {
  await db.collection<Loose>('vsrc').insertMany([{ _id: 1, x: 1 }, { _id: 2, x: 2 }]);
  await db.command({ create: 'vout', viewOn: 'vsrc', pipeline: [{ $match: { x: 1 } }] });
  await expectServerError(db.collection('vsrc').aggregate([{ $out: 'vout' }]).toArray(), 166);
  const infos = await db.listCollections({ name: 'vout' }).toArray();
  expect(infos.map((i) => i.type)).toEqual(['view']);
  expect(await ids('vout')).toEqual([1]);
});

test.each([
  ['merge', 'insert'],
  ['replace', 'insert'],
  ['keepExisting', 'insert'],
  ['fail', 'insert'],
  ['merge', 'discard'],
])('$merge into a view (whenMatched %s, whenNotMatched %s) fails with 166 and creates no collection', async (whenMatched, whenNotMatched) => {
  const view = `vmerge_${whenMatched}_${whenNotMatched}`;
  await db.collection<Loose>('vsrc2').insertMany([{ _id: 1, x: 1 }, { _id: 2, x: 2 }]).catch(() => undefined);
  await db.command({ create: view, viewOn: 'vsrc2', pipeline: [] });
  await expectServerError(db.collection('vsrc2').aggregate([{ $merge: { into: view, whenMatched, whenNotMatched } }]).toArray(), 166);
  const infos = await db.listCollections({ name: view }).toArray();
  expect(infos.map((i) => i.type)).toEqual(['view']);
});

// src/mongo/db/catalog/rename_collection.cpp checkSourceAndTargetNamespaces: a view as the source
// is CommandNotSupportedOnView "cannot rename view: <ns>"; a view as the target is
// NamespaceExists "a view already exists with that name: <ns>".
test('renameCollection of a view: 166 "cannot rename view: <ns>"', async () => {
  await db.collection<Loose>('rsrc').insertOne({ _id: 1 });
  await db.command({ create: 'rview', viewOn: 'rsrc', pipeline: [] });
  const err = await expectServerError(client.db('admin').command({ renameCollection: `${dbName}.rview`, to: `${dbName}.rview2` }), 166);
  expect(err.message).toBe(`cannot rename view: ${dbName}.rview`);
});

test('renameCollection onto a view: 48 "a view already exists with that name: <ns>"', async () => {
  await db.collection<Loose>('rsrc3').insertOne({ _id: 1 });
  await db.command({ create: 'rview3', viewOn: 'rsrc', pipeline: [] });
  const err = await expectServerError(client.db('admin').command({ renameCollection: `${dbName}.rsrc3`, to: `${dbName}.rview3`, dropTarget: true }), 48);
  expect(err.message).toBe(`a view already exists with that name: ${dbName}.rview3`);
  expect(await ids('rsrc3')).toEqual([1]);
});

// src/mongo/db/pipeline/document_source_writer.h DocumentSourceWriter::doGetNext: every input
// document goes through makeBatchObject (DocumentSourceMerge: extractMergeOnFieldsFromDoc, which
// raises 51132 for a nullish 'on' value) before the batch is spilled, so an error on a later
// document of the first batch leaves the target untouched.
test('$merge: a nullish on-field in a later document fails 51132 before anything is written', async () => {
  await db.collection<Loose>('nsrc').insertMany([{ _id: 1, k: 1 }, { _id: 2, k: 2 }, { _id: 3 }]);
  await db.collection('ntgt').createIndex({ k: 1 }, { unique: true });
  await expectServerError(db.collection('nsrc').aggregate([{ $sort: { _id: 1 } }, { $merge: { into: 'ntgt', on: 'k' } }]).toArray(), 51132);
  expect(await db.collection('ntgt').countDocuments()).toBe(0);
});

// document_source_writer.h makeInsertCommand: the batched insert of $merge whenMatched: fail
// (makeInsertStrategy) is `setOrdered(false)`: every document of the batch is attempted, the
// first error reported after. So a duplicate on the first document does not stop the second.
test('$merge whenMatched fail: the batch is unordered, a later new document is inserted despite the DuplicateKey', async () => {
  await db.collection<Loose>('usrc').insertMany([{ _id: 1, v: 'new' }, { _id: 2, v: 'new' }]);
  await db.collection<Loose>('utgt').insertOne({ _id: 1, v: 'old' });
  await expectServerError(db.collection('usrc').aggregate([{ $sort: { _id: 1 } }, { $merge: { into: 'utgt', whenMatched: 'fail', whenNotMatched: 'insert' } }]).toArray(), 11000);
  expect(await db.collection('utgt').find().sort({ _id: 1 }).toArray()).toEqual([{ _id: 1, v: 'old' }, { _id: 2, v: 'new' }]);
});

// merge_processor.cpp / document_source_merge.cpp makeUpdateCommandGenerator: the batched update of
// whenMatched merge/replace/keepExisting/pipeline is `setOrdered(false)` as well.
test('$merge whenMatched merge: the batch is unordered, a later document is upserted despite a DuplicateKey on a unique index', async () => {
  await db.collection<Loose>('usrc2').insertMany([{ _id: 1, u: 'dup' }, { _id: 2, u: 'fresh' }]);
  await db.collection('utgt2').createIndex({ u: 1 }, { unique: true });
  await db.collection<Loose>('utgt2').insertOne({ _id: 9, u: 'dup' });
  await expectServerError(db.collection('usrc2').aggregate([{ $sort: { _id: 1 } }, { $merge: { into: 'utgt2', whenMatched: 'merge', whenNotMatched: 'insert' } }]).toArray(), 11000);
  expect(await ids('utgt2')).toEqual([2, 9]);
});

// Same writer: $out's inserts into the temporary collection are unordered too, but the whole $out
// fails and the target is untouched (held: checked for contrast).
test('$out with a duplicate _id fails with 11000 and leaves the target untouched', async () => {
  await db.collection<Loose>('dsrc').insertMany([{ _id: 1, a: 1 }, { _id: 2, a: 1 }]);
  await db.collection<Loose>('dtgt').insertOne({ _id: 'keep' });
  await expectServerError(db.collection('dsrc').aggregate([{ $project: { _id: '$a' } }, { $out: 'dtgt' }]).toArray(), 11000);
  expect(await ids('dtgt')).toEqual(['keep']);
});
