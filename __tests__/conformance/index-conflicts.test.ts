/**
 * createIndexes meeting an existing index, and collMod changing a TTL index's expiry.
 *
 * Sources:
 *  - IndexCatalogImpl::_doesSpecConflictWithExisting (src/mongo/db/catalog/index_catalog_impl.cpp):
 *    an index of the same name whose key pattern or identifying option differs is
 *    IndexKeySpecsConflict (86) "An existing index has the same name as the requested index. When
 *    index names are not specified, they are auto generated and can cause conflicts. Please refer
 *    to our documentation. Requested index: <spec>, existing index: <spec>"; same name, equivalent
 *    but not identical options is IndexOptionsConflict (85) "An equivalent index already exists with
 *    the same name but different options. Requested index: ..., existing index: ..."; identical is no
 *    error (nothing built). Another name with an equivalent index: 85 "An equivalent index already
 *    exists with a different name and options. ..."; with an identical one: 85 "Index already exists
 *    with a different name: <name>".
 *  - IndexDescriptor::compareIndexOptions (src/mongo/db/index/index_descriptor.cpp, 5.0+): key
 *    pattern, unique, sparse, collation, partialFilterExpression and wildcardProjection identify an
 *    index (kDifferent); other options such as expireAfterSeconds only make it kEquivalent.
 *  - IndexCatalogImpl::_fixIndexSpec (same file): the stored spec is v, unique: true (when truthy),
 *    hidden: true (likewise), key, name ("_id_" for the {_id: 1} key), then the other fields as sent.
 *  - parseAndValidateIndexSpecs (src/mongo/db/catalog/index_key_validate.cpp): the name '_id_' on
 *    another key is BadValue "The index name '_id_' is reserved for the _id index, which must have
 *    key pattern {_id: 1}, found key: <key>".
 *  - collMod, index form: parseCollModRequest (src/mongo/db/catalog/coll_mod.cpp, 6.x/7.0) and
 *    processCollModIndexRequest (src/mongo/db/catalog/coll_mod_index.cpp); manual, collMod,
 *    "Change Expiration Value for Indexes". Reply expireAfterSeconds_old / expireAfterSeconds_new
 *    (NumberLong); IndexNotFound (27) "cannot find index <name> for ns <ns>"; InvalidOptions (72)
 *    "Cannot specify both key pattern and name.", "Must specify either index name or key pattern.",
 *    "no expireAfterSeconds, hidden, unique, or prepareUnique field", "the _id field does not support
 *    TTL indexes", "TTL indexes are single-field indexes, compound indexes do not support TTL";
 *    index_key_validate::validateExpireAfterSeconds: "TTL index 'expireAfterSeconds' option cannot
 *    be less than 0"; an index without expireAfterSeconds becomes a TTL index (5.1+), the reply then
 *    has only expireAfterSeconds_new; a missing collection is NamespaceNotFound (26) "ns does not
 *    exist".
 */
import type { Db, MongoClient } from 'mongodb';
import { expectServerError, openClient, uniqueDbName, type Loose } from './support/server';

const dbName = uniqueDbName('conf_index_conflicts');
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

async function indexes(coll: string): Promise<Loose[]> {
  return (await db.collection(coll).listIndexes().toArray()) as Loose[];
}

describe('createIndexes against an existing index', () => {
  beforeAll(async () => {
    const c = db.collection<Loose>('conflicts');
    await c.createIndex({ at: 1 }, { name: 'at_ttl', expireAfterSeconds: 60 });
    await c.createIndex({ u: 1 }, { name: 'u_1', unique: true });
  });

  test('same name and key, another expireAfterSeconds: IndexOptionsConflict (85), same-name message', async () => {
    const err = await expectServerError(db.collection('conflicts').createIndex({ at: 1 }, { name: 'at_ttl', expireAfterSeconds: 3600 }), 85);
    expect(err.codeName).toBe('IndexOptionsConflict');
    expect(err.message).toBe(
      'An equivalent index already exists with the same name but different options. Requested index: { v: 2, key: { at: 1 }, name: "at_ttl", expireAfterSeconds: 3600 }, existing index: { v: 2, key: { at: 1 }, name: "at_ttl", expireAfterSeconds: 60 }',
    );
  });

  test('same name, another key pattern: IndexKeySpecsConflict (86)', async () => {
    const err = await expectServerError(db.collection('conflicts').createIndex({ other: 1 }, { name: 'at_ttl' }), 86);
    expect(err.codeName).toBe('IndexKeySpecsConflict');
    expect(err.message).toMatch(/^An existing index has the same name as the requested index\. When index names are not specified, they are auto generated and can cause conflicts\. Please refer to our documentation\. Requested index: /);
  });

  test('same name and key, unique differs (an identifying option): IndexKeySpecsConflict (86)', async () => {
    await expectServerError(db.collection('conflicts').createIndex({ u: 1 }, { name: 'u_1' }), 86);
  });

  test('identical request: no error, nothing built', async () => {
    const before = (await indexes('conflicts')).length;
    const name = await db.collection('conflicts').createIndex({ at: 1 }, { name: 'at_ttl', expireAfterSeconds: 60 });
    expect(name).toBe('at_ttl');
    expect((await indexes('conflicts')).length).toBe(before);
  });

  test('another name, identical options: IndexOptionsConflict "Index already exists with a different name"', async () => {
    const err = await expectServerError(db.collection('conflicts').createIndex({ at: 1 }, { name: 'at_again', expireAfterSeconds: 60 }), 85);
    expect(err.message).toBe('Index already exists with a different name: at_ttl');
  });

  test('another name, equivalent options: IndexOptionsConflict, different-name message', async () => {
    const err = await expectServerError(db.collection('conflicts').createIndex({ at: 1 }, { name: 'at_other', expireAfterSeconds: 5 }), 85);
    expect(err.message).toMatch(/^An equivalent index already exists with a different name and options\. Requested index: \{ v: 2, key: \{ at: 1 \}, name: "at_other", expireAfterSeconds: 5 \}, existing index: /);
  });

  test('the _id key under another name is the _id index (_fixIndexSpec names it _id_): nothing built', async () => {
    const before = (await indexes('conflicts')).length;
    await db.collection('conflicts').createIndex({ _id: 1 }, { name: 'my_id' });
    expect((await indexes('conflicts')).length).toBe(before);
  });

  test('the stored spec: v, unique: true, key, name, then the other options as sent', async () => {
    await db.collection('conflicts').createIndex({ s: 1 }, { name: 's_1', sparse: true, unique: 1 as unknown as boolean });
    const spec = (await indexes('conflicts')).find((i) => i.name === 's_1');
    expect(Object.keys(spec ?? {})).toEqual(['v', 'unique', 'key', 'name', 'sparse']);
    expect(spec?.unique).toBe(true);
  });

  test('the name _id_ on another key: BadValue', async () => {
    const err = await expectServerError(db.collection('conflicts').createIndex({ x: 1 }, { name: '_id_' }), 2);
    expect(err.message).toBe("The index name '_id_' is reserved for the _id index, which must have key pattern {_id: 1}, found key: { x: 1 }");
  });
});

