/**
 * lockNext under real concurrency (issue 17, PRODUCT.md property 14): several child processes,
 * each with several job-worker loops, claim 1,000 queued jobs (__tests__/reliability/workers/
 * next-claimer.ts). An independent detector (a collection no lock code touches) counts, per job,
 * the claimants inside at once and how often it was claimed. Afterwards:
 *  - no job was ever held by two claimants at once (the detector's high-water mark is 1), and no
 *    finished job was claimed again after it was finished (each finished exactly once);
 *  - no worker got null while free jobs existed: the processes' quotas leave RESERVE jobs queued
 *    the whole time, more than the workers can hold, so every null would be a false "queue empty";
 *  - every worker finished jobs (no starvation);
 *  - collisions (acquisitions that found the candidate taken) are counted and bounded;
 *  - a final drain by this process claims the last remaining jobs and then answers null.
 * Sized by a time budget (as mutual-exclusion.test.ts): the children stop at their quota or when
 * MPL_LN_BUDGET_MS (default 60 s) has passed, whichever comes first, so a loaded machine runs fewer
 * claims instead of timing out; a process goes on past the budget until it has finished
 * MIN_FINISHED jobs (within three budgets).
 * Runs on the replica set and (MONGO_TOPOLOGY=standalone) the standalone; workers with their own
 * owners and workers sharing one owner per process.
 */
import type { Types } from 'mongoose';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { jobModel, type JobModel } from '../support/job';
import { killAll, spawnWorker } from './support/children';
import type { NextClaimerConfig, NextClaimerReport } from './workers/next-claimer';

const PROCESSES = Number(process.env.MPL_LN_PROCESSES ?? 4);
const WORKERS = Number(process.env.MPL_LN_WORKERS ?? 4);
const JOBS = Number(process.env.MPL_LN_JOBS ?? 1_000);
/** Jobs that stay queued during the race: far more than the workers can hold at once. */
const RESERVE = Math.max(50, 3 * PROCESSES * WORKERS);
const BUDGET_MS = Number(process.env.MPL_LN_BUDGET_MS ?? 60_000);
/** Fewest jobs each process must finish for the run to be a real race. */
const MIN_FINISHED = Number(process.env.MPL_LN_MIN_FINISHED ?? 20);
/** Bound on each child: starting up, the budget, and finishing the claims under way. */
const CHILD_TIMEOUT_MS = Number(process.env.MPL_LN_TIMEOUT_MS ?? 3 * BUDGET_MS + 120_000);
/** Jobs left queued for the final drain. */
const DRAIN = 20;

interface ClaimRecord {
  _id: Types.ObjectId;
  inside: number;
  maxInside: number;
  claims: number;
}

const db = testDatabase('lnrace');
let conn: MonitoredConnection;

beforeAll(async () => {
  conn = await connect(db.name);
});

afterAll(async () => {
  await killAll();
  await db.drop(conn.connection).catch(() => undefined);
  await conn.close();
});

async function race(modelName: string, sharedOwner: boolean): Promise<{ Job: JobModel; reports: NextClaimerReport[]; elapsed: number }> {
  const Job = await jobModel(conn.connection, { ttl: 60_000 }, modelName);
  const t0 = Date.now();
  await Job.insertMany(Array.from({ length: JOBS }, (_, i) => ({ priority: i % 7, createdAt: new Date(t0 + i), payload: `job ${i}` })));
  const quota = Math.floor((JOBS - RESERVE) / PROCESSES);
  const started = performance.now();
  const children = Array.from({ length: PROCESSES }, (_, p) => {
    const config: NextClaimerConfig = {
      uri: process.env.MONGODB_URI!,
      dbName: db.name,
      modelName,
      process: p,
      workers: WORKERS,
      quota,
      giveBack: 0.1,
      ttl: 60_000,
      sharedOwner,
      deadline: Date.now() + BUDGET_MS,
      minFinished: Math.min(quota, MIN_FINISHED),
      hardDeadline: Date.now() + 3 * BUDGET_MS,
    };
    return spawnWorker('next-claimer.ts', { MPL_NEXT_CLAIMER: JSON.stringify(config) }, CHILD_TIMEOUT_MS);
  });
  const codes = await Promise.all(children.map((c) => c.exited));
  const elapsed = performance.now() - started;
  children.forEach((child, p) => {
    if (codes[p] !== 0) throw new Error(`child ${p} ended with ${codes[p]}: ${child.stderr()}`);
  });
  const reports = children.map((child) => JSON.parse(child.lines[child.lines.length - 1]) as NextClaimerReport);
  for (const r of reports) {
    expect(r.finished).toBeLessThanOrEqual(quota);
    expect(r.finished).toBeGreaterThanOrEqual(Math.min(quota, MIN_FINISHED));
  }
  return { Job, reports, elapsed };
}

