/**
 * findAndModify's option rules, sort specifications, and the pipeline-update rules of the update
 * command, refused as mongod refuses them (nothing written); the valid combinations still run.
 *
 * Sources:
 *  - validate() in src/mongo/db/commands/find_and_modify.cpp (7.0, re-read), FailedToParse in this
 *    order: "Either an update or remove=true must be specified"; with remove: "Cannot specify both an
 *    update and remove=true", "Cannot specify both upsert=true and remove=true " (sic, trailing
 *    space), "Cannot specify both new=true and remove=true; 'remove' always returns the deleted
 *    document", "Cannot specify arrayFilters and remove=true"; "Cannot specify arrayFilters and a
 *    pipeline update". `remove`, `upsert`, `new` are safeBools (write_ops.idl). jstests:
 *    core/write/find_and_modify/find_and_modify_invalid_query_params.js.
 *  - SortPattern::SortPattern (src/mongo/db/query/sort_pattern.cpp): 15974 "Illegal key in $sort
 *    specification: <element>", 15975 "$sort key ordering must be 1 (for ascending) or -1 (for
 *    descending)" (the direction is safeNumberLong: 1.5 is ascending), 17312 "$meta is the only
 *    expression supported by $sort right now"; DocumentSourceSort: 15976 "$sort stage must have at
 *    least one sort key".
 *  - UpdateDriver::parse (src/mongo/db/update/update_driver.cpp, 7.0), per statement: FailedToParse
 *    "arrayFilters may not be specified for pipeline-style updates", 51198 "Constant values may only
 *    be specified for pipeline updates" (jstests/core/write/update/update_with_pipeline.js).
 */
import type { Db, Document, MongoClient } from 'mongodb';
import { describeIf, expectRefusal, expectWriteError, openClient, serverIsRelease, uniqueDbName } from './support/server';

const dbName = uniqueDbName('conf_refuse_wopts');
let client: MongoClient;
let db: Db;

const snapshot = async (): Promise<Document[]> => db.collection('c').find({}).sort({ _id: 1 }).toArray();

beforeEach(async () => {
  await db.collection('c').deleteMany({});
  await db.collection('c').insertMany([{ _id: 1, a: 2, arr: [{ x: 1 }, { x: 2 }] }, { _id: 2, a: 1, arr: [] }] as Document[]);
});

beforeAll(async () => {
  client = await openClient();
  db = client.db(dbName);
});

afterAll(async () => {
  await db.dropDatabase();
  await client.close();
});

const failed = (errmsg: string): { code: number; codeName: string; errmsg: string } => ({ code: 9, codeName: 'FailedToParse', errmsg });

describe('findAndModify option rules (validate)', () => {
  test.each([
    ['neither update nor remove', { query: {} }, 'Either an update or remove=true must be specified'],
    ['remove: false and no update', { query: {}, remove: false }, 'Either an update or remove=true must be specified'],
    ['update with remove', { query: {}, remove: true, update: { $set: { b: 1 } } }, 'Cannot specify both an update and remove=true'],
    ['upsert with remove', { query: {}, remove: true, upsert: true }, 'Cannot specify both upsert=true and remove=true '],
    ['new with remove', { query: {}, remove: true, new: true }, "Cannot specify both new=true and remove=true; 'remove' always returns the deleted document"],
    ['new: 1 (a safeBool) with remove', { query: {}, remove: 1, new: 1 }, "Cannot specify both new=true and remove=true; 'remove' always returns the deleted document"],
    ['arrayFilters with remove', { query: {}, remove: true, arrayFilters: [{ 'e.x': 1 }] }, 'Cannot specify arrayFilters and remove=true'],
    ['empty arrayFilters with remove', { query: {}, remove: true, arrayFilters: [] }, 'Cannot specify arrayFilters and remove=true'],
    ['arrayFilters with a pipeline update', { query: {}, update: [{ $set: { b: 1 } }], arrayFilters: [{ 'e.x': 1 }] }, 'Cannot specify arrayFilters and a pipeline update'],
    ['empty arrayFilters with a pipeline update', { query: {}, update: [{ $set: { b: 1 } }], arrayFilters: [] }, 'Cannot specify arrayFilters and a pipeline update'],
  ])('%s', async (_what, options, errmsg) => {
    const before = await snapshot();
    await expectRefusal(db.command({ findAndModify: 'c', ...options }), failed(errmsg));
    expect(await snapshot()).toEqual(before);
  });

  test('the checks run on a missing collection too', async () => {
    await expectRefusal(db.command({ findAndModify: 'missing', query: {}, remove: true, new: true }), failed("Cannot specify both new=true and remove=true; 'remove' always returns the deleted document"));
  });

  test('a remove with new: false, upsert: false and fields runs', async () => {
    const r = await db.command({ findAndModify: 'c', query: { _id: 2 }, remove: true, new: false, upsert: false, fields: { a: 1 } });
    expect(r.value).toEqual({ _id: 2, a: 1 });
    expect(await db.collection('c').countDocuments()).toBe(1);
  });
});

