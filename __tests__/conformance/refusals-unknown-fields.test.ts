/**
 * Commands mongod parses with a strict IDL parser refuse a field that is neither theirs nor a
 * generic argument; the fields the drivers send are accepted.
 *
 * Sources:
 *  - IDLParserContext::throwUnknownField (src/mongo/idl/idl_parser.cpp): 40415 "BSON field '<path>'
 *    is an unknown field."; 4662500 with "... This command may be meant for a mongocryptd process."
 *    for `jsonSchema` (isMongocryptdArgument, src/mongo/idl/command_generic_argument.cpp).
 *  - The generic arguments every command accepts: src/mongo/idl/generic_argument.idl.
 *  - The parser context names: 'FindCommandRequest' (query_request_helper::makeFromFindCommand; the
 *    mongod message "BSON field 'FindCommandRequest.snapshot' is an unknown field." is quoted from
 *    mongoexport runs), 'aggregate', 'insert', 'update' (array context 'update.updates'), 'delete',
 *    'findAndModify' (typed command, kCommandName also for the alias), 'count' (count_cmd.cpp),
 *    'distinct' (7.0 parsed_distinct.cpp; 8.0 says 'distinctCommandRequest'), 'getMore'
 *    (getmore_cmd.cpp), 'killCursors', 'createIndexes', 'commitTransaction', 'abortTransaction'.
 *  - The fields: find_command.idl, aggregate_command.idl, write_ops.idl, count_command.idl,
 *    distinct_command.idl (no `hint` before 7.1: CRUD spec test distinct-hint.json requires 7.1.0),
 *    getmore_command.idl, kill_cursors.idl, create_indexes.idl, txn_cmds.idl; `sort` in an update
 *    statement exists from 8.0 (write_ops.idl UpdateOpEntry).
 *  - The batch: IDLParserContext::throwMissingField (40414 "BSON field '<path>' is missing but a
 *    required field") and checkOpCountForCommand (src/mongo/db/ops/write_ops.cpp): InvalidLength
 *    "Write batch sizes must be between 1 and 100000. Got 0 operations.".
 */
import { Long, type Db, type Document, type MongoClient } from 'mongodb';
import { describeIf, expectRefusal, openClient, serverIsRelease, uniqueDbName } from './support/server';

const dbName = uniqueDbName('conf_refuse_fields');
let client: MongoClient;
let db: Db;

beforeAll(async () => {
  client = await openClient();
  db = client.db(dbName);
  await db.collection('c').insertOne({ _id: 1, a: 1 } as Document);
});

afterAll(async () => {
  await db.dropDatabase();
  await client.close();
});

const unknown = (path: string): { code: number; codeName: string; errmsg: string } => ({ code: 40415, codeName: 'Location40415', errmsg: `BSON field '${path}' is an unknown field.` });

describe('an unknown field fails the parse with 40415, named by the parser context', () => {
  test.each([
    ['find', { find: 'c', filter: {}, foo: 1 }, 'FindCommandRequest.foo'],
    ['find, a typo of a real option', { find: 'c', fliter: { a: 1 } }, 'FindCommandRequest.fliter'],
    ['find, ntoreturn (removed)', { find: 'c', ntoreturn: 1 }, 'FindCommandRequest.ntoreturn'],
    ['aggregate', { aggregate: 'c', pipeline: [], cursor: {}, foo: 1 }, 'aggregate.foo'],
    ['insert', { insert: 'c', documents: [{ _id: 'x' }], foo: 1 }, 'insert.foo'],
    ['update', { update: 'c', updates: [{ q: {}, u: { $set: { b: 1 } } }], foo: 1 }, 'update.foo'],
    ['an update statement', { update: 'c', updates: [{ q: {}, u: { $set: { b: 1 } }, foo: 1 }] }, 'update.updates.foo'],
    ['delete', { delete: 'c', deletes: [{ q: { _id: 'none' }, limit: 0 }], foo: 1 }, 'delete.foo'],
    ['a delete statement', { delete: 'c', deletes: [{ q: { _id: 'none' }, limit: 0, foo: 1 }] }, 'delete.deletes.foo'],
    ['findAndModify', { findAndModify: 'c', query: { _id: 'none' }, update: { $set: { b: 1 } }, foo: 1 }, 'findAndModify.foo'],
    ['findandmodify (alias)', { findandmodify: 'c', query: { _id: 'none' }, remove: true, foo: 1 }, 'findAndModify.foo'],
    ['count', { count: 'c', foo: 1 }, 'count.foo'],
    ['getMore', { getMore: Long.fromNumber(12345), collection: 'c', foo: 1 }, 'getMore.foo'],
    ['killCursors', { killCursors: 'c', cursors: [], foo: 1 }, 'killCursors.foo'],
    ['createIndexes', { createIndexes: 'c', indexes: [{ key: { a: 1 }, name: 'a_1' }], foo: 1 }, 'createIndexes.foo'],
  ])('%s', async (_what, command, path) => {
    await expectRefusal(db.command(command as Document), unknown(path));
  });

  test('the first unknown field in the command decides, before a required field is found missing', async () => {
    // The generated parser throws at the first unknown field and checks required fields after its loop.
    await expectRefusal(db.command({ insert: 'c', bar: 1, foo: 1 }), unknown('insert.bar'));
  });

  test('an unknown statement field fails the whole command, and nothing is written', async () => {
    await expectRefusal(
      db.command({ update: 'c', updates: [{ q: { _id: 1 }, u: { $set: { a: 2 } } }, { q: { _id: 1 }, u: { $set: { a: 3 } }, upsertt: true }] }),
      unknown('update.updates.upsertt'),
    );
    expect(await db.collection('c').findOne({ _id: 1 as never })).toEqual({ _id: 1, a: 1 });
  });

  test('jsonSchema is a mongocryptd argument: 4662500', async () => {
    await expectRefusal(db.command({ find: 'c', jsonSchema: {} }), {
      code: 4662500,
      codeName: 'Location4662500',
      errmsg: "BSON field 'FindCommandRequest.jsonSchema' is an unknown field. This command may be meant for a mongocryptd process.",
    });
  });

  describeIf(serverIsRelease('7.0'), 'these rules are pinned for 7.0 (distinct context renamed in 8.0; distinct hint 7.1+, update sort 8.0+)')('7.0', () => {
    test('distinct: the context is "distinct"', async () => {
      await expectRefusal(db.command({ distinct: 'c', key: 'a', foo: 1 }), unknown('distinct.foo'));
    });
    test('distinct has no hint before 7.1', async () => {
      await expectRefusal(db.command({ distinct: 'c', key: 'a', hint: { _id: 1 } }), unknown('distinct.hint'));
    });
    test('an update statement has no sort before 8.0', async () => {
      await expectRefusal(db.command({ update: 'c', updates: [{ q: {}, u: { $set: { b: 1 } }, sort: { a: 1 } }] }), unknown('update.updates.sort'));
    });
  });
});

