/**
 * Emulator throughput: mixed simple commands (insertOne, findOne by _id,
 * updateOne by _id with a `$$NOW` pipeline update) at concurrency 16 through
 * one pooled MongoClient, over 100,000 pre-loaded lock-like documents.
 *
 * Two figures, measured the same way:
 *  - out-of-process: the emulator runs as its own process through its CLI
 *    (as a user runs it: `npm run emulator`), so server and client each get a
 *    core. This is the configuration the 5,000 commands/s target is
 *    about ("from one pooled client on this machine").
 *  - in-process: emulator and driver share one Node event loop and one core.
 *
 * Usage: npm run bench:emulator
 * Env:   BENCH_MODE=out|in|both (default both), BENCH_OPS (default 20000),
 *        BENCH_PRELOAD (default 100000), BENCH_ROUNDS (default 3; the best
 *        round and every round are printed), BENCH_SERVER_NODE_ARGS (extra
 *        node flags for the emulator process, e.g. "--cpu-prof").
 */
import { spawn, type ChildProcess } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';
import * as readline from 'readline';
import { MongoClient } from 'mongodb';
import { startEmulator } from '../test-backend/emulator';

const TOTAL = Number(process.env.BENCH_OPS ?? 20_000);
const CONCURRENCY = 16;
const PRELOAD = Number(process.env.BENCH_PRELOAD ?? 100_000);
const ROUNDS = Math.max(1, Number(process.env.BENCH_ROUNDS ?? 3));
const MODE = process.env.BENCH_MODE ?? 'both';

interface Target {
  uri: string;
  /** CPU seconds the emulator's own process has used so far (out-of-process only). */
  serverCpu?: () => number;
  stop(): Promise<void>;
}

/** utime + stime of a process from /proc (Linux), in seconds; NaN elsewhere. */
function procCpuSeconds(pid: number): number {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100; // clock ticks (USER_HZ = 100)
  } catch {
    return NaN;
  }
}

async function inProcess(): Promise<Target> {
  const emu = await startEmulator();
  return { uri: emu.uri, stop: () => emu.stop() };
}

/** Starts the CLI in a child process (node + tsx, the same code `npm run emulator` runs) and waits for its URI line. */
async function outOfProcess(): Promise<Target> {
  const cli = path.join(__dirname, '..', 'test-backend', 'emulator', 'cli.ts');
  const extra = (process.env.BENCH_SERVER_NODE_ARGS ?? '').split(' ').filter(Boolean); // e.g. --cpu-prof to profile the server
  const child: ChildProcess = spawn(process.execPath, [...extra, '--import', 'tsx', cli, '--port', '0'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const uri = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('emulator CLI did not report a URI within 30 s')), 30_000);
    const rl = readline.createInterface({ input: child.stdout! });
    rl.on('line', (line) => {
      const m = /mongodb:\/\/\S+/.exec(line);
      if (m) {
        clearTimeout(timer);
        resolve(m[0]);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`emulator CLI exited with ${code}`));
    });
  });
  return {
    uri,
    serverCpu: () => procCpuSeconds(child.pid!),
    stop: () =>
      new Promise<void>((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

type LockDoc = { _id: string; owner: string; expiresAt: Date; n?: number };

interface RoundResult {
  rate: number;
  /** CPU microseconds per command: this process, and the emulator process when separate. */
  clientUs: number;
  serverUs?: number;
}

async function round(target: Target, r: number): Promise<RoundResult> {
  const uri = target.uri;
  const client = new MongoClient(uri, { maxPoolSize: CONCURRENCY });
  await client.connect();
  const coll = client.db('bench').collection<LockDoc>('locks');
  const expiresAt = new Date(Date.now() + 3_600_000);
  let next = 0;
  const cpu0 = process.cpuUsage();
  const server0 = target.serverCpu?.();
  const started = process.hrtime.bigint();
  const worker = async (): Promise<void> => {
    for (;;) {
      const i = next++;
      if (i >= TOTAL) return;
      switch (i % 3) {
        case 0:
          await coll.insertOne({ _id: `k${r}_${i}`, owner: 'bench', expiresAt });
          break;
        case 1:
          await coll.findOne({ _id: `pre${i % PRELOAD}` });
          break;
        default:
          await coll.updateOne({ _id: `pre${i % PRELOAD}` }, [{ $set: { touchedAt: '$$NOW' } }]);
      }
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  const secs = Number(process.hrtime.bigint() - started) / 1e9;
  const cpu = process.cpuUsage(cpu0);
  const server1 = target.serverCpu?.();
  await client.close();
  return {
    rate: TOTAL / secs,
    clientUs: (cpu.user + cpu.system) / TOTAL,
    serverUs: server0 === undefined || server1 === undefined ? undefined : ((server1 - server0) * 1e6) / TOTAL,
  };
}

async function measure(label: string, start: () => Promise<Target>): Promise<void> {
  const target = await start();
  try {
    const client = new MongoClient(target.uri, { maxPoolSize: CONCURRENCY });
    await client.connect();
    const coll = client.db('bench').collection<LockDoc>('locks');
    await coll.createIndex({ owner: 1 });
    await coll.createIndex({ expiresAt: 1 }, { expireAfterSeconds: 0 });
    const expiresAt = new Date(Date.now() + 3_600_000);
    for (let i = 0; i < PRELOAD; i += 5_000) {
      await coll.insertMany(Array.from({ length: Math.min(5_000, PRELOAD - i) }, (_, j) => ({ _id: `pre${i + j}`, owner: `o${(i + j) % 1000}`, expiresAt })));
    }
    await client.close();
    const results: RoundResult[] = [];
    for (let r = 0; r < ROUNDS; r++) results.push(await round(target, r));
    const best = results.reduce((a, b) => (b.rate > a.rate ? b : a));
    const cpuNote = best.serverUs === undefined
      ? `CPU per command (driver + emulator, one process): ${Math.round(best.clientUs)} µs`
      : `CPU per command: driver process ${Math.round(best.clientUs)} µs, emulator process ${Math.round(best.serverUs)} µs`;
    console.log(
      `emulator throughput (${label}): ${Math.round(best.rate)} commands/s best of ${ROUNDS} rounds [${results.map((x) => Math.round(x.rate)).join(', ')}] ` +
        `(${TOTAL} commands per round, concurrency ${CONCURRENCY}, ${PRELOAD} preloaded docs); ${cpuNote} in the best round`,
    );
  } finally {
    await target.stop();
  }
}

async function main(): Promise<void> {
  if (MODE !== 'in' && MODE !== 'out' && MODE !== 'both') throw new Error(`BENCH_MODE must be in, out or both, not ${MODE}`);
  if (MODE !== 'in') await measure('emulator in its own process via the CLI', outOfProcess);
  if (MODE !== 'out') await measure('emulator in the same process as the driver', inProcess);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
