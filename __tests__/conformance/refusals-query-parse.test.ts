/**
 * Query filters mongod refuses when it parses them, before reading a document: so the refusal is the
 * same on an empty or missing collection, for find, count, delete, update and $match alike.
 *
 * Sources (src/mongo/db/matcher/expression_parser.cpp, read at 4.2-era and 5.0-era commits; the
 * rules are unchanged):
 *  - parseTreeTopLevel: BadValue "$and must be an array", "$and/$or/$nor must be a nonempty array",
 *    "$or/$and/$nor entries need to be full objects".
 *  - parseExpr: BadValue "$expr can only be applied to the top-level document" below the top level
 *    (an $elemMatch object); inside a top-level $and/$or it is at the top level.
 *  - parseType and MatcherTypeSet::parse (src/mongo/db/matcher/matcher_type_set.cpp): "Unknown type
 *    name alias: <s>", "'missing' is not a legal type name...", "Invalid numerical type code: <n>",
 *    TypeMismatch "type must be represented as a number or a string", FailedToParse "<path> must
 *    match at least one type".
 *  - parseSubField / parseRegexDocument: BadValue "$options needs a $regex", "$regex has to be a
 *    string", "$options has to be a string"; the flags by pcre_util::flagsToOptions
 *    (src/mongo/util/pcre_util.cpp; default empty opName, hence the leading space): 51108
 *    " invalid flag in regex options: <c>" (7.0, pcre2; FerretDB's compatibility tests record the same
 *    text from mongod).
 *  - $in / $nin: BadValue "$in needs an array", "cannot nest $ under $in"; $not: "$not needs a regex
 *    or a document", "$not cannot be empty"; $elemMatch: "$elemMatch needs an Object".
 */
import type { Db, Document, MongoClient } from 'mongodb';
import { describeIf, expectRefusal, expectWriteError, openClient, serverIsRelease, uniqueDbName } from './support/server';

const dbName = uniqueDbName('conf_refuse_query');
let client: MongoClient;
let db: Db;

beforeAll(async () => {
  client = await openClient();
  db = client.db(dbName);
  await db.collection('c').insertMany([{ _id: 1, a: 1, s: 'Ab', arr: [{ x: 1 }, { x: 5 }] }, { _id: 2, a: 'x', s: 'b' }] as Document[]);
});

afterAll(async () => {
  await db.dropDatabase();
  await client.close();
});

const badValue = (errmsg: string): { code: number; codeName: string; errmsg: string } => ({ code: 2, codeName: 'BadValue', errmsg });

const REFUSED: Array<[string, Document, { code: number; codeName: string; errmsg: string }]> = [
  ['empty $and', { $and: [] }, badValue('$and/$or/$nor must be a nonempty array')],
  ['empty $or', { $or: [] }, badValue('$and/$or/$nor must be a nonempty array')],
  ['empty $nor', { $nor: [] }, badValue('$and/$or/$nor must be a nonempty array')],
  ['empty $or nested in $and', { $and: [{ a: 1 }, { $or: [] }] }, badValue('$and/$or/$nor must be a nonempty array')],
  ['$and not an array', { $and: { a: 1 } }, badValue('$and must be an array')],
  ['$or not an array', { $or: 1 }, badValue('$or must be an array')],
  ['$nor entry not an object', { $nor: [1] }, badValue('$or/$and/$nor entries need to be full objects')],
  ['unknown $type alias', { a: { $type: 'integer' } }, badValue('Unknown type name alias: integer')],
  ['unknown $type alias in a list', { a: { $type: ['int', 'strng'] } }, badValue('Unknown type name alias: strng')],
  ["$type 'missing'", { a: { $type: 'missing' } }, badValue("'missing' is not a legal type name. To query for non-existence of a field, use {$exists:false}.")],
  ['$type 0', { a: { $type: 0 } }, badValue('Invalid numerical type code: 0. Instead use {$exists:false}.')],
  ['$type 20', { a: { $type: 20 } }, badValue('Invalid numerical type code: 20')],
  ['$type 2.5', { a: { $type: 2.5 } }, badValue('Invalid numerical type code: 2.5')],
  ['$type of a bool', { a: { $type: true } }, { code: 14, codeName: 'TypeMismatch', errmsg: 'type must be represented as a number or a string' }],
  ['$type of an empty list', { a: { $type: [] } }, { code: 9, codeName: 'FailedToParse', errmsg: 'a must match at least one type' }],
  ['$expr in an $elemMatch object', { arr: { $elemMatch: { $expr: { $eq: [1, 1] } } } }, badValue('$expr can only be applied to the top-level document')],
  ['$expr in an $or inside $elemMatch', { arr: { $elemMatch: { $or: [{ $expr: true }] } } }, badValue('$expr can only be applied to the top-level document')],
  ['$options without $regex', { s: { $options: 'i' } }, badValue('$options needs a $regex')],
  ['$regex of a number', { s: { $regex: 1 } }, badValue('$regex has to be a string')],
  ['$options of a number', { s: { $regex: 'a', $options: 1 } }, badValue('$options has to be a string')],
  ['$in of a non-array', { a: { $in: 1 } }, badValue('$in needs an array')],
  ['$nin of a non-array', { a: { $nin: 'x' } }, badValue('$nin needs an array')],
  ['an operator inside $in', { a: { $in: [{ $gt: 1 }] } }, badValue('cannot nest $ under $in')],
  ['$not of a number', { a: { $not: 1 } }, badValue('$not needs a regex or a document')],
  ['$not empty', { a: { $not: {} } }, badValue('$not cannot be empty')],
  ['$elemMatch of a number', { arr: { $elemMatch: 1 } }, badValue('$elemMatch needs an Object')],
];