async function checkDetector(Job: JobModel, reports: NextClaimerReport[]): Promise<void> {
  const detector = conn.connection.getClient().db(db.name).collection<ClaimRecord>('ln_claims');
  const ids = (await Job.find({}, { _id: 1 }).lean()).map((d) => d._id);
  const records = await detector.find({ _id: { $in: ids } }).toArray();
  // Never two claimants inside one job at once; nobody left inside.
  expect(records.filter((r) => r.maxInside !== 1)).toEqual([]);
  expect(records.filter((r) => r.inside !== 0)).toEqual([]);
  expect(reports.map((r) => r.overlapsSeen)).toEqual(Array(PROCESSES).fill(0));
  // Each finished job was finished once, and claims were all accounted for.
  const finished = reports.reduce((sum, r) => sum + r.finished, 0);
  const givenBack = reports.reduce((sum, r) => sum + r.givenBack, 0);
  expect(await Job.countDocuments({ status: 'done' })).toBe(finished);
  expect(await Job.countDocuments({ status: 'done', attempts: { $ne: 1 } })).toBe(0);
  expect(records.reduce((sum, r) => sum + r.claims, 0)).toBe(finished + givenBack);
}

test.each([
  ['each worker its own owner', false],
  ['the workers of a process sharing one owner', true],
])(`${PROCESSES} processes x ${WORKERS} workers over ${JOBS} jobs (%s): no double claim, no false empty, nobody starved`, async (_label, sharedOwner) => {
  const name = sharedOwner ? 'RaceShared' : 'RaceOwn';
  const { Job, reports, elapsed } = await race(name, sharedOwner);
  const stats = reports.map((r) => r.stats);
  const sum = (key: keyof NextClaimerReport['stats']) => stats.reduce((total, s) => total + s[key], 0);
  const finished = reports.reduce((total, r) => total + r.finished, 0);
  console.log(
    `lockNext race (${name}): ${finished} jobs finished, ${reports.reduce((t, r) => t + r.givenBack, 0)} given back, by ${PROCESSES}x${WORKERS} workers in ${(elapsed / 1000).toFixed(1)} s; ` +
      `${sum('claims')} claims, ${sum('attempts')} acquisitions (${sum('collisions')} collisions), ${sum('reads')} candidate reads, ${sum('notMatching')} stale candidates; on ${process.env.MPL_TEST_BACKEND}`,
  );
  await checkDetector(Job, reports);
  // No false "queue empty": free jobs existed the whole time.
  expect(reports.map((r) => r.nulls)).toEqual(Array(PROCESSES).fill(0));
  // Nobody starved.
  for (const r of reports) for (const n of r.perWorker) expect(n).toBeGreaterThan(0);
  // Collisions happen across processes (the race was real) but stay a fraction of the claims.
  expect(sum('collisions')).toBeLessThan(sum('claims'));
  expect(sum('claims')).toBe(finished + reports.reduce((t, r) => t + r.givenBack, 0));

  // The drain: all but DRAIN of the jobs left are finished directly; this process claims the last
  // ones with concurrent calls, and once they are all done the answer is null.
  const left = await Job.countDocuments({ status: 'queued' });
  expect(left).toBeGreaterThanOrEqual(RESERVE);
  const skipped = (await Job.find({ status: 'queued' }, { _id: 1 }).sort({ priority: 1, createdAt: -1 }).limit(left - DRAIN).lean()).map((d) => d._id);
  await conn.connection.getClient().db(db.name).collection(Job.collection.collectionName).updateMany({ _id: { $in: skipped } }, { $set: { status: 'done' } });
  const drained = await Promise.all(
    Array.from({ length: 4 }, async (_, w) => {
      let n = 0;
      for (;;) {
        const job = await Job.lockNext({ status: 'queued' }, `drainer-${w}`, { sort: { priority: -1, createdAt: 1 } });
        if (!job) return n;
        job.status = 'done';
        await job.saveAndUnlock();
        n++;
      }
    }),
  );
  expect(drained.reduce((a, b) => a + b, 0)).toBe(DRAIN);
  expect(await Job.countDocuments({ status: 'queued' })).toBe(0);
}, CHILD_TIMEOUT_MS + 120_000);
