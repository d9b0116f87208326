/**
 * Benchmark 7 (issue 17): claiming the next free job. For 1, 4 and 16 concurrent workers (1 process,
 * 2 processes x 2, 4 processes x 4) over 1,000 queued jobs, in the same run and on the same backend:
 *  - `Model.lockNext` (+ `saveAndUnlock`);
 *  - the hand-written `findOne` + `tryLock` loop (+ `saveAndUnlock`);
 *  - the in-document status claim of agenda / mongodb-queue (`findOneAndUpdate` on `status`, then an
 *    `updateOne` to finish), without the plugin.
 * Reported per arm: claims per second (wall clock, all processes), commands per successful claim
 * (the claim's own commands, counted in the workers with command monitoring), commands per finished
 * job (claim + finish), wasted claim attempts, jobs per worker (min / max: starvation), documents
 * claimed twice, false "queue empty" answers (the quotas keep RESERVE jobs queued, so any null is
 * false), and the CPU time of the workers and of this process (on the emulator, this process
 * runs the server: its CPU is the emulator's cost).
 * Sizes scale with BENCH_SCALE; BENCH_NEXT_WORKERS overrides the concurrency levels (comma-separated).
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import type { Db } from 'mongodb';
import type { Method, WorkerConfig, WorkerReport } from './lock-next-worker';

export interface LockNextRow {
  method: Method;
  workers: number;
  processes: number;
  jobs: number;
  claims: number;
  claimsPerSec: number;
  commandsPerClaim: number;
  commandsPerJob: number;
  wastedPerClaim: number;
  /** lockNext only: candidate reads per claim. */
  readsPerClaim?: number;
  minPerWorker: number;
  maxPerWorker: number;
  claimedTwice: number;
  falseEmpty: number;
  elapsedMs: number;
  workerCpuMs: number;
  serverProcessCpuMs: number;
}

export interface LockNextBenchResults {
  jobs: number;
  reserve: number;
  rows: LockNextRow[];
}

const METHODS: Method[] = ['lockNext', 'findTryLock', 'inDocument'];
const round = (x: number, digits = 2) => Math.round(x * 10 ** digits) / 10 ** digits;

function layout(workers: number): { processes: number; perProcess: number } {
  if (workers <= 1) return { processes: 1, perProcess: 1 };
  const processes = workers >= 16 ? 4 : 2;
  return { processes, perProcess: Math.ceil(workers / processes) };
}

function runChild(config: WorkerConfig, timeoutMs: number): Promise<WorkerReport> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['--import', 'tsx', join(__dirname, 'lock-next-worker.ts')], {
      env: { ...process.env, MPL_BENCH_NEXT: JSON.stringify(config) },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let out = '';
    let err = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => (out += chunk));
    child.stderr.setEncoding('utf8').on('data', (chunk: string) => (err = (err + chunk).slice(-10_000)));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('exit', (code) => {
      clearTimeout(timer);
      if (code !== 0) return reject(new Error(`lock-next bench worker ${config.process} exited with ${code}: ${err}`));
      try {
        resolve(JSON.parse(out.trim().split('\n').pop()!) as WorkerReport);
      } catch (error) {
        reject(new Error(`lock-next bench worker ${config.process} printed no report: ${(error as Error).message}; ${err}`));
      }
    });
  });
}

