/**
 * $$NOW is the server's clock, one value for a whole command, usable in $expr filters, pipeline
 * updates, find projections and aggregations; $$CLUSTER_TIME is a Timestamp on a replica set.
 *
 * Sources ((*): location or wording recalled, not re-read for this audit): manual "Variables in Aggregation Expressions" (*): "$$NOW returns the current datetime value,
 * which is same across all members of the deployment and remains the same throughout all stages of
 * the aggregation pipeline"; "$$CLUSTER_TIME ... only available in replica sets and sharded clusters".
 * One value per command: Variables::generateRuntimeConstants (src/mongo/db/pipeline/variables.cpp)
 * sets NOW once for the operation.
 */
import { Timestamp, type Collection, type Db, type MongoClient } from 'mongodb';
import { deploymentFacts, describeIf, openClient, sleep, uniqueDbName, type Loose } from './support/server';

const dbName = uniqueDbName('conf_now');
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

const HOUR = 3600_000;
const DAY = 24 * HOUR;

async function seeded(name: string, count: number): Promise<Collection<Loose>> {
  const coll = db.collection<Loose>(name);
  await coll.insertMany(Array.from({ length: count }, (_, i) => ({ _id: i, n: i })));
  return coll;
}

function expectServerDate(value: unknown): Date {
  expect(value).toBeInstanceOf(Date);
  const date = value as Date;
  // The server's clock, not ours; but any real server is within a day of this machine.
  expect(Math.abs(date.getTime() - Date.now())).toBeLessThan(DAY);
  return date;
}

test('a pipeline update sets $$NOW, and an updateMany gives every document the same value', async () => {
  const coll = await seeded('now_many', 40);
  const result = await coll.updateMany({}, [{ $set: { t: '$$NOW' } }]);
  expect(result).toMatchObject({ matchedCount: 40, modifiedCount: 40 });
  const docs = await coll.find().toArray();
  expect(docs).toHaveLength(40);
  const first = expectServerDate(docs[0].t);
  for (const doc of docs) expect((doc.t as Date).getTime()).toBe(first.getTime());
});

test('$$NOW in an expression computes an expiry in the same command', async () => {
  const coll = await seeded('now_expiry', 3);
  await coll.updateMany({}, [{ $set: { at: '$$NOW', expiresAt: { $add: ['$$NOW', 30_000] } } }]);
  for (const doc of await coll.find().toArray()) {
    expectServerDate(doc.at);
    expect((doc.expiresAt as Date).getTime() - (doc.at as Date).getTime()).toBe(30_000);
  }
});

test('$$NOW in $expr filters of find, count, update and delete compares against the server clock', async () => {
  const coll = db.collection<Loose>('now_expr');
  const now = Date.now();
  await coll.insertMany([
    { _id: 'expired1', expiresAt: new Date(now - HOUR) },
    { _id: 'expired2', expiresAt: new Date(now - 2 * HOUR) },
    { _id: 'live', expiresAt: new Date(now + HOUR) },
  ]);
  const expiredFilter = { $expr: { $lt: ['$expiresAt', '$$NOW'] } };
  const found = await coll.find(expiredFilter).sort({ _id: 1 }).toArray();
  expect(found.map((d) => d._id)).toEqual(['expired1', 'expired2']);
  expect(await coll.countDocuments(expiredFilter)).toBe(2);

  const claimLive = await coll.updateOne({ _id: 'live', $expr: { $lt: ['$expiresAt', '$$NOW'] } }, { $set: { owner: 'x' } });
  expect(claimLive).toMatchObject({ matchedCount: 0, modifiedCount: 0 });
  const claimExpired = await coll.updateOne({ _id: 'expired1', $expr: { $lt: ['$expiresAt', '$$NOW'] } }, { $set: { owner: 'x' } });
  expect(claimExpired).toMatchObject({ matchedCount: 1, modifiedCount: 1 });

  const deleted = await coll.deleteMany(expiredFilter);
  expect(deleted.deletedCount).toBe(2);
  expect(await coll.find().toArray()).toEqual([{ _id: 'live', expiresAt: new Date(now + HOUR) }]);
});

