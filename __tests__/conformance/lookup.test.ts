/**
 * `$lookup` as mongod runs it (test-backend/emulator/lookup.ts).
 *
 * Sources (mongodb/mongo):
 *  - jstests/aggregation/sources/lookup/lookup.js, "Basic functionality": a `from` document is
 *    added when `a == b`, where nonexistent fields are treated as null; a nonexistent localField
 *    is treated as null;
 *  - src/mongo/db/pipeline/document_path_support.cpp `visitAllValuesAtPath` (arrays along the
 *    local path are expanded one level) and document_source_lookup.cpp `makeMatchStageFromInput`
 *    (`$eq` / `$in` query on the foreign field);
 *  - document_source_lookup.cpp `createFromBson` / `LiteParsed::parse` (the parse errors and
 *    their order), the 5.0 concise syntax (localField/foreignField plus pipeline: the pipeline runs
 *    on the joined documents), `resolveLetVariables` (let evaluated per input document) and
 *    `copyForSubPipeline` (the sub-pipeline's `$$NOW` is the command's);
 *  - src/mongo/db/pipeline/variable_validation.cpp via `validateNameForUserWrite` (let names).
 */
import type { Db, Document, MongoClient } from 'mongodb';
import { expectServerError, openClient, uniqueDbName } from './support/server';

const dbName = uniqueDbName('conf_lookup');
let client: MongoClient;
let db: Db;

beforeAll(async () => {
  client = await openClient();
  db = client.db(dbName);
  await db.collection('local').insertMany([{ _id: 0, a: 1 }, { _id: 1, a: null }, { _id: 2 }] as never[]);
  await db.collection('from').insertMany([{ _id: 0, b: 1 }, { _id: 1, b: null }, { _id: 2 }] as never[]);
});

afterAll(async () => {
  await db.dropDatabase();
  await client.close();
});

const byId = (docs: Document[]): Document[] => [...docs].sort((x, y) => Number(x._id) - Number(y._id));

test('equality join: missing and null match each other (lookup.js, basic functionality)', async () => {
  const out = await db.collection('local').aggregate([{ $lookup: { localField: 'a', foreignField: 'b', from: 'from', as: 'same' } }]).toArray();
  expect(byId(out)).toEqual([
    { _id: 0, a: 1, same: [{ _id: 0, b: 1 }] },
    { _id: 1, a: null, same: [{ _id: 1, b: null }, { _id: 2 }] },
    { _id: 2, same: [{ _id: 1, b: null }, { _id: 2 }] },
  ]);
});

test('a nonexistent localField is treated as null (lookup.js)', async () => {
  const out = await db.collection('local').aggregate([{ $lookup: { localField: 'nonexistent', foreignField: 'b', from: 'from', as: 'same' } }]).toArray();
  expect(byId(out).map((d) => d.same)).toEqual([
    [{ _id: 1, b: null }, { _id: 2 }],
    [{ _id: 1, b: null }, { _id: 2 }],
    [{ _id: 1, b: null }, { _id: 2 }],
  ]);
});

test('an array local value joins on each element, with query equality across number types (visitAllValuesAtPath, $in)', async () => {
  await db.collection('arr_local').insertOne({ _id: 'x', ids: [1, 3], nested: [{ k: 2 }, { k: [3] }] } as never);
  await db.collection('arr_from').insertMany([{ _id: 1 }, { _id: 2.0 }, { _id: 3 }, { _id: 4 }] as never[]);
  const [doc] = await db
    .collection('arr_local')
    .aggregate([
      { $lookup: { from: 'arr_from', localField: 'ids', foreignField: '_id', as: 'byIds' } },
      { $lookup: { from: 'arr_from', localField: 'nested.k', foreignField: '_id', as: 'byNested' } },
    ])
    .toArray();
  expect(byId(doc.byIds)).toEqual([{ _id: 1 }, { _id: 3 }]);
  expect(byId(doc.byNested)).toEqual([{ _id: 2 }, { _id: 3 }]);
});

test('concise syntax: the pipeline runs on the joined documents only, with the command\'s $$NOW', async () => {
  const locks = db.collection('jobs.locks');
  const past = new Date(Date.now() - 60_000);
  const future = new Date(Date.now() + 60_000);
  await db.collection('jobs').insertMany([{ _id: 1, s: 'q' }, { _id: 2, s: 'q' }, { _id: 3, s: 'q' }, { _id: 4, s: 'done' }] as never[]);
  await locks.insertMany([{ _id: 1, expiresAt: future }, { _id: 2, expiresAt: past }, { _id: 99, expiresAt: future }] as never[]);
  // The shape lockNext sends: the anti-join on unexpired lock records.
  const free = await db
    .collection('jobs')
    .aggregate([
      { $match: { s: 'q' } },
      { $sort: { _id: 1 } },
      { $lookup: { from: 'jobs.locks', localField: '_id', foreignField: '_id', pipeline: [{ $match: { $expr: { $gt: ['$expiresAt', '$$NOW'] } } }, { $project: { _id: 1 } }], as: 'lock' } },
      { $match: { lock: { $size: 0 } } },
      { $limit: 10 },
      { $project: { _id: 1 } },
    ])
    .toArray();
  expect(free).toEqual([{ _id: 2 }, { _id: 3 }]);
  // Without the join fields the same pipeline sees every foreign document (record 99 included).
  const [all] = await db
    .collection('jobs')
    .aggregate([{ $match: { _id: 3 } }, { $lookup: { from: 'jobs.locks', pipeline: [{ $match: { $expr: { $gt: ['$expiresAt', '$$NOW'] } } }, { $project: { _id: 1 } }], as: 'held' } }])
    .toArray();
  expect(byId(all.held)).toEqual([{ _id: 1 }, { _id: 99 }]);
  // One $$NOW for the command: the sub-pipeline's equals the top level's.
  const [withNow] = await db
    .collection('jobs')
    .aggregate([{ $match: { _id: 1 } }, { $addFields: { top: '$$NOW' } }, { $lookup: { from: 'jobs.locks', localField: '_id', foreignField: '_id', pipeline: [{ $project: { _id: 0, inner: '$$NOW' } }], as: 'sub' } }])
    .toArray();
  expect(withNow.sub).toEqual([{ inner: withNow.top }]);
});