export async function benchLockNext(uri: string, db: Db, scale: number): Promise<LockNextBenchResults> {
  const jobs = Math.max(100, Math.round(1_000 * scale));
  const levels = (process.env.BENCH_NEXT_WORKERS ?? '1,4,16').split(',').map(Number);
  const reserve = Math.max(50, Math.round(jobs / 10));
  const results: LockNextBenchResults = { jobs, reserve, rows: [] };
  for (const workers of levels) {
    for (const method of METHODS) {
      const { processes, perProcess } = layout(workers);
      console.log(`[bench] 8. ${method}: ${processes} process(es) x ${perProcess} worker(s) over ${jobs} queued jobs`);
      const collection = `bench_next_${method}_${workers}`.toLowerCase();
      const coll = db.collection(collection);
      await coll.drop().catch(() => undefined);
      await db.collection(`${collection}.locks`).drop().catch(() => undefined);
      await coll.createIndex({ status: 1, priority: -1, createdAt: 1 });
      const t0 = Date.now();
      await coll.insertMany(Array.from({ length: jobs }, (_, i) => ({ status: 'queued', priority: i % 5, createdAt: new Date(t0 + i), payload: `job ${i}` })));
      const quota = Math.floor((jobs - reserve) / processes);
      const startAt = Date.now() + 3_000 + 1_000 * processes; // after every child has compiled and connected
      const cpuBefore = process.cpuUsage();
      const started = performance.now();
      const reports = await Promise.all(
        Array.from({ length: processes }, (_, p) =>
          runChild({ uri, dbName: db.databaseName, collection, method, process: p, workers: perProcess, quota, startAt }, 600_000),
        ),
      );
      const wall = Math.max(...reports.map((r) => r.elapsedMs));
      void started;
      const cpu = process.cpuUsage(cpuBefore);
      const claims = reports.reduce((sum, r) => sum + r.finished, 0);
      const ids = reports.flatMap((r) => r.claimedIds);
      const perWorker = reports.flatMap((r) => r.perWorker);
      const claimCommands = reports.reduce((sum, r) => sum + r.claimCommands, 0);
      const finishCommands = reports.reduce((sum, r) => sum + r.finishCommands, 0);
      results.rows.push({
        method,
        workers: processes * perProcess,
        processes,
        jobs,
        claims,
        claimsPerSec: round(claims / (wall / 1000), 1),
        commandsPerClaim: round(claimCommands / claims),
        commandsPerJob: round((claimCommands + finishCommands) / claims),
        wastedPerClaim: round(reports.reduce((sum, r) => sum + r.wasted, 0) / claims, 3),
        ...(method === 'lockNext' ? { readsPerClaim: round(reports.reduce((sum, r) => sum + (r.stats?.reads ?? 0), 0) / claims, 3) } : {}),
        minPerWorker: Math.min(...perWorker),
        maxPerWorker: Math.max(...perWorker),
        claimedTwice: ids.length - new Set(ids).size,
        falseEmpty: reports.reduce((sum, r) => sum + r.nulls, 0),
        elapsedMs: Math.round(wall),
        workerCpuMs: Math.round(reports.reduce((sum, r) => sum + r.cpuMs, 0)),
        serverProcessCpuMs: Math.round((cpu.user + cpu.system) / 1000),
      });
      await coll.drop().catch(() => undefined);
      await db.collection(`${collection}.locks`).drop().catch(() => undefined);
    }
  }
  return results;
}

export function reportLockNext(results: LockNextBenchResults): void {
  const pad = (s: string, w: number) => s.padEnd(w);
  console.log(`\n8. Claiming the next free job: ${results.jobs} queued jobs, ${results.reserve} kept queued (so any null is a false "queue empty"); claims until the quotas are done`);
  console.log(
    `${pad('method', 14)}${pad('workers', 13)}${pad('claims/s', 10)}${pad('cmds/claim', 12)}${pad('cmds/job', 10)}${pad('wasted/claim', 14)}${pad('per worker', 12)}${pad('twice', 7)}${pad('false empty', 13)}cpu workers / this process`,
  );
  for (const r of results.rows) {
    console.log(
      `${pad(r.method, 14)}${pad(`${r.workers} (${r.processes}p)`, 13)}${pad(String(r.claimsPerSec), 10)}${pad(String(r.commandsPerClaim), 12)}${pad(String(r.commandsPerJob), 10)}${pad(String(r.wastedPerClaim), 14)}${pad(`${r.minPerWorker}-${r.maxPerWorker}`, 12)}${pad(String(r.claimedTwice), 7)}${pad(String(r.falseEmpty), 13)}${r.workerCpuMs} / ${r.serverProcessCpuMs} ms`,
    );
  }
}
