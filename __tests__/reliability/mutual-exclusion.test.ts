/**
 * Mutual exclusion across processes (issue 5, PRODUCT.md property 1): several child processes,
 * each with many concurrent workers, fight over a handful of documents. Every critical section
 * does a non-atomic read-modify-write of a counter and marks itself in an overlap detector that
 * no lock code touches. Afterwards: no section ever saw another inside, the detector's high-water
 * mark is 1, and each counter equals the number of sections run on its document.
 *
 * Sized by a time budget (issue 10): workers start sections until MPL_ME_SECTIONS each are done
 * or MPL_ME_BUDGET_MS (default 60 s) has passed, whichever comes first, so a loaded machine runs
 * fewer sections instead of being killed at the time limit; past the budget they go on only
 * until MPL_ME_MIN_SECTIONS (default 400) have run, within a hard limit. What it proves does not
 * change: at least that many contended sections, and every check below holds for each of them.
 */
import { Types } from 'mongoose';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel } from '../support/work-item';
import { killAll, spawnWorker } from './support/children';
import type { ContenderConfig, ContenderReport } from './workers/contender';

const PROCESSES = Number(process.env.MPL_ME_PROCESSES ?? 4);
const WORKERS = Number(process.env.MPL_ME_WORKERS ?? 25);
const SECTIONS_PER_WORKER = Number(process.env.MPL_ME_SECTIONS ?? 100);
const DOCUMENTS = 5;
/** Far above any section's length, so exclusion never ends by expiry during the test. */
const TTL_MS = 60_000;
/** How long workers keep starting new critical sections. */
const BUDGET_MS = Number(process.env.MPL_ME_BUDGET_MS ?? 60_000);
/** Fewest sections that still make the run a meaningful race. */
const MIN_SECTIONS = Number(process.env.MPL_ME_MIN_SECTIONS ?? 400);
/** No section starts later than this after the start, whatever the count. */
const HARD_LIMIT_MS = Number(process.env.MPL_ME_HARD_LIMIT_MS ?? BUDGET_MS * 3);
/** Bound on each child process: the hard limit, plus starting up and finishing the sections under way. */
const CHILD_TIMEOUT_MS = Number(process.env.MPL_ME_TIMEOUT_MS ?? HARD_LIMIT_MS + 60_000);

interface SectionRecord {
  _id: number;
  value: number;
  inside: number;
  maxInside: number;
}

const db = testDatabase('mutex');
let conn: MonitoredConnection;

beforeAll(async () => {
  conn = await connect(db.name);
});

afterAll(async () => {
  await killAll();
  await db.drop(conn.connection).catch(() => undefined);
  await conn.close();
});

test(`${PROCESSES} processes x ${WORKERS} workers, up to ${PROCESSES * WORKERS * SECTIONS_PER_WORKER} critical sections (at least ${MIN_SECTIONS}) in ${BUDGET_MS / 1000} s over ${DOCUMENTS} documents: no overlap, no lost update`, async () => {
  const WorkItem = await workItemModel(conn.connection, { ttl: TTL_MS }, 'ReliabilityItem');
  const ids: Types.ObjectId[] = [];
  const raw = conn.connection.getClient().db(db.name);
  const detector = raw.collection<SectionRecord>('me_sections');
  for (let d = 0; d < DOCUMENTS; d++) {
    ids.push((await WorkItem.create({ title: `contended ${d}` }))._id);
    await detector.insertOne({ _id: d, value: 0, inside: 0, maxInside: 0 });
  }

  const started = performance.now();
  // Children start up (compile, connect) within the budget's first seconds; the clock is shared.
  const deadline = Date.now() + BUDGET_MS;
  const hardDeadline = Date.now() + HARD_LIMIT_MS;
  const children = Array.from({ length: PROCESSES }, (_, p) => {
    const config: ContenderConfig = {
      uri: process.env.MONGODB_URI!,
      dbName: db.name,
      process: p,
      workers: WORKERS,
      sectionsPerWorker: SECTIONS_PER_WORKER,
      ids: ids.map((id) => id.toHexString()),
      ttl: TTL_MS,
      backoffMs: Number(process.env.MPL_ME_BACKOFF ?? 100),
      backoffCapMs: Number(process.env.MPL_ME_BACKOFF_CAP ?? 3000),
      thinkMs: Number(process.env.MPL_ME_THINK ?? 0),
      deadline,
      hardDeadline,
      minSections: Math.ceil(MIN_SECTIONS / PROCESSES),
    };
    return spawnWorker('contender.ts', { MPL_CONTENDER: JSON.stringify(config) }, CHILD_TIMEOUT_MS);
  });
  const codes = await Promise.all(children.map((c) => c.exited));
  const elapsed = performance.now() - started;
  children.forEach((child, p) => {
    if (codes[p] !== 0) throw new Error(`child ${p} ended with ${codes[p]}: ${child.stderr()}`);
  });
  const reports = children.map((child) => JSON.parse(child.lines[child.lines.length - 1]) as ContenderReport);

  const sections = reports.reduce((sum, r) => sum + r.sections, 0);
  const lockedErrors = reports.reduce((sum, r) => sum + r.lockedErrors, 0);
  const childCpuMs = reports.reduce((sum, r) => sum + r.cpuMs, 0);
  console.log(
    `mutual exclusion: ${sections} critical sections (${lockedErrors} LockedError retries) by ${PROCESSES}x${WORKERS} workers in ${(elapsed / 1000).toFixed(1)} s ` +
      `(${Math.round(sections / (elapsed / 1000))} sections/s, about ${Math.round((5 * sections + 2 * lockedErrors) / (elapsed / 1000))} commands/s, ` +
      `children's CPU ${(childCpuMs / 1000).toFixed(1)} s) on ${process.env.MPL_TEST_BACKEND}`,
  );

  expect(sections).toBeGreaterThanOrEqual(Math.min(MIN_SECTIONS, PROCESSES * WORKERS * SECTIONS_PER_WORKER));
  expect(sections).toBeLessThanOrEqual(PROCESSES * WORKERS * SECTIONS_PER_WORKER);
  expect(reports.map((r) => r.overlapsSeen)).toEqual(Array(PROCESSES).fill(0));
  // Every document was contended (so the test raced) ...
  expect(lockedErrors).toBeGreaterThan(0);
  // ... and the independent record agrees: never two inside, no increment lost.
  const records = await detector.find().sort({ _id: 1 }).toArray();
  expect(records.map((r) => r.maxInside)).toEqual(Array(DOCUMENTS).fill(1));
  expect(records.map((r) => r.inside)).toEqual(Array(DOCUMENTS).fill(0));
  expect(records.reduce((sum, r) => sum + r.value, 0)).toBe(sections);
  // Every document was worked on many times, not just one of them.
  for (const r of records) expect(r.value).toBeGreaterThanOrEqual(Math.floor(sections / DOCUMENTS / 4));
  // Every lock was released: no record is unexpired.
  const stillHeld = await WorkItem.lockModel().countDocuments({ $expr: { $gt: ['$expiresAt', '$$NOW'] } });
  expect(stillHeld).toBe(0);
}, CHILD_TIMEOUT_MS + 30_000);