test('a findOneAndUpdate with a $$NOW pipeline returns the stamped document', async () => {
  const coll = db.collection<Loose>('now_fam');
  const doc = await coll.findOneAndUpdate(
    { _id: 'lock' },
    [{ $set: { acquiredAt: '$$NOW', expiresAt: { $add: ['$$NOW', 5000] } } }],
    { upsert: true, returnDocument: 'after' },
  );
  expect(doc).not.toBeNull();
  const acquiredAt = expectServerDate(doc?.acquiredAt);
  expect((doc?.expiresAt as Date).getTime()).toBe(acquiredAt.getTime() + 5000);
});

test('$$NOW in a find projection and in an aggregation: one value for all returned documents', async () => {
  const coll = await seeded('now_project', 10);
  const projected = await coll.find({}, { projection: { now: '$$NOW' } }).toArray();
  expect(projected).toHaveLength(10);
  const p0 = expectServerDate(projected[0].now);
  for (const doc of projected) {
    expect(Object.keys(doc).sort()).toEqual(['_id', 'now']);
    expect((doc.now as Date).getTime()).toBe(p0.getTime());
  }

  const aggregated = await coll.aggregate([{ $addFields: { now: '$$NOW' } }, { $sort: { _id: 1 } }]).toArray();
  expect(aggregated).toHaveLength(10);
  const a0 = expectServerDate(aggregated[0].now);
  for (const doc of aggregated) expect((doc.now as Date).getTime()).toBe(a0.getTime());
  expect(a0.getTime()).toBeGreaterThanOrEqual(p0.getTime());
});

test('$$NOW never goes backwards across sequential commands', async () => {
  const coll = await seeded('now_monotonic', 1);
  const seen: number[] = [];
  for (let i = 0; i < 6; i += 1) {
    await coll.updateOne({ _id: 0 }, [{ $set: { t: '$$NOW' } }]);
    seen.push(((await coll.findOne({ _id: 0 }))?.t as Date).getTime());
    const [projected] = await coll.find({ _id: 0 }, { projection: { now: '$$NOW' } }).toArray();
    seen.push((projected.now as Date).getTime());
    await sleep(15);
  }
  for (let i = 1; i < seen.length; i += 1) expect(seen[i]).toBeGreaterThanOrEqual(seen[i - 1]);
  // About 90 ms of sleeps separate the first and the last reading.
  expect(seen[seen.length - 1]).toBeGreaterThan(seen[0]);
});

const facts = deploymentFacts();
describeIf(facts.setName !== undefined, '$$CLUSTER_TIME exists only on replica sets and sharded clusters; this deployment is a standalone')(
  '$$CLUSTER_TIME on a replica set',
  () => {
    test('is a Timestamp, the same for every document of one command, stored by a pipeline update', async () => {
      const coll = await seeded('cluster_time', 5);
      const docs = await coll.aggregate([{ $project: { ct: '$$CLUSTER_TIME' } }]).toArray();
      expect(docs).toHaveLength(5);
      expect(docs[0].ct).toBeInstanceOf(Timestamp);
      const first = docs[0].ct as Timestamp;
      expect(first.high).toBeGreaterThan(0);
      for (const doc of docs) expect((doc.ct as Timestamp).equals(first)).toBe(true);

      await coll.updateMany({}, [{ $set: { ct: '$$CLUSTER_TIME' } }]);
      const stored = await coll.find().toArray();
      expect(stored[0].ct).toBeInstanceOf(Timestamp);
      for (const doc of stored) expect((doc.ct as Timestamp).equals(stored[0].ct as Timestamp)).toBe(true);
      // Cluster time only moves forward: the update's command ran after the aggregation.
      expect((stored[0].ct as Timestamp).compare(first)).toBeGreaterThanOrEqual(0);
    });
  },
);
