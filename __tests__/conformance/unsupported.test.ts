/**
 * What a server does not know fails loudly with mongod's documented codes: unknown commands,
 * pipeline stages, query operators, expression operators and update modifiers.
 *
 * Sources ((*): location or wording recalled, not re-read for this audit):
 *  - "no such command: '<name>'", CommandNotFound 59: the command dispatcher
 *    (src/mongo/db/service_entry_point_common.cpp) (*); error_codes.yml.
 *  - "Unrecognized pipeline stage name: '<name>'", 40324: LiteParsedDocumentSource::parse
 *    (src/mongo/db/pipeline/lite_parsed_document_source.cpp, re-read; it runs before
 *    DocumentSource::parse, whose own check is 16436).
 *  - "unknown operator: <op>" and "unknown top level operator: <op>" (newer servers append a hint
 *    about $getField), BadValue: src/mongo/db/matcher/expression_parser.cpp.
 *  - "Unrecognized expression '<op>'", InvalidPipelineOperator 168: Expression::parseExpression
 *    (src/mongo/db/pipeline/expression.cpp) (*).
 *  - "Unknown modifier: <op>", FailedToParse 9: src/mongo/db/update/modifier_table.cpp /
 *    update_object_node.cpp (*).
 */
import type { Db, Document, MongoClient } from 'mongodb';
import { expectServerError, openClient, uniqueDbName, type Loose } from './support/server';

const dbName = uniqueDbName('conf_unsupported');
let client: MongoClient;
let db: Db;

beforeAll(async () => {
  client = await openClient();
  db = client.db(dbName);
  await db.collection<Loose>('c').insertOne({ _id: 1, a: 1 });
});

afterAll(async () => {
  await db.dropDatabase();
  await client.close();
});

test('an unknown command answers ok: 0 with CommandNotFound (59)', async () => {
  const error = await expectServerError(db.command({ mplNoSuchCommand: 1 }), 59);
  expect(error.codeName).toBe('CommandNotFound');
  expect(error.message).toContain("no such command: 'mplNoSuchCommand'");
  expect(error.errorResponse.ok).toBe(0);
  const onAdmin = await expectServerError(client.db('admin').command({ mplAnotherUnknown: 1, with: 'args' }), 59);
  expect(onAdmin.message).toContain('mplAnotherUnknown');
});

test('an unknown aggregation stage fails with 40324', async () => {
  const error = await expectServerError(db.collection('c').aggregate([{ $mplBogusStage: {} }]).toArray(), 40324);
  expect(error.message).toContain('Unrecognized pipeline stage name');
  expect(error.message).toContain('$mplBogusStage');
});

// mongod refuses a $changeStream that is not the first stage (Pipeline::validateCommon, 40602 for
// kFirst stages, src/mongo/db/pipeline/pipeline.cpp); which expanded stage meets the check, and so
// the errmsg, was not sourced, so the emulator refuses it loudly (NotImplemented) rather than guess.
test('a $changeStream after the first stage is refused (NotImplemented, not a guessed mongod error)', async () => {
  const error = await expectServerError(db.collection('c').aggregate([{ $match: {} }, { $changeStream: {} }]).toArray(), 238);
  expect(error.message).toContain('$changeStream after the first stage');
});

// LiteParsedDocumentSource::parse (src/mongo/db/pipeline/lite_parsed_document_source.cpp).
test('a stage object with two fields fails with 40323', async () => {
  const error = await expectServerError(db.collection('c').aggregate([{ $match: {}, $limit: 1 }]).toArray(), 40323);
  expect(error.message).toContain('A pipeline stage specification object must contain exactly one field.');
});

test('an unknown query operator fails with BadValue (2)', async () => {
  const error = await expectServerError(db.collection('c').find({ a: { $mplBogus: 1 } } as Document).toArray(), 2);
  expect(error.message).toContain('unknown operator: $mplBogus');
  const top = await expectServerError(db.collection('c').find({ $mplTop: 1 } as Document).toArray(), 2);
  expect(top.message).toContain('unknown top level operator: $mplTop');
  // The same through count and delete.
  await expectServerError(db.collection('c').countDocuments({ a: { $mplBogus: 1 } } as Document), 2);
  await expectServerError(db.collection('c').deleteMany({ a: { $mplBogus: 1 } } as Document), 2);
  expect(await db.collection('c').countDocuments()).toBe(1);
});

test('an unknown expression operator fails with InvalidPipelineOperator (168)', async () => {
  const error = await expectServerError(db.collection('c').find({ $expr: { $mplExpr: [1] } } as Document).toArray(), 168);
  expect(error.message).toContain("Unrecognized expression '$mplExpr'");
  await expectServerError(db.collection('c').updateOne({ _id: 1 } as Document, [{ $set: { b: { $mplExpr: 1 } } }]), 168);
  expect(await db.collection('c').findOne({ _id: 1 } as Document)).toEqual({ _id: 1, a: 1 });
});

test('an unknown update modifier fails with FailedToParse (9) and changes nothing', async () => {
  const error = await expectServerError(db.collection('c').updateOne({ _id: 1 } as Document, { $mplModifier: { a: 2 } } as Document), 9);
  expect(error.message).toContain('Unknown modifier: $mplModifier');
  expect(await db.collection('c').findOne({ _id: 1 } as Document)).toEqual({ _id: 1, a: 1 });
});
