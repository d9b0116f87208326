/**
 * createIndexes entries mongod refuses when it validates them, before any collection or index is
 * touched; the options drivers and Mongoose send are accepted.
 *
 * Sources (src/mongo/db/catalog/index_key_validate.cpp, 7.0, re-read; index_key_validate.h):
 *  - parseAndValidateIndexSpecs: "Error in specification <spec> :: caused by :: <reason>" (the spec
 *    as BSONObj::toString prints it), then the _id index (validateIdIndexSpec) or the reserved names
 *    '_id_' and '*' (BadValue).
 *  - validateIndexSpecFieldNames: InvalidIndexSpecificationOption (197) "The field '<f>' is not valid
 *    for an index specification. Specification: <spec>".
 *  - validateIndexSpec / validateKeyPattern: CannotCreateIndex (67) "Index keys cannot be empty.",
 *    "Values in the index key pattern cannot be 0.", "Values in v:2 index key pattern cannot be of
 *    type <type>. Only numbers > 0, numbers < 0, and strings are allowed.", "Unknown index plugin
 *    '<name>'", "Index key contains an illegal field name: field name starts with '$'.", "Index keys
 *    cannot contain an empty field.", "Invalid index specification <spec>; cannot create an index
 *    with v=<n>"; TypeMismatch for a key that is not an object and a name that is not a string;
 *    FailedToParse for a missing key or name.
 */
import type { Db, MongoClient } from 'mongodb';
import { expectRefusal, openClient, uniqueDbName } from './support/server';

const dbName = uniqueDbName('conf_refuse_index');
let client: MongoClient;
let db: Db;

beforeAll(async () => {
  client = await openClient();
  db = client.db(dbName);
  await db.createCollection('c');
});

afterAll(async () => {
  await db.dropDatabase();
  await client.close();
});

const inSpec = (spec: string, code: number, codeName: string, why: string): { code: number; codeName: string; errmsg: string } => ({
  code,
  codeName,
  errmsg: `Error in specification ${spec} :: caused by :: ${why}`,
});

const indexNames = async (): Promise<string[]> => (await db.collection('c').listIndexes().toArray()).map((i) => i.name as string);

