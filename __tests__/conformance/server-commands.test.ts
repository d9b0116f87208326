/**
 * serverStatus and query hints.
 *
 * Sources:
 *  - serverStatus: manual, "serverStatus" (output fields host, version, process, pid, uptime,
 *    uptimeMillis, uptimeEstimate, localTime, connections.current/available/totalCreated, repl on a
 *    replica-set member).
 *  - hint: a hint that names no index of the collection fails with BadValue (2), message containing
 *    "hint provided does not correspond to an existing index" (QueryPlanner::plan,
 *    src/mongo/db/query/query_planner.cpp, QueryPlanner::plan, re-read); a hinted sparse index returns only documents that
 *    have the field (manual, "Sparse Indexes", sparse index and incomplete results).
 */
import type { Db, MongoClient } from 'mongodb';
import { expectServerError, openClient, uniqueDbName, type Loose } from './support/server';

const dbName = uniqueDbName('conf_server_cmds');
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

test('serverStatus answers the fields drivers and ODMs read', async () => {
  const status = await client.db('admin').command({ serverStatus: 1 });
  expect(status.ok).toBe(1);
  expect(typeof status.host).toBe('string');
  expect(status.version).toMatch(/^\d+\.\d+\.\d+/);
  expect(status.process).toBe('mongod');
  expect(Number(status.uptime)).toBeGreaterThanOrEqual(0);
  expect(status.localTime).toBeInstanceOf(Date);
  expect(Number(status.connections.current)).toBeGreaterThanOrEqual(1);
  const hello = await client.db('admin').command({ hello: 1 });
  if (hello.setName) expect(status.repl.setName).toBe(hello.setName);
});

describe('hint', () => {
  beforeAll(async () => {
    const coll = db.collection<Loose>('hinted');
    await coll.insertMany([{ _id: 1, a: 1, s: 'x' }, { _id: 2, a: 2 }, { _id: 3, a: 3, s: 'y' }]);
    await coll.createIndex({ a: 1 }, { name: 'a_1' });
    await coll.createIndex({ s: 1 }, { name: 's_sparse', sparse: true });
  });

  test('a hint naming an existing index is honoured (same results)', async () => {
    const coll = db.collection<Loose>('hinted');
    expect((await coll.find({ a: { $gte: 2 } }).hint('a_1').toArray()).map((d) => d._id)).toEqual([2, 3]);
    expect((await coll.find({ a: { $gte: 2 } }).hint({ a: 1 }).toArray()).map((d) => d._id)).toEqual([2, 3]);
    expect((await coll.find({}).hint({ $natural: 1 }).toArray()).map((d) => d._id)).toEqual([1, 2, 3]);
  });

  test('a hinted sparse index returns only the documents it indexes', async () => {
    const coll = db.collection<Loose>('hinted');
    expect((await coll.find({}).hint('s_sparse').sort({ _id: 1 }).toArray()).map((d) => d._id)).toEqual([1, 3]);
  });

  test('a hint naming no index fails with BadValue (2) for reads and writes', async () => {
    const coll = db.collection<Loose>('hinted');
    const onFind = await expectServerError(coll.find({}).hint('nope_1').toArray(), 2);
    expect(onFind.message).toContain('hint provided does not correspond to an existing index');
    const onUpdate = await expectServerError(coll.updateOne({ _id: 1 }, { $set: { b: 1 } }, { hint: { nope: 1 } }), 2);
    expect(onUpdate.message).toContain('hint provided does not correspond to an existing index');
    await expectServerError(coll.deleteOne({ _id: 1 }, { hint: 'nope_1' }), 2);
    await expectServerError(coll.findOneAndUpdate({ _id: 1 }, { $set: { b: 1 } }, { hint: { nope: 1 } }), 2);
    expect(await coll.findOne({ _id: 1 })).toEqual({ _id: 1, a: 1, s: 'x' });
    const onMissing = await db.collection<Loose>('no_such_coll').find({}).hint('nope_1').toArray();
    expect(onMissing).toEqual([]);
  });
});
