/**
 * Model.lockMany under contention across processes (issue 17 item 2, PRODUCT.md property 15):
 * several child processes, each with several workers, lock overlapping groups of documents,
 * listed in opposite orders, some waiting (`wait`) and some not; the server stalls some of the
 * acquisition updates (failCommand `blockConnection` with an activation probability), so rounds
 * overlap in time.
 *
 * Checked independently of the plugin:
 *  - no deadlock, no starvation: every child finishes its sections within the bound, and every
 *    waiting worker got through;
 *  - exclusion: an overlap detector (collection `group_sections`, one record per document, no lock
 *    code touches it) never sees two sections inside one document, and no increment is lost;
 *  - all or nothing: right after lockMany returned, its owner held every document of the group;
 *    right after it threw, none (read with the raw driver on the lock collection);
 *  - nothing is left held at the end.
 */
import { Types } from 'mongoose';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { usesPrivateServer } from '../support/private-server';
import { workItemModel } from '../support/work-item';
import { killAll, spawnWorker } from './support/children';
import type { GroupContenderConfig, GroupContenderReport } from './workers/group-contender';

// Arms failCommand on the shared server (stalls of the acquisition updates).
usesPrivateServer();

const PROCESSES = Number(process.env.MPL_GROUP_PROCESSES ?? 3);
const WORKERS = Number(process.env.MPL_GROUP_WORKERS ?? 4);
const SECTIONS = Number(process.env.MPL_GROUP_SECTIONS ?? 12);
const DOCUMENTS = 6;
const TTL_MS = 60_000;
const WAIT_MS = 60_000;
/** MPL_GROUP_ALL_WAIT=1: every worker waits (no refusals then; for measuring waits alone). */
const ALL_WAIT = process.env.MPL_GROUP_ALL_WAIT === '1';
const BUDGET_MS = Number(process.env.MPL_GROUP_BUDGET_MS ?? 60_000);
const CHILD_TIMEOUT_MS = BUDGET_MS + WAIT_MS + 30_000;

interface SectionRecord {
  _id: number;
  inside: number;
  maxInside: number;
  value: number;
}

const db = testDatabase('group_races');
let conn: MonitoredConnection;

beforeAll(async () => {
  conn = await connect(db.name);
});

afterAll(async () => {
  await killAll();
  await conn.connection.getClient().db('admin').command({ configureFailPoint: 'failCommand', mode: 'off' }).catch(() => undefined);
  await db.drop(conn.connection).catch(() => undefined);
  await conn.close();
});

test(`${PROCESSES} processes x ${WORKERS} workers lock overlapping groups of ${DOCUMENTS} documents in opposite orders: no deadlock, no overlap, never a partial group`, async () => {
  const WorkItem = await workItemModel(conn.connection, { ttl: TTL_MS }, 'GroupRaceItem');
  const raw = conn.connection.getClient().db(db.name);
  const detector = raw.collection<SectionRecord>('group_sections');
  const ids: Types.ObjectId[] = [];
  for (let d = 0; d < DOCUMENTS; d++) {
    ids.push((await WorkItem.create({ title: `group ${d}` }))._id);
    await detector.insertOne({ _id: d, inside: 0, maxInside: 0, value: 0 });
  }
  // Stall a fifth of the acquisition and release updates for 30 ms, so rounds overlap in time.
  await conn.connection.getClient().db('admin').command({
    configureFailPoint: 'failCommand',
    mode: { activationProbability: 0.2 },
    data: { namespace: `${db.name}.${WorkItem.lockModel().collection.collectionName}`, failCommands: ['update'], blockConnection: true, blockTimeMS: 30 },
  });

  const started = performance.now();
  const deadline = Date.now() + BUDGET_MS;
  const children = Array.from({ length: PROCESSES }, (_, p) => {
    const config: GroupContenderConfig = {
      uri: process.env.MONGODB_URI!,
      dbName: db.name,
      process: p,
      workers: WORKERS,
      sectionsPerWorker: SECTIONS,
      ids: ids.map((id) => id.toHexString()),
      ttl: TTL_MS,
      waitMs: WAIT_MS,
      allWait: ALL_WAIT,
      deadline,
    };
    return spawnWorker('group-contender.ts', { MPL_GROUP_CONTENDER: JSON.stringify(config) }, CHILD_TIMEOUT_MS);
  });
  const codes = await Promise.all(children.map((c) => c.exited));
  const elapsed = performance.now() - started;
  await conn.connection.getClient().db('admin').command({ configureFailPoint: 'failCommand', mode: 'off' });
  children.forEach((child, p) => {
    if (codes[p] !== 0) throw new Error(`child ${p} ended with ${codes[p]}: ${child.stderr()}`);
  });
  const reports = children.map((child) => JSON.parse(child.lines[child.lines.length - 1]) as GroupContenderReport);
  const sections = reports.reduce((sum, r) => sum + r.sections, 0);
  const visits = reports.reduce((sum, r) => sum + r.visits, 0);
  const refusals = reports.reduce((sum, r) => sum + r.refusals, 0);
  const waited = reports.flatMap((r) => r.waitedMs).sort((a, b) => a - b);
  const at = (p: number) => waited[Math.min(waited.length - 1, Math.floor((p / 100) * waited.length))];
  console.log(
    `lockMany races: ${sections} group sections (${visits} document visits), ${refusals} refusals, longest call ${Math.max(...reports.map((r) => r.longestCallMs))} ms, ` +
      `waiting calls p50 ${at(50)} / p90 ${at(90)} / max ${waited[waited.length - 1]} ms, ` +
      `${(elapsed / 1000).toFixed(1)} s on ${process.env.MPL_TEST_BACKEND}`,
  );

  // No deadlock and no starvation: every worker ran, within the bound (the children were not killed).
  expect(elapsed).toBeLessThan(CHILD_TIMEOUT_MS);
  expect(sections).toBeGreaterThanOrEqual(PROCESSES * Math.ceil(WORKERS / 2));
  // The race was real: groups were refused.
  if (!ALL_WAIT) expect(refusals).toBeGreaterThan(0);
  expect(reports.map((r) => r.overlapsSeen)).toEqual(Array(PROCESSES).fill(0));
  expect(reports.map((r) => r.partialHolds)).toEqual(Array(PROCESSES).fill(0));
  const records = await detector.find().sort({ _id: 1 }).toArray();
  expect(records.map((r) => r.maxInside).every((m) => m <= 1)).toBe(true);
  expect(records.map((r) => r.inside)).toEqual(Array(DOCUMENTS).fill(0));
  expect(records.reduce((sum, r) => sum + r.value, 0)).toBe(visits);
  expect(await WorkItem.lockModel().countDocuments({ $expr: { $gt: ['$expiresAt', '$$NOW'] } })).toBe(0);
}, CHILD_TIMEOUT_MS + 30_000);