test('a plain value in a sub-pipeline $match is not a variable: "$$NOW" there is the string', async () => {
  await db.collection('strings').insertMany([{ _id: 1, v: '$$NOW' }, { _id: 2, v: 'other' }] as never[]);
  const [doc] = await db
    .collection('local')
    .aggregate([{ $match: { _id: 0 } }, { $lookup: { from: 'strings', pipeline: [{ $match: { v: '$$NOW' } }], as: 'hit' } }])
    .toArray();
  expect(doc.hit).toEqual([{ _id: 1, v: '$$NOW' }]);
});

test('let variables are evaluated against each input document', async () => {
  const out = await db
    .collection('local')
    .aggregate([
      { $match: { _id: { $in: [0, 1] } } },
      { $lookup: { from: 'from', let: { want: '$_id' }, pipeline: [{ $match: { $expr: { $eq: ['$_id', '$$want'] } } }, { $project: { _id: 1 } }], as: 'same' } },
    ])
    .toArray();
  expect(byId(out).map((d) => d.same)).toEqual([[{ _id: 0 }], [{ _id: 1 }]]);
});

describe('parse errors, as createFromBson / LiteParsed::parse answer them', () => {
  const run = (lookup: unknown) => db.command({ aggregate: 'local', pipeline: [{ $lookup: lookup }], cursor: {} });

  test('a specification that is not an object', async () => {
    const error = await expectServerError(run('from'), 9);
    expect(error.message).toBe('the $lookup stage specification must be an object, but found string');
  });

  test('a from that is neither a string nor an object', async () => {
    const error = await expectServerError(run({ from: 5, localField: 'a', foreignField: 'b', as: 'x' }), 9);
    expect(error.message).toBe("$lookup 'from' field must be a string, but found int");
  });

  test('from in another database', async () => {
    const error = await expectServerError(run({ from: { db: 'other', coll: 'c' }, localField: 'a', foreignField: 'b', as: 'x' }), 9);
    expect(error.message).toBe('$lookup with syntax {from: {db:<>, coll:<>},..} is not supported for db: other and coll: c');
  });

  test('an unknown argument', async () => {
    const error = await expectServerError(run({ from: 'from', localField: 'a', foreignField: 'b', as: 'x', extra: 'y' }), 9);
    expect(error.message).toBe('unknown argument to $lookup: extra');
  });

  test('no as', async () => {
    const error = await expectServerError(run({ from: 'from', localField: 'a', foreignField: 'b' }), 9);
    expect(error.message).toBe("must specify 'as' field for a $lookup");
  });

  test('a pipeline with only one of localField and foreignField', async () => {
    const error = await expectServerError(run({ from: 'from', localField: 'a', pipeline: [], as: 'x' }), 9);
    expect(error.message).toBe("$lookup requires both or neither of 'localField' and 'foreignField' to be specified");
  });

  test('neither a pipeline nor both join fields', async () => {
    const error = await expectServerError(run({ from: 'from', localField: 'a', as: 'x' }), 9);
    expect(error.message).toBe("$lookup requires either 'pipeline' or both 'localField' and 'foreignField' to be specified");
  });

  test('let without a pipeline', async () => {
    const error = await expectServerError(run({ from: 'from', localField: 'a', foreignField: 'b', let: { v: 1 }, as: 'x' }), 9);
    expect(error.message).toBe("$lookup with a 'let' argument must also specify 'pipeline'");
  });

  test('let variable names follow the user-variable rules', async () => {
    const upper = await expectServerError(run({ from: 'from', let: { Bad: 1 }, pipeline: [], as: 'x' }), 16867);
    expect(upper.message).toBe("'Bad' starts with an invalid character for a user variable name");
    const dash = await expectServerError(run({ from: 'from', let: { 'a-b': 1 }, pipeline: [], as: 'x' }), 16868);
    expect(dash.message).toBe("'a-b' contains an invalid character for a variable name: '-'");
  });

  test('what the emulator does not implement is refused, never answered', async () => {
    await expectServerError(run({ pipeline: [{ $documents: [{ a: 1 }] }], as: 'x' }), 238);
    await expectServerError(run({ from: 'from', localField: 'a', foreignField: 'b', as: 'x.y' }), 238);
    await expectServerError(run({ from: 'from', localField: '$a', foreignField: 'b', as: 'x' }), 238);
    await expectServerError(run({ from: 'from', localField: 'a', foreignField: 'b', as: 5 }), 238);
    await expectServerError(run({ from: 'from', let: 5, pipeline: [], as: 'x' }), 238);
  });
});
