/**
 * Collection-less aggregation (`{aggregate: 1}`): $listLocalSessions and $documents.
 *
 * Sources (mongodb/mongo unless noted):
 *  - src/mongo/db/pipeline/document_source_list_local_sessions.cpp: the LogicalSessionCache's
 *    records (LogicalSessionRecord: `_id: {id, uid}`, `lastUse`; `user` only with
 *    authentication; uid the SHA-256 of the empty string without authentication,
 *    logical_session_id_helpers.cpp kNoAuthDigest); every command with an lsid registers its session
 *    (LogicalSessionCache::vivify); on a collection: InvalidNamespace "$listLocalSessions must be
 *    run against the database with {aggregate: 1}, not a collection";
 *  - crud spec tests db-aggregate.json ($listLocalSessions, $limit, $addFields, $project on admin)
 *    and db-aggregate-rawdata.json;
 *  - manual "$documents (aggregation)" (5.1+);
 *  - NamespaceString::makeCollectionlessAggregateNSS: the cursor ns "<db>.$cmd.aggregate".
 */
import { createHash } from 'node:crypto';
import { Binary, type Db, type MongoClient } from 'mongodb';
import { expectServerError, openClient, uniqueDbName } from './support/server';

const dbName = uniqueDbName('conf_collless');
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

test('$listLocalSessions lists the session the command runs in (crud spec db-aggregate.json)', async () => {
  const session = client.startSession();
  try {
    const admin = client.db('admin');
    const docs = await admin.aggregate([{ $listLocalSessions: {} }], { session }).toArray();
    const mine = docs.find((d) => (d._id.id as Binary).toString('hex') === (session.id!.id as Binary).toString('hex'));
    expect(mine).toBeDefined();
    expect(Object.keys(mine!)).toEqual(['_id', 'lastUse']);
    expect(mine!.lastUse).toBeInstanceOf(Date);
    expect((mine!._id.uid as Binary).toString('hex')).toBe(createHash('sha256').update('').digest('hex'));
    const shaped = await admin.aggregate([{ $listLocalSessions: {} }, { $limit: 1 }, { $addFields: { dummy: 'dummy field' } }, { $project: { _id: 0, dummy: 1 } }]).toArray();
    expect(shaped).toEqual([{ dummy: 'dummy field' }]);
  } finally {
    await session.endSession();
  }
});

test('the cursor of a collection-less aggregate is <db>.$cmd.aggregate', async () => {
  const res = await db.command({ aggregate: 1, pipeline: [{ $documents: [{ a: 1 }, { a: 2 }, { a: 3 }] }], cursor: { batchSize: 2 } });
  expect(res.cursor.ns).toBe(`${dbName}.$cmd.aggregate`);
  expect(res.cursor.firstBatch).toEqual([{ a: 1 }, { a: 2 }]);
  const more = await db.command({ getMore: res.cursor.id, collection: '$cmd.aggregate' });
  expect(more.cursor.nextBatch).toEqual([{ a: 3 }]);
});

test('$documents feeds the rest of the pipeline', async () => {
  const docs = await db.aggregate([{ $documents: [{ x: 1 }, { x: 2 }, { x: 3 }] }, { $match: { x: { $gte: 2 } } }, { $group: { _id: null, s: { $sum: '$x' } } }]).toArray();
  expect(docs).toEqual([{ _id: null, s: 5 }]);
});

test('$listLocalSessions on a collection is InvalidNamespace', async () => {
  const err = await expectServerError(db.command({ aggregate: 'c', pipeline: [{ $listLocalSessions: {} }], cursor: {} }), 73);
  expect(err.message).toBe('$listLocalSessions must be run against the database with {aggregate: 1}, not a collection');
});

test('other collection-less stages are refused loudly', async () => {
  await expectServerError(db.command({ aggregate: 1, pipeline: [{ $match: {} }], cursor: {} }), 238);
  await expectServerError(client.db('admin').command({ aggregate: 1, pipeline: [{ $currentOp: {} }], cursor: {} }), 238);
  await expectServerError(db.command({ aggregate: 1, pipeline: [{ $listLocalSessions: { users: [] } }], cursor: {} }), 238);
});
