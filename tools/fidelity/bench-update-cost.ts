/**
 * `npx tsx tools/fidelity/bench-update-cost.ts` (or `npm run fidelity:bench`)
 *
 * The emulator's CPU cost per command for updates of one document by _id:
 *   set       { $set: { owner, at: <client date>, expiresAt: <client date> } }
 *   nowSimple [{ $set: { owner, at: '$$NOW' } }]                       (constants only)
 *   nowExpr   [{ $set: { owner, at: '$$NOW', expiresAt: { $add: ['$$NOW', 30000] },
 *                        fence: { $add: [{ $ifNull: ['$fence', 0] }, 1] } } }] (the plugin's shape)
 * The emulator runs as its own process (its CLI); its CPU time (/proc/<pid>/stat) is read before and
 * after each series, so the driver's cost is not counted. Env: BENCH_OPS (default 5000 per series),
 * BENCH_ROUNDS (default 3, the best round is reported).
 */
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as readline from 'node:readline';
import { MongoClient, type Document } from 'mongodb';

const OPS = Number(process.env.BENCH_OPS ?? 5000);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const CONCURRENCY = 8;

function cpuSeconds(pid: number): number {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) / 100;
}

async function main(): Promise<void> {
  const cli = join(__dirname, '..', '..', 'test-backend', 'emulator', 'cli.ts');
  const child = spawn(process.execPath, ['--import', 'tsx', cli, '--port', '0'], { stdio: ['ignore', 'pipe', 'inherit'] });
  const uri = await new Promise<string>((resolve, reject) => {
    const rl = readline.createInterface({ input: child.stdout! });
    rl.on('line', (l) => {
      const m = /mongodb:\/\/\S+/.exec(l);
      if (m) resolve(m[0]);
    });
    child.once('exit', (c) => reject(new Error(`emulator exited ${c}`)));
  });
  const client = await new MongoClient(uri, { maxPoolSize: CONCURRENCY }).connect();
  const coll = client.db('bench').collection<{ _id: string } & Document>('locks');
  await coll.insertOne({ _id: 'doc', owner: 'a', fence: 0 });
  const series: Record<string, () => Promise<unknown>> = {
    set: () => coll.updateOne({ _id: 'doc' }, { $set: { owner: 'b', at: new Date(), expiresAt: new Date(Date.now() + 30_000) } }),
    nowSimple: () => coll.updateOne({ _id: 'doc' }, [{ $set: { owner: 'b', at: '$$NOW' } }]),
    nowExpr: () => coll.updateOne({ _id: 'doc' }, [{ $set: { owner: 'b', at: '$$NOW', expiresAt: { $add: ['$$NOW', 30_000] }, fence: { $add: [{ $ifNull: ['$fence', 0] }, 1] } } }]),
  };
  const best: Record<string, number> = {};
  for (let round = 0; round < ROUNDS; round++) {
    for (const [name, op] of Object.entries(series)) {
      for (let i = 0; i < 200; i++) await op(); // warm-up
      const before = cpuSeconds(child.pid!);
      let next = 0;
      await Promise.all(
        Array.from({ length: CONCURRENCY }, async () => {
          while (next++ < OPS) await op();
        }),
      );
      const us = ((cpuSeconds(child.pid!) - before) / OPS) * 1e6;
      best[name] = Math.min(best[name] ?? Infinity, us);
      process.stdout.write(`round ${round + 1} ${name}: ${us.toFixed(1)} µs of emulator CPU per command\n`);
    }
  }
  process.stdout.write(`\nbest of ${ROUNDS}: set ${best.set.toFixed(1)} µs, nowSimple ${best.nowSimple.toFixed(1)} µs (${(best.nowSimple / best.set).toFixed(2)}x), nowExpr ${best.nowExpr.toFixed(1)} µs (${(best.nowExpr / best.set).toFixed(2)}x)\n`);
  await client.close();
  child.kill('SIGTERM');
}

main().catch((e) => {
  process.stderr.write(`${(e as Error).stack ?? String(e)}\n`);
  process.exit(1);
});
