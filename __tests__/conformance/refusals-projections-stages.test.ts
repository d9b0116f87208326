/**
 * Projections that mix inclusion and exclusion, and aggregation stages mongod refuses when it parses
 * them ($group without _id), on find, findAndModify and aggregate; the valid shapes still project.
 *
 * Sources:
 *  - projection_ast::parse (src/mongo/db/query/projection_parser.cpp, re-read): the first inclusion
 *    or exclusion other than a top-level _id fixes the type; parseInclusion 31253 "Cannot do
 *    inclusion on field <name> in exclusion projection", parseExclusion 31254 "Cannot do exclusion on
 *    field <name> in inclusion projection" (<name> the element's own name: a sub-projection's inner
 *    field), attemptToParseGenericExpression 31252 "Cannot use expression other than $meta in
 *    exclusion projection", parseLiteral 31310 "Cannot use an expression <element> in an exclusion
 *    projection"; $slice/$elemMatch (find) leave the type open; in aggregation, $elemMatch is
 *    InvalidPipelineOperator "Cannot use $elemMatch in this context". mongod answers quoted in the
 *    wild: "Cannot do inclusion on field by in exclusion projection", code 31253, Location31253.
 *  - DocumentSourceGroupBase::initializeFromBson (src/mongo/db/pipeline/document_source_group_base.cpp):
 *    after the accumulators, 15955 "a group specification must include an _id" (mongod's answer
 *    quoted in the wild: "'errmsg': 'a group specification must include an _id', 'code': 15955,
 *    'codeName': 'Location15955'").
 */
import type { Db, Document, MongoClient } from 'mongodb';
import { expectRefusal, openClient, uniqueDbName } from './support/server';

const dbName = uniqueDbName('conf_refuse_proj');
let client: MongoClient;
let db: Db;

beforeAll(async () => {
  client = await openClient();
  db = client.db(dbName);
  await db.collection('c').insertMany([{ _id: 1, a: 1, b: 2, n: { x: 1, y: 2 }, arr: [1, 2, 3] }] as Document[]);
});

afterAll(async () => {
  await db.dropDatabase();
  await client.close();
});

const REFUSED: Array<[string, Document, { code: number; codeName: string; errmsg: string }]> = [
  ['exclusion after inclusion', { a: 1, b: 0 }, { code: 31254, codeName: 'Location31254', errmsg: 'Cannot do exclusion on field b in inclusion projection' }],
  ['inclusion after exclusion', { a: 0, b: 1 }, { code: 31253, codeName: 'Location31253', errmsg: 'Cannot do inclusion on field b in exclusion projection' }],
  ['true after false', { a: false, b: true }, { code: 31253, codeName: 'Location31253', errmsg: 'Cannot do inclusion on field b in exclusion projection' }],
  ['a dotted exclusion after an inclusion', { a: 1, 'n.x': 0 }, { code: 31254, codeName: 'Location31254', errmsg: 'Cannot do exclusion on field n.x in inclusion projection' }],
  ['inside a sub-projection (the inner name)', { n: { x: 1, y: 0 } }, { code: 31254, codeName: 'Location31254', errmsg: 'Cannot do exclusion on field y in inclusion projection' }],
  ['_id.x is not the top-level _id', { a: 1, '_id.x': 0 }, { code: 31254, codeName: 'Location31254', errmsg: 'Cannot do exclusion on field _id.x in inclusion projection' }],
  ['an expression in an exclusion projection', { a: 0, c: { $add: [1, 2] } }, { code: 31252, codeName: 'Location31252', errmsg: 'Cannot use expression other than $meta in exclusion projection' }],
  ['a literal in an exclusion projection', { a: 0, c: 'x' }, { code: 31310, codeName: 'Location31310', errmsg: 'Cannot use an expression c: "x" in an exclusion projection' }],
];

describe('mixed projections', () => {
  test.each(REFUSED)('find: %s (an empty result too)', async (_what, projection, expected) => {
    await expectRefusal(db.command({ find: 'c', projection }), expected);
    await expectRefusal(db.command({ find: 'c', filter: { _id: 'none' }, projection }), expected);
  });

  test.each(REFUSED)('findAndModify fields: %s, nothing written (no match too)', async (_what, fields, expected) => {
    await expectRefusal(db.command({ findAndModify: 'c', query: { _id: 1 }, update: { $set: { z: 1 } }, fields }), expected);
    await expectRefusal(db.command({ findAndModify: 'c', query: { _id: 'none' }, remove: true, fields }), expected);
    expect(await db.collection('c').findOne({ _id: 1 as never })).not.toHaveProperty('z');
  });

  test.each(REFUSED.filter(([what]) => !what.startsWith('_id')))('$project: %s', async (_what, projection, expected) => {
    await expectRefusal(db.command({ aggregate: 'c', pipeline: [{ $project: projection }], cursor: {} }), expected);
  });

  test('$elemMatch in a $project: InvalidPipelineOperator', async () => {
    await expectRefusal(db.command({ aggregate: 'c', pipeline: [{ $project: { arr: { $elemMatch: { $gt: 1 } } } }], cursor: {} }), {
      code: 168,
      codeName: 'InvalidPipelineOperator',
      errmsg: 'Cannot use $elemMatch in this context',
    });
  });

  test('what mongod accepts: _id with either type, $slice and $elemMatch with either type', async () => {
    const find = async (projection: Document): Promise<Document[]> => ((await db.command({ find: 'c', projection })).cursor as Document).firstBatch as Document[];
    expect(await find({ _id: 0, a: 1 })).toEqual([{ a: 1 }]);
    expect(await find({ a: 0, _id: 1 })).toEqual([{ _id: 1, b: 2, n: { x: 1, y: 2 }, arr: [1, 2, 3] }]);
    expect(await find({ a: 0, arr: { $slice: 1 } })).toEqual([{ _id: 1, b: 2, n: { x: 1, y: 2 }, arr: [1] }]);
    expect(await find({ a: 1, arr: { $elemMatch: { $gt: 1 } } })).toEqual([{ _id: 1, a: 1, arr: [2] }]);
    expect(await find({ n: { x: 1 }, _id: 0 })).toEqual([{ n: { x: 1 } }]);
  });
});

describe('$group without _id', () => {
  test('15955, on an empty collection too', async () => {
    const expected = { code: 15955, codeName: 'Location15955', errmsg: 'a group specification must include an _id' };
    await expectRefusal(db.command({ aggregate: 'c', pipeline: [{ $group: { n: { $sum: 1 } } }], cursor: {} }), expected);
    await expectRefusal(db.command({ aggregate: 'missing', pipeline: [{ $match: { a: 1 } }, { $group: { total: { $sum: '$a' }, most: { $max: '$a' } } }], cursor: {} }), expected);
    await expectRefusal(db.command({ aggregate: 'c', pipeline: [{ $group: {} }], cursor: {} }), expected);
  });

  test('with _id it groups', async () => {
    const r = await db.command({ aggregate: 'c', pipeline: [{ $group: { _id: null, n: { $sum: 1 } } }], cursor: {} });
    expect((r.cursor as Document).firstBatch).toEqual([{ _id: null, n: 1 }]);
  });
});