describe('find refuses, on a missing collection too', () => {
  test.each(REFUSED)('%s', async (_what, filter, expected) => {
    await expectRefusal(db.command({ find: 'c', filter }), expected);
    await expectRefusal(db.command({ find: 'missing', filter }), expected);
  });
});

describe('the same parse refuses count, distinct, delete, update, findAndModify and $match', () => {
  const filter = { $or: [] };
  const expected = badValue('$and/$or/$nor must be a nonempty array');
  test('count and distinct', async () => {
    await expectRefusal(db.command({ count: 'c', query: filter }), expected);
    await expectRefusal(db.command({ distinct: 'c', key: 'a', query: filter }), expected);
  });
  test('aggregate $match (first stage and later)', async () => {
    await expectRefusal(db.command({ aggregate: 'c', pipeline: [{ $match: filter }], cursor: {} }), expected);
    await expectRefusal(db.command({ aggregate: 'c', pipeline: [{ $project: { a: 1 } }, { $match: filter }], cursor: {} }), expected);
  });
  test('delete and update answer with a write error, also on a missing collection', async () => {
    expectWriteError(await db.command({ delete: 'missing', deletes: [{ q: filter, limit: 0 }] }), 0, expected);
    expectWriteError(await db.command({ update: 'c', updates: [{ q: filter, u: { $set: { z: 1 } } }] }), 0, expected);
  });
  test('findAndModify fails the command', async () => {
    await expectRefusal(db.command({ findAndModify: 'missing', query: filter, remove: true }), expected);
  });
});

describeIf(serverIsRelease('7.0'), 'the regex flag message is pinned for 7.0 (pcre_util.cpp)')('regex flags', () => {
  test.each(['z', 'g', 'iq'])('$options %j: 51108', async (options) => {
    const bad = [...options].find((c) => !'imsux'.includes(c));
    await expectRefusal(db.command({ find: 'c', filter: { s: { $regex: 'a', $options: options } } }), {
      code: 51108,
      codeName: 'Location51108',
      errmsg: ` invalid flag in regex options: ${bad}`,
    });
  });
});

describe('what mongod accepts', () => {
  const ids = async (filter: Document): Promise<unknown[]> => ((await db.command({ find: 'c', filter, sort: { _id: 1 } })).cursor as Document).firstBatch.map((d: Document) => d._id);
  test('$expr at the top level and inside a top-level $and / $or', async () => {
    expect(await ids({ $expr: { $eq: ['$a', 1] } })).toEqual([1]);
    expect(await ids({ $and: [{ $expr: { $eq: ['$a', 1] } }] })).toEqual([1]);
    expect(await ids({ $or: [{ _id: 2 }, { $expr: { $eq: ['$a', 1] } }] })).toEqual([1, 2]);
  });
  test("$type aliases, 'number', codes and lists", async () => {
    expect(await ids({ a: { $type: 'number' } })).toEqual([1]);
    expect(await ids({ a: { $type: ['string', 'bool'] } })).toEqual([2]);
    expect(await ids({ a: { $type: 2 } })).toEqual([2]);
    expect(await ids({ a: { $type: 'javascriptWithScope' } })).toEqual([]);
  });
  test('$regex with the flags i, m, s, u', async () => {
    expect(await ids({ s: { $regex: '^ab', $options: 'i' } })).toEqual([1]);
    expect(await ids({ s: { $options: 'msu', $regex: 'b$' } })).toEqual([1, 2]);
  });
  test('$elemMatch object forms', async () => {
    expect(await ids({ arr: { $elemMatch: { x: { $gt: 3 } } } })).toEqual([1]);
    expect(await ids({ arr: { $elemMatch: { $and: [{ x: 1 }] } } })).toEqual([1]);
  });
});