describe('sort specifications', () => {
  test.each([
    ['2', { a: 2 }, { code: 15975, codeName: 'Location15975', errmsg: '$sort key ordering must be 1 (for ascending) or -1 (for descending)' }],
    ['0', { a: 0 }, { code: 15975, codeName: 'Location15975', errmsg: '$sort key ordering must be 1 (for ascending) or -1 (for descending)' }],
    ['a string', { a: 'asc' }, { code: 15974, codeName: 'Location15974', errmsg: 'Illegal key in $sort specification: a: "asc"' }],
    ['a bool', { a: true }, { code: 15974, codeName: 'Location15974', errmsg: 'Illegal key in $sort specification: a: true' }],
    ['an object other than $meta', { a: { x: 1 } }, { code: 17312, codeName: 'Location17312', errmsg: '$meta is the only expression supported by $sort right now' }],
  ])('%s: findAndModify, find and $sort refuse it before reading', async (_what, sort, expected) => {
    const before = await snapshot();
    await expectRefusal(db.command({ findAndModify: 'c', query: { _id: 'none' }, update: { $set: { b: 1 } }, sort }), expected);
    await expectRefusal(db.command({ findAndModify: 'c', query: {}, remove: true, sort }), expected);
    await expectRefusal(db.command({ find: 'missing', sort }), expected);
    await expectRefusal(db.command({ aggregate: 'c', pipeline: [{ $sort: sort }], cursor: {} }), expected);
    expect(await snapshot()).toEqual(before);
  });

  test('an empty $sort stage: 15976', async () => {
    await expectRefusal(db.command({ aggregate: 'c', pipeline: [{ $sort: {} }], cursor: {} }), { code: 15976, codeName: 'Location15976', errmsg: '$sort stage must have at least one sort key' });
  });

  test('1.5 sorts ascending and -1.0 descending (safeNumberLong)', async () => {
    const asc = await db.command({ find: 'c', sort: { a: 1.5 } });
    expect((asc.cursor as Document).firstBatch.map((d: Document) => d._id)).toEqual([2, 1]);
    const r = await db.command({ findAndModify: 'c', query: {}, sort: { a: -1.0 }, update: { $set: { top: true } } });
    expect(r.value._id).toBe(1);
  });
});

describe('pipeline-update rules of the update command (a write error per statement)', () => {
  test('arrayFilters with a pipeline', async () => {
    const before = await snapshot();
    const reply = await db.command({ update: 'c', updates: [{ q: { _id: 1 }, u: [{ $set: { b: 1 } }], arrayFilters: [{ 'e.x': 1 }] }] });
    expectWriteError(reply, 0, failed('arrayFilters may not be specified for pipeline-style updates'));
    expect(await snapshot()).toEqual(before);
  });

  test('an empty arrayFilters list with a pipeline runs', async () => {
    const reply = await db.command({ update: 'c', updates: [{ q: { _id: 1 }, u: [{ $set: { b: 1 } }], arrayFilters: [] }] });
    expect(reply).toMatchObject({ n: 1, nModified: 1 });
  });

  describeIf(serverIsRelease('7.0'), 'constants without a pipeline fail the statement in 7.0 (8.0 fails the whole command)')('constants (c)', () => {
    test.each([
      ['a modifier update', { $set: { b: 1 } }, { x: 1 }],
      ['a replacement', { b: 1 }, { x: 1 }],
      ['an empty c', { $set: { b: 1 } }, {}],
    ])('with %s: 51198', async (_what, u, c) => {
      const before = await snapshot();
      const reply = await db.command({ update: 'c', updates: [{ q: { _id: 1 }, u, c }], ordered: false });
      expectWriteError(reply, 0, { code: 51198, codeName: 'Location51198', errmsg: 'Constant values may only be specified for pipeline updates' });
      expect(await snapshot()).toEqual(before);
    });
  });

  test('arrayFilters with a modifier update run', async () => {
    const reply = await db.command({ update: 'c', updates: [{ q: { _id: 1 }, u: { $set: { 'arr.$[e].y': 1 } }, arrayFilters: [{ 'e.x': 2 }] }] });
    expect(reply).toMatchObject({ n: 1, nModified: 1 });
    expect(await db.collection('c').findOne({ _id: 1 as never })).toEqual({ _id: 1, a: 2, arr: [{ x: 1 }, { x: 2, y: 1 }] });
  });
});