describe('collMod index: expireAfterSeconds', () => {
  beforeAll(async () => {
    const c = db.collection<Loose>('ttlmod');
    await c.createIndex({ at: 1 }, { name: 'at_ttl', expireAfterSeconds: 86400 });
    await c.createIndex({ plain: 1 }, { name: 'plain_1' });
    await c.createIndex({ a: 1, b: 1 }, { name: 'a_b' });
  });

  const collMod = (index: Loose): Promise<Loose> => db.command({ collMod: 'ttlmod', index });

  test('by name: replies the old and new values, listIndexes shows the new one', async () => {
    const reply = await collMod({ name: 'at_ttl', expireAfterSeconds: 3600 });
    expect(reply).toMatchObject({ ok: 1, expireAfterSeconds_old: 86400, expireAfterSeconds_new: 3600 });
    expect((await indexes('ttlmod')).find((i) => i.name === 'at_ttl')?.expireAfterSeconds).toBe(3600);
  });

  test('by key pattern, same value: both fields still reported', async () => {
    const reply = await collMod({ keyPattern: { at: 1 }, expireAfterSeconds: 3600 });
    expect(reply).toMatchObject({ ok: 1, expireAfterSeconds_old: 3600, expireAfterSeconds_new: 3600 });
  });

  test('the new expiry makes a later identical createIndexes succeed', async () => {
    await expect(db.collection('ttlmod').createIndex({ at: 1 }, { name: 'at_ttl', expireAfterSeconds: 3600 })).resolves.toBe('at_ttl');
  });

  test('a non-TTL single-field index becomes a TTL index (5.1+): only expireAfterSeconds_new', async () => {
    const reply = await collMod({ name: 'plain_1', expireAfterSeconds: 10 });
    expect(reply.expireAfterSeconds_new).toBe(10);
    expect(reply.expireAfterSeconds_old).toBeUndefined();
    expect((await indexes('ttlmod')).find((i) => i.name === 'plain_1')?.expireAfterSeconds).toBe(10);
  });

  test('refusals', async () => {
    let err = await expectServerError(collMod({ name: 'nope', expireAfterSeconds: 10 }), 27);
    expect(err.codeName).toBe('IndexNotFound');
    expect(err.message).toBe(`cannot find index nope for ns ${dbName}.ttlmod`);
    err = await expectServerError(collMod({ keyPattern: { nope: 1 }, expireAfterSeconds: 10 }), 27);
    expect(err.message).toBe(`cannot find index { nope: 1 } for ns ${dbName}.ttlmod`);
    err = await expectServerError(collMod({ name: 'at_ttl', keyPattern: { at: 1 }, expireAfterSeconds: 10 }), 72);
    expect(err.message).toBe('Cannot specify both key pattern and name.');
    err = await expectServerError(collMod({ expireAfterSeconds: 10 }), 72);
    expect(err.message).toBe('Must specify either index name or key pattern.');
    err = await expectServerError(collMod({ name: 'at_ttl' }), 72);
    expect(err.message).toBe('no expireAfterSeconds, hidden, unique, or prepareUnique field');
    err = await expectServerError(collMod({ name: 'at_ttl', expireAfterSeconds: -1 }), 72);
    expect(err.message).toBe("TTL index 'expireAfterSeconds' option cannot be less than 0");
    err = await expectServerError(collMod({ name: '_id_', expireAfterSeconds: 10 }), 72);
    expect(err.message).toBe('the _id field does not support TTL indexes');
    err = await expectServerError(collMod({ name: 'a_b', expireAfterSeconds: 10 }), 72);
    expect(err.message).toBe('TTL indexes are single-field indexes, compound indexes do not support TTL');
    err = await expectServerError(db.command({ collMod: 'missing_coll', index: { name: 'x', expireAfterSeconds: 1 } }), 26);
    expect(err.message).toBe('ns does not exist');
  });
});
