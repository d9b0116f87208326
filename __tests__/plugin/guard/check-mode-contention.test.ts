/**
 * Check mode's rounds (write-guard.ts, checkThenWrite; issue 16 item 1) under real contention, many
 * clients at once on one filter (PRODUCT.md property 10: writes nobody's lock concerns behave as
 * without the plugin, also under heavy contention). Written by the attack on 8078351; these held:
 *  - many upserters of one key under a unique index: every call succeeds, exactly one inserts, the
 *    rest update it (mongod's own duplicate-key retry gives the same, R9), no livelock;
 *  - job-queue claims (`findOneAndUpdate({ status: 'open' }, ..., { sort })` by many workers): every
 *    job is claimed exactly once, and a worker is told "none" only when no job is open (mongod's
 *    update moves on to the next match after a write conflict, R8; check mode searches again);
 *  - upserts whose update makes their match stop matching (claim-or-create): each existing document
 *    is taken by exactly one call, the others insert, no call fails.
 * Independent observers: the raw driver's view of the collection after the calls.
 */
import { connect, testDatabase, type MonitoredConnection } from '../../support/db';
import { workItemModel, type WorkItemModel } from '../../support/work-item';
import { outcome, rawCollection } from './support';

const db = testDatabase('checkcontention');
const CLIENTS = 4;
const connections: MonitoredConnection[] = [];
const models: WorkItemModel[] = [];

beforeAll(async () => {
  for (let i = 0; i < CLIENTS; i++) {
    const c = await connect(db.name);
    connections.push(c);
    models.push(await workItemModel(c.connection, { ttl: 60_000, transactions: 'never' }, 'CheckContention'));
  }
});

afterAll(async () => {
  await db.drop(connections[0].connection);
  await Promise.all(connections.map((c) => c.close()));
});

beforeEach(async () => {
  const raw = rawCollection(models[0]);
  await raw.deleteMany({});
  await raw.dropIndexes();
});

test('16 concurrent upserts of one key under a unique index: all succeed, one inserts, the count is 16', async () => {
  const raw = rawCollection(models[0]);
  await raw.createIndex({ title: 1 }, { unique: true });
  for (let round = 0; round < 3; round++) {
    const title = `key-${round}`;
    const results = await Promise.all(Array.from({ length: 16 }, (_, i) => outcome(models[i % CLIENTS].updateOne({ title }, { $inc: { edits: 1 } }, { upsert: true }).exec())));
    expect(results.map((r) => (r.ok ? 'ok' : String(r.error)))).toEqual(Array(16).fill('ok'));
    expect(results.filter((r) => r.ok && r.value.upsertedCount === 1)).toHaveLength(1);
    expect((await raw.find({ title }).toArray()).map((d) => d.edits as unknown)).toEqual([16]);
  }
}, 120_000);

test('12 workers claiming 60 jobs with a sorted findOneAndUpdate: each job claimed once, "none" only when none is open', async () => {
  const raw = rawCollection(models[0]);
  const JOBS = 60;
  await raw.insertMany(Array.from({ length: JOBS }, (_, i) => ({ title: `job-${i}`, status: 'open', edits: i })));
  const claimed: string[] = [];
  const openWhenToldNone: number[] = [];
  await Promise.all(
    Array.from({ length: 12 }, async (_, w) => {
      const M = models[w % CLIENTS];
      for (;;) {
        const job = await M.findOneAndUpdate({ status: 'open' }, { $set: { status: 'done' } }, { sort: { edits: 1 } }).lean().exec();
        if (job === null) {
          // Jobs are only ever taken: once none is open, none opens again.
          openWhenToldNone.push(await raw.countDocuments({ status: 'open' }));
          return;
        }
        claimed.push(job.title);
      }
    }),
  );
  expect(claimed).toHaveLength(JOBS);
  expect(new Set(claimed).size).toBe(JOBS);
  expect(openWhenToldNone).toEqual(Array(12).fill(0));
}, 120_000);

test('20 concurrent claim-or-create upserts over 5 open slots: 5 take a slot, 15 insert, none fails', async () => {
  const raw = rawCollection(models[0]);
  await raw.insertMany(Array.from({ length: 5 }, (_, i) => ({ title: 'slot', status: 'open', edits: i })));
  const results = await Promise.all(Array.from({ length: 20 }, (_, i) => outcome(models[i % CLIENTS].updateOne({ title: 'slot', status: 'open' }, { $set: { status: 'done' } }, { upsert: true }).exec())));
  expect(results.map((r) => (r.ok ? 'ok' : String(r.error)))).toEqual(Array(20).fill('ok'));
  expect({
    matched: results.filter((r) => r.ok && r.value.matchedCount === 1).length,
    upserted: results.filter((r) => r.ok && r.value.upsertedCount === 1).length,
    stored: await raw.countDocuments({ title: 'slot', status: 'done' }),
    open: await raw.countDocuments({ status: 'open' }),
  }).toEqual({ matched: 5, upserted: 15, stored: 20, open: 0 });
}, 120_000);
