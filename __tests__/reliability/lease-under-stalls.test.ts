/**
 * Leases of lockNext and lockMany under server stalls, across processes (PRODUCT.md properties 1,
 * 13, 14, 15): child processes (workers/lease-checker.ts) take locks with a short ttl while the
 * server holds back a share of their commands (failCommand `blockConnection` with an activation
 * probability, limited to their appName: the candidate read, the acquisitions, the grants read, the
 * loads and the releases), and check every lock they are handed against the server with a
 * connection that is never stalled: a lock the process counts on (`msLeft() > 0`, read after the
 * server's answer arrived) must be this acquisition's and unexpired on the server. An overlap
 * detector no lock code touches counts two holders inside one document, entered and left while
 * every lease lasted. Sized by a time budget (MPL_LEASE_BUDGET_MS); a process that was handed
 * fewer than its share of MIN_GRANTED locks by then goes on until it has (within a hard limit), so
 * a loaded machine runs longer instead of checking too few locks to mean anything.
 */
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { usesPrivateServer } from '../support/private-server';
import { jobModel } from '../support/job';
import { killAll, spawnWorker } from './support/children';
import type { LeaseCheckerConfig, LeaseCheckerReport } from './workers/lease-checker';

usesPrivateServer();

const PROCESSES = Number(process.env.MPL_LEASE_PROCESSES ?? 3);
const WORKERS = Number(process.env.MPL_LEASE_WORKERS ?? 4);
const BUDGET_MS = Number(process.env.MPL_LEASE_BUDGET_MS ?? 30_000);
const TTL_MS = 1_200;
/** Locks the processes must be handed and check, together: the run is a real test of the claim. */
const MIN_GRANTED = 21;
/** Past the budget, a process that has checked fewer than its share goes on until this much more. */
const HARD_LIMIT_MS = 2 * BUDGET_MS;
const APP = 'lease-under-stalls';

const db = testDatabase('lease_stalls');
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

type Mode = 'next' | 'many';
const MODES: readonly Mode[] = ['next', 'many'];

/** Starts one mode's processes (their documents inserted first); they stop at the deadlines. */
async function start(mode: Mode, deadline: number, hardDeadline: number) {
  const modelName = mode === 'next' ? 'LeaseNext' : 'LeaseMany';
  const Job = await jobModel(conn.connection, { ttl: TTL_MS }, modelName);
  const docs = await Job.insertMany(Array.from({ length: mode === 'next' ? 40 : 8 }, (_, i) => ({ priority: i % 5, payload: `j${i}` })));
  return Array.from({ length: PROCESSES }, (_, p) => {
    const config: LeaseCheckerConfig = {
      uri: process.env.MONGODB_URI!,
      dbName: db.name,
      appName: APP,
      modelName,
      process: p,
      workers: WORKERS,
      ttl: TTL_MS,
      mode,
      ids: docs.map((d) => d._id.toHexString()),
      deadline,
      minGranted: Math.ceil(MIN_GRANTED / PROCESSES),
      hardDeadline,
    };
    return spawnWorker('lease-checker.ts', { MPL_LEASE_CHECKER: JSON.stringify(config) }, BUDGET_MS + HARD_LIMIT_MS + 120_000);
  });
}

/**
 * Both modes run at once, in one budget, under one fail point: each mode's processes and workers
 * as many and stalled as often as when they ran one after the other, for as long (the fail point's
 * activation probability is per command), with the other mode's load on the server besides.
 */
async function runBoth(): Promise<Record<Mode, LeaseCheckerReport[]>> {
  await conn.connection.getClient().db('admin').command({
    configureFailPoint: 'failCommand',
    mode: { activationProbability: 0.15 },
    data: { appName: APP, failCommands: ['aggregate', 'findAndModify', 'find', 'update'], blockConnection: true, blockTimeMS: Number(process.env.MPL_LEASE_STALL_MS ?? 1_300) },
  });
  const deadline = Date.now() + BUDGET_MS;
  const hardDeadline = deadline + HARD_LIMIT_MS;
  const children = await Promise.all(MODES.map((mode) => start(mode, deadline, hardDeadline)));
  const codes = await Promise.all(children.map((each) => Promise.all(each.map((c) => c.exited))));
  await conn.connection.getClient().db('admin').command({ configureFailPoint: 'failCommand', mode: 'off' });
  const reports = {} as Record<Mode, LeaseCheckerReport[]>;
  MODES.forEach((mode, m) => {
    children[m]!.forEach((child, p) => {
      if (codes[m]![p] !== 0) throw new Error(`${mode} child ${p} ended with ${codes[m]![p]}: ${child.stderr()}`);
    });
    reports[mode] = children[m]!.map((c) => JSON.parse(c.lines[c.lines.length - 1]) as LeaseCheckerReport);
    console.log(`${mode}: ${JSON.stringify(reports[mode])}`);
  });
  return reports;
}

let run: Promise<Record<Mode, LeaseCheckerReport[]>> | undefined;

test.each(MODES)('%s: no lock counted on beyond the server grant, no overlap, under stalls', async (mode) => {
  run ??= runBoth();
  const reports = (await run)[mode];
  const sum = (f: (r: LeaseCheckerReport) => number) => reports.reduce((t, r) => t + f(r), 0);
  expect(sum((r) => r.granted)).toBeGreaterThanOrEqual(MIN_GRANTED);
  expect(reports.flatMap((r) => r.believedExamples)).toEqual([]);
  expect(sum((r) => r.believed)).toBe(0);
  expect(sum((r) => r.overlaps)).toBe(0);
}, BUDGET_MS + HARD_LIMIT_MS + 180_000);
