/**
 * The documented benchmark figures, rendered from a results file, so docs/evidence.md quotes
 * exactly one run: the one in bench/results/latest.json (__tests__/docs/readme.test.ts checks that
 * every row below appears there verbatim). `npx tsx bench/readme-tables.ts` prints them to paste.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { LockNextBenchResults } from './lock-next';
import type { BenchResults } from './run';

const ms = (value: number) => value.toFixed(2);
const ratio = (value: number | undefined) => (value === undefined ? '–' : `${value.toFixed(2)}×`);

/** Markdown lines (table rows and sentences) carrying every figure the README quotes. */
export function readmeFigures(results: BenchResults): string[] {
  const lines: string[] = [];
  for (const row of results.cycle) {
    lines.push(`| ${row.name} | ${row.commandsPerCycle ?? '–'} | ${ms(row.p50)} | ${ms(row.p99)} | ${row.opsPerSec.toFixed(1)} | ${ratio(row.ratioToRaw)} |`);
  }
  for (const row of results.replayed ?? []) {
    const spread = (x: { median: number; min: number; max: number } | undefined) => (x ? `${ratio(x.median)} (${ratio(x.min)}–${ratio(x.max)})` : '–');
    const mid = [...row.rounds].sort((a, b) => a.ratio.p50 - b.ratio.p50)[row.rounds.length >> 1]!;
    lines.push(
      `| \`${row.operation}\` | ${row.commands.join(', ')} | ${spread(row.ratioP50)} | ${spread(row.ratioMean)} | ${spread(row.ratioCpu)} | ${spread(row.mongooseRatioP50)} | ${ms(mid.plugin.p50)} / ${ms(mid.raw.p50)} |`,
    );
  }
  for (const command of results.commands) lines.push(`| \`${command.operation}\` | ${command.count} | ${command.names.join(', ')} |`);
  for (const handoff of results.handoff) {
    lines.push(`| ${handoff.mode} | ${handoff.waiters} | ${handoff.handoffsPerSec.toFixed(1)} | ${ms(handoff.p50)} ms | ${ms(handoff.p99)} ms |`);
  }
  const { releaseAll, acquireScale } = results;
  lines.push(`4. \`releaseAllFor\` with ${releaseAll.locks.toLocaleString('en-US')} locks held by one owner: one command, ${releaseAll.released.toLocaleString('en-US')} released in ${(releaseAll.ms / 1000).toFixed(1)} s (${releaseAll.locksPerSec.toLocaleString('en-US')} locks/s).`);
  lines.push(
    `5. \`Model.lock\` latency with ${acquireScale.otherLocks.toLocaleString('en-US')} other locks in the lock collection: p50 ${ms(acquireScale.full.p50)} ms / p99 ${ms(acquireScale.full.p99)} ms against ${ms(acquireScale.empty.p50)} / ${ms(acquireScale.empty.p99)} ms with an empty collection (${ratio(acquireScale.ratioP50)} at p50). Plan of the acquire: \`${acquireScale.plan}\`.`,
  );
  if (results.guard) {
    // 6. The write guard (issue 10).
    for (const command of results.guard.commands) lines.push(`| ${command.write} | ${command.count} | ${command.names.join(', ')} |`);
    const auto = results.guard.concurrentWriters.find((w) => w.mode === 'auto');
    const never = results.guard.concurrentWriters.find((w) => w.mode === 'never');
    if (auto && never) {
      lines.push(
        `20 concurrent \`updateOne({ _id }, { $inc })\` on one document nobody locked: ${auto.succeeded}/${auto.writers} succeed and the counter is ${auto.finalCount} (${auto.aborts} conflicting attempts retried with backoff, ${Math.round(auto.ms).toLocaleString('en-US')} ms in all; with \`transactions: 'never'\` ${Math.round(never.ms).toLocaleString('en-US')} ms).`,
      );
    }
    for (const documents of [...new Set(results.guard.updateMany.map((u) => u.documents))]) {
      const auto6 = results.guard.updateMany.find((u) => u.mode === 'auto' && u.documents === documents);
      const never6 = results.guard.updateMany.find((u) => u.mode === 'never' && u.documents === documents);
      if (!auto6 || !never6) continue;
      lines.push(
        `| ${documents.toLocaleString('en-US')} | ${Math.round(auto6.unguardedMs).toLocaleString('en-US')} ms | ${Math.round(auto6.guardedMs).toLocaleString('en-US')} ms | ${ratio(auto6.ratio)} | ${(auto6.guardedMs / documents).toFixed(2)} ms | ${auto6.lockRecordsLeft} | ${ratio(never6.ratio)} |`,
      );
    }
  }
  return lines;
}

/** The README's lockNext figures (benchmark 8), one table row per method and concurrency. */
export function readmeNextFigures(results: LockNextBenchResults): string[] {
  const name = { lockNext: '`lockNext`', findTryLock: '`findOne` + `tryLock` loop', inDocument: 'status field (`findOneAndUpdate`)' } as const;
  return results.rows.map(
    (r) =>
      `| ${name[r.method]} | ${r.workers} (${r.processes} ${r.processes === 1 ? 'process' : 'processes'}) | ${r.claimsPerSec.toFixed(1)} | ${r.commandsPerClaim.toFixed(2)} | ${r.commandsPerJob.toFixed(2)} | ${r.wastedPerClaim.toFixed(3)} | ${r.minPerWorker}–${r.maxPerWorker} | ${r.claimedTwice} | ${r.falseEmpty} |`,
  );
}

