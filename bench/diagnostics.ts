/**
 * Benchmark 10 (issue 18, item 6): what the diagnostics channels cost.
 *  - Unobserved: the wrapper as installed on a model's statics (diagnostics-install.ts), in a tight
 *    loop against calling the function it wraps directly with the same `this` and arguments
 *    (nanoseconds per call): a model whose `lock` static answers a resolved promise at once (no
 *    database), wrapped by installDiagnostics as the plugin wraps its own; and that cost as a
 *    share of a lock + unlock cycle measured in the same run.
 *  - Observed: lock + unlock cycles with no subscriber and with a no-op subscriber on every
 *    channel, interleaved (ABAB...), so load on the machine hits both alike.
 */
import * as dc from 'node:diagnostics_channel';
import { Schema, type Connection } from 'mongoose';
import { lockPlugin, type LockableModel, type LockMethods } from '../src';
import { installDiagnostics, untraced } from '../src/diagnostics-install';

interface Row {
  n: number;
}
type RowModel = LockableModel<Row>;

export interface DiagnosticsBenchResults {
  /** Calls in the tight loop. */
  calls: number;
  /** ns per call: the function called directly, through the unobserved wrapper, and the difference. */
  directNs: number;
  unobservedNs: number;
  overheadNs: number;
  cycles: number;
  /** lock + unlock cycle, no subscriber / a no-op subscriber on every channel (p50, p99 ms). */
  unobserved: { p50: number; p99: number };
  observed: { p50: number; p99: number };
  /** observed p50 / unobserved p50. */
  observedRatioP50: number;
  /** The unobserved wrapper's overhead for the 2 traced calls of a cycle, as a share of the cycle's p50 (percent). */
  unobservedShareOfCyclePercent: number;
}

const round = (x: number, digits = 2) => Math.round(x * 10 ** digits) / 10 ** digits;
const percentile = (sorted: number[], p: number) => sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]!;

function summarize(samples: number[]): { p50: number; p99: number } {
  const sorted = [...samples].sort((a, b) => a - b);
  return { p50: round(percentile(sorted, 50)), p99: round(percentile(sorted, 99)) };
}

/** Subscribes a no-op to every channel of the plugin; returns the undo. */
function subscribeAll(): () => void {
  const undo: (() => void)[] = [];
  const noop = () => undefined;
  for (const kind of ['lock', 'lockNext', 'lockMany', 'unlock', 'releaseAllFor', 'write']) {
    const channel = dc.tracingChannel(`mongoose-pessimistic-lock:${kind}`);
    const subscribers = { start: noop, end: noop, asyncStart: noop, asyncEnd: noop, error: noop };
    channel.subscribe(subscribers);
    undo.push(() => channel.unsubscribe(subscribers));
  }
  for (const name of ['refused', 'expired', 'taken-over', 'lost']) {
    dc.subscribe(`mongoose-pessimistic-lock:${name}`, noop);
    undo.push(() => dc.unsubscribe(`mongoose-pessimistic-lock:${name}`, noop));
  }
  return () => undo.forEach((fn) => fn());
}

export async function benchDiagnostics(connection: Connection, scale: number): Promise<DiagnosticsBenchResults> {
  console.log('[bench] 10. diagnostics channels: the unobserved wrapper, and cycles with and without subscribers');
  // The tight loop: a real model's traced static (the wrapper installDiagnostics puts on every
  // traced static) against the static it wraps, called with the same model and arguments. The
  // static answers at once, so the loop measures the wrapper, not a lock.
  const calls = Math.max(100_000, Math.round(2_000_000 * scale));
  const resolved = Promise.resolve(1);
  const cheap = new Schema<Row>({ n: Number });
  cheap.static('lock', function lock(_id: unknown, _owner: unknown, _options?: unknown) {
    return resolved;
  });
  installDiagnostics(cheap);
  const Cheap = connection.model<Row>('DiagnosticsBenchWrapper', cheap) as unknown as { lock(id: unknown, owner: string, options?: object): Promise<number> };
  const traced = Cheap.lock;
  const original = untraced(traced) as typeof traced;
  if (original === traced) throw new Error('the static is not wrapped');
  const id = 'bench-id';
  const loop = (fn: typeof traced): number => {
    const t = process.hrtime.bigint();
    let sink = 0;
    for (let i = 0; i < calls; i++) if (fn.call(Cheap, id, 'bench-owner') === resolved) sink++;
    if (sink !== calls) throw new Error('the loop did not run');
    return Number(process.hrtime.bigint() - t) / calls;
  };
  const direct: number[] = [];
  const wrapped: number[] = [];
  for (let round_ = 0; round_ < 5; round_++) {
    direct.push(loop(original));
    wrapped.push(loop(traced));
  }
  const directNs = Math.min(...direct);
  const unobservedNs = Math.min(...wrapped);

  const schema = new Schema<Row, RowModel, LockMethods>({ n: Number });
  schema.plugin(lockPlugin, { ttl: 30_000 });
  const Model = connection.model<Row, RowModel>('DiagnosticsBenchRow', schema);
  await Model.init();
  await Model.lockModel().init();
  const ids = (await Model.insertMany(Array.from({ length: 20 }, (_, n) => ({ n })))).map((d) => d._id);
  const cycles = Math.max(50, Math.round(400 * scale));
  const cycle = async (i: number) => {
    const doc = await Model.lock(ids[i % ids.length]!, 'diagnostics-bench');
    await doc.unlock();
  };
  for (let i = 0; i < Math.round(cycles / 2); i++) await cycle(i);
  const plain: number[] = [];
  const observed: number[] = [];
  for (let i = 0; i < cycles; i++) {
    let t = performance.now();
    await cycle(i);
    plain.push(performance.now() - t);
    const undo = subscribeAll();
    try {
      t = performance.now();
      await cycle(i);
      observed.push(performance.now() - t);
    } finally {
      undo();
    }
  }
  const unobservedCycle = summarize(plain);
  const observedCycle = summarize(observed);
  const overheadNs = Math.max(0, unobservedNs - directNs);
  return {
    calls,
    directNs: round(directNs, 1),
    unobservedNs: round(unobservedNs, 1),
    overheadNs: round(overheadNs, 1),
    cycles,
    unobserved: unobservedCycle,
    observed: observedCycle,
    observedRatioP50: round(observedCycle.p50 / unobservedCycle.p50),
    // Two traced calls per cycle (Model.lock, doc.unlock), plus the guard's wrapper when it writes (not here).
    unobservedShareOfCyclePercent: round(((2 * overheadNs) / 1e6 / unobservedCycle.p50) * 100, 4),
  };
}

export function reportDiagnostics(r: DiagnosticsBenchResults): void {
  console.log('\n10. Diagnostics channels');
  console.log(`   unobserved wrapper: ${r.unobservedNs} ns per call against ${r.directNs} ns called directly (${r.overheadNs} ns more, ${r.calls.toLocaleString('en-US')} calls, best of 5)`);
  console.log(`   that is ${r.unobservedShareOfCyclePercent}% of a lock + unlock cycle (p50 ${r.unobserved.p50} ms, two traced calls)`);
  console.log(`   lock + unlock, ${r.cycles} cycles interleaved: no subscriber p50 ${r.unobserved.p50} / p99 ${r.unobserved.p99} ms; a no-op subscriber on every channel p50 ${r.observed.p50} / p99 ${r.observed.p99} ms (${r.observedRatioP50}x)`);
}