describe('generic arguments and the commands’ own fields are accepted', () => {
  test('every command accepts the generic arguments drivers send', async () => {
    const generic = { comment: 'c1', maxTimeMS: 5000, $readPreference: { mode: 'primary' }, apiVersion: '1', apiStrict: false, apiDeprecationErrors: false };
    const found = await db.command({ find: 'c', filter: { _id: 1 }, ...generic, readConcern: { level: 'local' } });
    expect((found.cursor as Document).firstBatch).toEqual([{ _id: 1, a: 1 }]);
    const counted = await db.command({ count: 'c', query: { _id: 1 }, ...generic });
    expect(counted.n).toBe(1);
    const inserted = await db.command({ insert: 'c', documents: [{ _id: 'g' }], ordered: true, bypassDocumentValidation: false, ...generic, writeConcern: { w: 1 } });
    expect(inserted.n).toBe(1);
  });

  test('the options the Node driver puts on find, aggregate, update, delete, findAndModify and createIndexes', async () => {
    const find = await db.command({ find: 'c', filter: {}, sort: { _id: 1 }, projection: { a: 1 }, hint: { _id: 1 }, skip: 0, limit: 1, batchSize: 1, singleBatch: true, noCursorTimeout: false, allowDiskUse: true, let: { x: 1 } });
    expect((find.cursor as Document).firstBatch).toEqual([{ _id: 1, a: 1 }]);
    const agg = await db.command({ aggregate: 'c', pipeline: [{ $match: { _id: 1 } }], cursor: { batchSize: 5 }, allowDiskUse: false, bypassDocumentValidation: false, hint: { _id: 1 }, let: { x: 1 } });
    expect((agg.cursor as Document).firstBatch).toEqual([{ _id: 1, a: 1 }]);
    const upd = await db.command({ update: 'c', updates: [{ q: { _id: 'g' }, u: { $set: { b: 1 } }, upsert: false, multi: false, arrayFilters: [], hint: { _id: 1 } }], ordered: false, let: { x: 1 } });
    expect(upd).toMatchObject({ n: 1, nModified: 1 });
    const fam = await db.command({ findAndModify: 'c', query: { _id: 'g' }, update: { $set: { b: 2 } }, new: true, fields: { b: 1 }, sort: { _id: 1 }, upsert: false, hint: { _id: 1 }, let: { x: 1 }, bypassDocumentValidation: false });
    expect(fam.value).toEqual({ _id: 'g', b: 2 });
    const del = await db.command({ delete: 'c', deletes: [{ q: { _id: 'g' }, limit: 1, hint: { _id: 1 } }], ordered: true, let: { x: 1 } });
    expect(del.n).toBe(1);
    const idx = await db.command({ createIndexes: 'c', indexes: [{ key: { a: 1 }, name: 'a_1' }], commitQuorum: 'votingMembers' });
    expect(idx.ok).toBe(1);
  });
});

describe('the write batch', () => {
  test.each([
    ['insert', { insert: 'c', documents: [] }],
    ['update', { update: 'c', updates: [] }],
    ['delete', { delete: 'c', deletes: [] }],
  ])('%s of no statements: InvalidLength (16)', async (_what, command) => {
    await expectRefusal(db.command(command as Document), { code: 16, codeName: 'InvalidLength', errmsg: 'Write batch sizes must be between 1 and 100000. Got 0 operations.' });
  });

  test.each([
    ['insert', 'documents'],
    ['update', 'updates'],
    ['delete', 'deletes'],
  ])('%s without its batch: 40414', async (command, field) => {
    await expectRefusal(db.command({ [command]: 'c' }), { code: 40414, codeName: 'Location40414', errmsg: `BSON field '${command}.${field}' is missing but a required field` });
  });
});