describe('refused specs (the collection keeps its indexes, a missing collection is not created)', () => {
  test.each([
    ['an unknown option', { key: { a: 1 }, name: 'a_1', foo: 1 }, inSpec('{ key: { a: 1 }, name: "a_1", foo: 1 }', 197, 'InvalidIndexSpecificationOption', 'The field \'foo\' is not valid for an index specification. Specification: { key: { a: 1 }, name: "a_1", foo: 1 }')],
    ['an empty key', { key: {}, name: 'x' }, inSpec('{ key: {}, name: "x" }', 67, 'CannotCreateIndex', 'Index keys cannot be empty.')],
    ['a 0 direction', { key: { a: 0 }, name: 'a_0' }, inSpec('{ key: { a: 0 }, name: "a_0" }', 67, 'CannotCreateIndex', 'Values in the index key pattern cannot be 0.')],
    ['a bool direction', { key: { a: true }, name: 'a_t' }, inSpec('{ key: { a: true }, name: "a_t" }', 67, 'CannotCreateIndex', 'Values in v:2 index key pattern cannot be of type bool. Only numbers > 0, numbers < 0, and strings are allowed.')],
    ['an object direction', { key: { a: { x: 1 } }, name: 'a_o' }, inSpec('{ key: { a: { x: 1 } }, name: "a_o" }', 67, 'CannotCreateIndex', 'Values in v:2 index key pattern cannot be of type object. Only numbers > 0, numbers < 0, and strings are allowed.')],
    ['an unknown index type', { key: { a: 'btree' }, name: 'a_b' }, inSpec('{ key: { a: "btree" }, name: "a_b" }', 67, 'CannotCreateIndex', "Unknown index plugin 'btree'")],
    ['a $-prefixed key', { key: { $a: 1 }, name: 'd' }, inSpec('{ key: { $a: 1 }, name: "d" }', 67, 'CannotCreateIndex', "Index key contains an illegal field name: field name starts with '$'.")],
    ['an empty key part', { key: { 'a..b': 1 }, name: 'e' }, inSpec('{ key: { a..b: 1 }, name: "e" }', 67, 'CannotCreateIndex', 'Index keys cannot contain an empty field.')],
    ['index version 3', { key: { a: 1 }, name: 'a_1', v: 3 }, inSpec('{ key: { a: 1 }, name: "a_1", v: 3 }', 67, 'CannotCreateIndex', 'Invalid index specification { key: { a: 1 }, name: "a_1", v: 3 }; cannot create an index with v=3')],
    ['a key that is not an object', { key: 1, name: 'k' }, inSpec('{ key: 1, name: "k" }', 14, 'TypeMismatch', "The field 'key' must be an object, but got int")],
    ['a name that is not a string', { key: { a: 1 }, name: 5 }, inSpec('{ key: { a: 1 }, name: 5 }', 14, 'TypeMismatch', "The field 'name' must be a string, but got int")],
    ['unique of a string', { key: { a: 1 }, name: 'a_1', unique: 'yes' }, inSpec('{ key: { a: 1 }, name: "a_1", unique: "yes" }', 14, 'TypeMismatch', 'The field \'unique has value unique: "yes", which is not convertible to bool')],
    ['no name', { key: { a: 1 } }, inSpec('{ key: { a: 1 } }', 9, 'FailedToParse', "The 'name' field is a required property of an index specification")],
    ['no key', { name: 'x' }, inSpec('{ name: "x" }', 9, 'FailedToParse', "The 'key' field is a required property of an index specification")],
  ])('%s', async (_what, spec, expected) => {
    const before = await indexNames();
    await expectRefusal(db.command({ createIndexes: 'c', indexes: [spec] }), expected);
    expect(await indexNames()).toEqual(before);
    await expectRefusal(db.command({ createIndexes: 'never_created', indexes: [spec] }), expected);
    expect((await db.listCollections({ name: 'never_created' }).toArray()).length).toBe(0);
  });

  test('a bad spec after a good one refuses the whole command', async () => {
    const before = await indexNames();
    await expectRefusal(db.command({ createIndexes: 'c', indexes: [{ key: { g: 1 }, name: 'g_1' }, { key: {}, name: 'bad' }] }), inSpec('{ key: {}, name: "bad" }', 67, 'CannotCreateIndex', 'Index keys cannot be empty.'));
    expect(await indexNames()).toEqual(before);
  });

  test('the _id index takes only its own fields (197, on the validated spec with v appended)', async () => {
    await expectRefusal(db.command({ createIndexes: 'c', indexes: [{ key: { _id: 1 }, name: '_id_', unique: true }] }), {
      code: 197,
      codeName: 'InvalidIndexSpecificationOption',
      errmsg: 'The field \'unique\' is not valid for an _id index specification. Specification: { key: { _id: 1 }, name: "_id_", unique: true, v: 2 }',
    });
  });

  test('the names _id_ and * are reserved', async () => {
    await expectRefusal(db.command({ createIndexes: 'c', indexes: [{ key: { a: 1 }, name: '_id_' }] }), {
      code: 2,
      codeName: 'BadValue',
      errmsg: "The index name '_id_' is reserved for the _id index, which must have key pattern {_id: 1}, found key: { a: 1 }",
    });
    await expectRefusal(db.command({ createIndexes: 'c', indexes: [{ key: { a: 1 }, name: '*' }] }), { code: 2, codeName: 'BadValue', errmsg: "The index name '*' is not valid." });
  });
});

describe('accepted specs', () => {
  test('the options drivers and Mongoose send', async () => {
    const reply = await db.command({
      createIndexes: 'c',
      indexes: [
        { key: { a: 1 }, name: 'a_1', background: true, unique: false, sparse: 0 },
        { key: { b: -1, 'c.d': 1 }, name: 'b_c', v: 2, partialFilterExpression: { b: { $gt: 1 } } },
        { key: { ttl: 1 }, name: 'ttl_1', expireAfterSeconds: 3600, hidden: false },
        { key: { _id: 1 }, name: '_id_', v: 2 },
      ],
    });
    expect(reply).toMatchObject({ ok: 1, numIndexesAfter: 4 });
    expect(await indexNames()).toEqual(['_id_', 'a_1', 'b_c', 'ttl_1']);
  });
});
