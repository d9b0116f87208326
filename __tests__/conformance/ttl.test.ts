/**
 * TTL indexes: the background monitor deletes documents whose indexed date plus
 * expireAfterSeconds has passed; non-date values never expire; an array of dates expires at its
 * earliest date. The monitor period is the server parameter ttlMonitorSleepSecs.
 *
 * Sources ((*): location or wording recalled, not re-read for this audit): manual "TTL Indexes" (*) (expiry = indexed date + expireAfterSeconds; "If the indexed field in
 * a document is not a date or an array that holds one or more date values, the document will not
 * expire"; for an array "MongoDB uses the lowest (earliest) date value"; the TTL monitor runs every 60
 * seconds by default, parameter ttlMonitorSleepSecs); setParameter replies `was` with the previous
 * value (manual, "setParameter").
 */
import type { Collection, Db, MongoClient } from 'mongodb';
import { adminCommand, openClient, pollUntil, sleep, uniqueDbName, type Loose } from './support/server';

const dbName = uniqueDbName('conf_ttl');
let client: MongoClient;
let db: Db;

beforeAll(async () => {
  client = await openClient();
  db = client.db(dbName);
  // The harness starts the backend with ttlMonitorSleepSecs=1; state it here too, as mongod allows at run time.
  const reply = await adminCommand(client, { setParameter: 1, ttlMonitorSleepSecs: 1 });
  expect(reply.ok).toBe(1);
  expect(reply.was).toEqual(expect.any(Number));
});

afterAll(async () => {
  await db.dropDatabase();
  await client.close();
});

const HOUR = 3600_000;
/** Generous: with a 1 s monitor period a real mongod deletes within two or three passes. */
const DEADLINE_MS = 10_000;

async function ids(coll: Collection<Loose>): Promise<unknown[]> {
  return (await coll.find({}, { projection: { _id: 1 } }).sort({ _id: 1 }).toArray()).map((d) => d._id);
}

test('getParameter reads ttlMonitorSleepSecs back; setParameter reports the previous value', async () => {
  const got = await adminCommand(client, { getParameter: 1, ttlMonitorSleepSecs: 1 });
  expect(got.ok).toBe(1);
  expect(got.ttlMonitorSleepSecs).toBe(1);

  const set = await adminCommand(client, { setParameter: 1, ttlMonitorSleepSecs: 2 });
  expect(set.was).toBe(1);
  expect((await adminCommand(client, { getParameter: 1, ttlMonitorSleepSecs: 1 })).ttlMonitorSleepSecs).toBe(2);
  const back = await adminCommand(client, { setParameter: 1, ttlMonitorSleepSecs: 1 });
  expect(back.was).toBe(2);
  expect((await adminCommand(client, { getParameter: 1, ttlMonitorSleepSecs: 1 })).ttlMonitorSleepSecs).toBe(1);
});

test('listIndexes shows expireAfterSeconds on a TTL index', async () => {
  const coll = db.collection<Loose>('ttl_list');
  const name = await coll.createIndex({ expiresAt: 1 }, { expireAfterSeconds: 30 });
  expect(name).toBe('expiresAt_1');
  const index = (await coll.listIndexes().toArray()).find((ix) => ix.name === 'expiresAt_1');
  expect(index).toMatchObject({ key: { expiresAt: 1 }, expireAfterSeconds: 30 });
});

test('the monitor deletes expired documents (date, array with a past date) and keeps the rest', async () => {
  const coll = db.collection<Loose>('ttl_mixed');
  await coll.createIndex({ expiresAt: 1 }, { expireAfterSeconds: 0 });
  const now = Date.now();
  await coll.insertMany([
    { _id: 'past', expiresAt: new Date(now - HOUR) },
    { _id: 'future', expiresAt: new Date(now + HOUR) },
    { _id: 'string', expiresAt: new Date(now - HOUR).toISOString() },
    { _id: 'number', expiresAt: now - HOUR },
    { _id: 'missing' },
    { _id: 'nullValue', expiresAt: null },
    { _id: 'arrayEarliestPast', expiresAt: [new Date(now + HOUR), new Date(now - HOUR)] },
    { _id: 'arrayAllFuture', expiresAt: [new Date(now + HOUR), new Date(now + 2 * HOUR)] },
  ]);

  const expired = ['past', 'arrayEarliestPast'];
  const gone = await pollUntil(async () => (await coll.countDocuments({ _id: { $in: expired } })) === 0, DEADLINE_MS, 200);
  expect({ expiredDeletedWithinDeadline: gone }).toEqual({ expiredDeletedWithinDeadline: true });

  // Two more monitor passes: nothing else may go.
  await sleep(2500);
  expect(await ids(coll)).toEqual(['arrayAllFuture', 'future', 'missing', 'nullValue', 'number', 'string']);
});

test('expireAfterSeconds is added to the indexed date', async () => {
  const coll = db.collection<Loose>('ttl_offset');
  await coll.createIndex({ at: 1 }, { expireAfterSeconds: 3600 });
  const now = Date.now();
  await coll.insertMany([
    { _id: 'twoHoursAgo', at: new Date(now - 2 * HOUR) },
    { _id: 'tenMinutesAgo', at: new Date(now - 10 * 60_000) },
  ]);
  const gone = await pollUntil(async () => (await coll.countDocuments({ _id: 'twoHoursAgo' })) === 0, DEADLINE_MS, 200);
  expect({ expiredDeletedWithinDeadline: gone }).toEqual({ expiredDeletedWithinDeadline: true });
  await sleep(2500);
  expect(await ids(coll)).toEqual(['tenMinutesAgo']);
});

test('a document updated to a past date is deleted by a later pass', async () => {
  const coll = db.collection<Loose>('ttl_update');
  await coll.createIndex({ expiresAt: 1 }, { expireAfterSeconds: 0 });
  await coll.insertOne({ _id: 'lock', expiresAt: new Date(Date.now() + HOUR) });
  await sleep(1500);
  expect(await ids(coll)).toEqual(['lock']);
  await coll.updateOne({ _id: 'lock' }, { $set: { expiresAt: new Date(Date.now() - 1000) } });
  const gone = await pollUntil(async () => (await coll.countDocuments()) === 0, DEADLINE_MS, 200);
  expect({ deletedWithinDeadline: gone }).toEqual({ deletedWithinDeadline: true });
});