/**
 * Benchmark 8's results: those of the last full run (bench/results/latest.json) when it has them,
 * else those of the last `BENCH_ONLY=next` run (bench/results/latest-next.json).
 */
export function readLatestNextResults(): LockNextBenchResults {
  const full = readLatestResults();
  if (full.lockNext) return full.lockNext;
  return (JSON.parse(readFileSync(join(__dirname, 'results', 'latest-next.json'), 'utf8')) as BenchResults).lockNext!;
}

/**
 * The README's `lockMany` figures (benchmark 9), from bench/results/latest-many.json: written by
 * `BENCH_ONLY=many npm run bench` and by every full run, so they can be re-measured alone.
 */
export function readmeManyFigures(results: BenchResults): string[] {
  if (!results.lockMany) return [];
  return results.lockMany.sizes.map(
    (s) =>
      `| ${s.ids.toLocaleString('en-US')} | ${s.lockMany.commands} | ${ms(s.lockMany.p50)} / ${ms(s.lockMany.p99)} ms | ${s.refused.commands} | ${ms(s.refused.p50)} ms | ${s.unlockMany.commands} | ${s.sequentialLock.commands.toLocaleString('en-US')} | ${ms(s.sequentialLock.p50)} / ${ms(s.sequentialLock.p99)} ms | ${s.speedupP50.toFixed(1)}× |`,
  );
}

/** One replayed operation of benchmark 1b (bench/results/latest-identical.json). */
interface ReplayedFigures {
  operation: string;
  commands: string[];
  ratioP50: { median: number; min: number; max: number };
  ratioCpu: { median: number };
  mongooseRatioP50: { median: number };
  floorRatioP50: { median: number };
  /** A/A: a second copy of the raw side against it (runs since the settled warm-up). */
  aaRatioP50?: { median: number; min: number; max: number };
  /** The warm-up rounds (bench/replay.ts, Settle), coldest first. */
  warmupRounds?: { ratio: { p50: number } }[];
  settled?: boolean;
}

/** Median of the plugin/raw ratio of p50s over the first three warm-up rounds: the colder process. */
function coldRatio(r: ReplayedFigures): string {
  const first = (r.warmupRounds ?? []).slice(0, 3).map((w) => w.ratio.p50).sort((a, b) => a - b);
  return first.length ? ratio(first[first.length >> 1]!) : '–';
}

/** Benchmark 1b's rows (`BENCH_ONLY=identical npm run bench`): the plugin against an application sending the same commands through the driver. */
export function identicalFigures(results: { replayed?: ReplayedFigures[] }): string[] {
  return (results.replayed ?? []).map(
    (r) =>
      `| ${r.operation} | ${r.commands.join(', ')} | ${ratio(r.ratioP50.median)} (${ratio(r.ratioP50.min)}–${ratio(r.ratioP50.max)}) | ${r.aaRatioP50 ? `${ratio(r.aaRatioP50.median)} (${ratio(r.aaRatioP50.min)}–${ratio(r.aaRatioP50.max)})` : '–'} | ${coldRatio(r)} (${r.warmupRounds?.length ?? 0}${r.settled === false ? ', not settled' : ''}) | ${ratio(r.ratioCpu.median)} | ${ratio(r.mongooseRatioP50.median)} | ${ratio(r.floorRatioP50.median)} |`,
  );
}

export function readLatestIdenticalResults(): { replayed?: ReplayedFigures[]; machine: string } {
  return JSON.parse(readFileSync(join(__dirname, 'results', 'latest-identical.json'), 'utf8')) as { replayed?: ReplayedFigures[]; machine: string };
}

/** The diagnostics channels' cost (benchmark 10), from bench/results/latest-diagnostics.json (`BENCH_ONLY=diagnostics npm run bench`). */
export function diagnosticsFigures(results: BenchResults): string[] {
  const d = results.diagnostics;
  if (!d) return [];
  return [
    `With nobody subscribed, a traced static of a model costs ${d.overheadNs} ns more than calling the static it wraps directly with the same arguments (${d.unobservedNs} ns against ${d.directNs} ns, ${d.calls.toLocaleString('en-US')} calls, best of 5), ${d.unobservedShareOfCyclePercent}% of a lock + unlock cycle (p50 ${ms(d.unobserved.p50)} ms) in the same run.`,
    `With a no-op subscriber on every channel, ${d.cycles} lock + unlock cycles interleaved with unobserved ones: p50 ${ms(d.observed.p50)} / p99 ${ms(d.observed.p99)} ms against ${ms(d.unobserved.p50)} / ${ms(d.unobserved.p99)} ms (${ratio(d.observedRatioP50)}).`,
  ];
}

export function readLatestDiagnosticsResults(): BenchResults {
  return JSON.parse(readFileSync(join(__dirname, 'results', 'latest-diagnostics.json'), 'utf8')) as BenchResults;
}

export function readLatestManyResults(): BenchResults {
  return JSON.parse(readFileSync(join(__dirname, 'results', 'latest-many.json'), 'utf8')) as BenchResults;
}

export function readLatestResults(): BenchResults {
  return JSON.parse(readFileSync(join(__dirname, 'results', 'latest.json'), 'utf8')) as BenchResults;
}

if (require.main === module) {
  for (const line of readmeFigures(readLatestResults())) console.log(line);
  for (const line of readmeNextFigures(readLatestNextResults())) console.log(line);
  for (const line of readmeManyFigures(readLatestManyResults())) console.log(line);
  for (const line of identicalFigures(readLatestIdenticalResults())) console.log(line);
  for (const line of diagnosticsFigures(readLatestDiagnosticsResults())) console.log(line);
}
