/**
 * Benchmark 7 (issue 17): `Model.lockMany` at 1, 10, 100 and 1,000 ids, in the same run as the
 * same documents locked with N sequential `Model.lock` calls: commands per call (command
 * monitoring) and latency (p50 / p99). Also the refused `lockMany` (one document of the group held
 * by someone else) and `Model.unlockMany`. Target: a number of commands that does not grow with
 * the number of ids. Repetitions scale with BENCH_SCALE; BENCH_MANY_SIZES overrides the sizes.
 */
import { Schema, type Connection } from 'mongoose';
import { lockPlugin, type LockableModel, type LockMethods } from '../src';

interface Row {
  n: number;
}
type RowModel = LockableModel<Row>;

export interface LatencyFigures {
  commands: number;
  p50: number;
  p99: number;
}

export interface LockManySize {
  ids: number;
  repetitions: number;
  lockMany: LatencyFigures;
  refused: LatencyFigures;
  unlockMany: LatencyFigures;
  /** The same documents locked one by one with Model.lock (and released with doc.unlock). */
  sequentialLock: LatencyFigures;
  sequentialUnlock: LatencyFigures;
  /** sequential Model.lock p50 / lockMany p50. */
  speedupP50: number;
}

export interface LockManyBenchResults {
  sizes: LockManySize[];
}

const round = (x: number, digits = 2) => Math.round(x * 10 ** digits) / 10 ** digits;

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

function figures(samples: number[], commands: number[]): LatencyFigures {
  const sorted = [...samples].sort((a, b) => a - b);
  const perCall = commands.reduce((sum, c) => sum + c, 0) / commands.length;
  return { commands: round(perCall, 1), p50: round(percentile(sorted, 50)), p99: round(percentile(sorted, 99)) };
}

/** Fewer repetitions for larger groups (the sequential baseline of 1,000 locks takes seconds). */
function repetitionsFor(ids: number, scale: number): number {
  const base = ids <= 10 ? 100 : ids <= 100 ? 30 : 8;
  return Math.max(3, Math.round(base * scale));
}

export async function benchLockMany(connection: Connection, countCommands: (fn: () => Promise<unknown>) => Promise<string[]>, scale: number): Promise<LockManyBenchResults> {
  const sizes = (process.env.BENCH_MANY_SIZES ?? '1,10,100,1000').split(',').map(Number);
  const schema = new Schema<Row, RowModel, LockMethods>({ n: Number });
  schema.plugin(lockPlugin, { ttl: 60_000 });
  const Item = connection.model<Row, RowModel>('ManyBenchItem', schema);
  await Item.init();
  await Item.lockModel().init();
  const results: LockManyBenchResults = { sizes: [] };

  for (const size of sizes) {
    const repetitions = repetitionsFor(size, scale);
    console.log(`[bench] 9. lockMany of ${size} ids against ${size} sequential Model.lock calls: ${repetitions} repetitions each`);
    const ids = (await Item.insertMany(Array.from({ length: size }, (_, i) => ({ n: i })))).map((d) => d._id);
    const blocker = (await Item.insertMany([{ n: -1 }]))[0]._id;
    const samples = { many: [] as number[], refused: [] as number[], unlockMany: [] as number[], lock: [] as number[], unlock: [] as number[] };
    const commands = { many: [] as number[], refused: [] as number[], unlockMany: [] as number[], lock: [] as number[], unlock: [] as number[] };
    // One warm-up of each, untimed.
    await Item.unlockMany(await Item.lockMany(ids, 'bench-warmup'));
    for (const id of ids.slice(0, Math.min(size, 50))) await (await Item.lock(id, 'bench-warmup')).unlock();

    for (let r = 0; r < repetitions; r++) {
      // lockMany, then unlockMany.
      let docs: Awaited<ReturnType<RowModel['lockMany']>> = [];
      let t = performance.now();
      commands.many.push((await countCommands(async () => (docs = await Item.lockMany(ids, 'bench-many')))).length);
      samples.many.push(performance.now() - t);
      t = performance.now();
      commands.unlockMany.push((await countCommands(() => Item.unlockMany(docs))).length);
      samples.unlockMany.push(performance.now() - t);

      // The same documents, one Model.lock after the other, then one doc.unlock after the other.
      const held: Awaited<ReturnType<RowModel['lock']>>[] = [];
      t = performance.now();
      commands.lock.push(
        (
          await countCommands(async () => {
            for (const id of ids) held.push(await Item.lock(id, 'bench-sequential'));
          })
        ).length,
      );
      samples.lock.push(performance.now() - t);
      t = performance.now();
      commands.unlock.push(
        (
          await countCommands(async () => {
            for (const doc of held) await doc.unlock();
          })
        ).length,
      );
      samples.unlock.push(performance.now() - t);

      // Refused: a group of the same size whose last document is held by someone else.
      const holder = await Item.lock(blocker, 'bench-holder');
      t = performance.now();
      commands.refused.push(
        (
          await countCommands(async () => {
            const error = await Item.lockMany([...ids.slice(0, -1), blocker], 'bench-refused').catch((e: unknown) => e);
            if (!(error instanceof Error) || error.name !== 'LockedError') throw new Error(`expected a LockedError, got ${String(error)}`);
          })
        ).length,
      );
      samples.refused.push(performance.now() - t);
      await holder.unlock();
    }
    const lockMany = figures(samples.many, commands.many);
    const sequentialLock = figures(samples.lock, commands.lock);
    results.sizes.push({
      ids: size,
      repetitions,
      lockMany,
      refused: figures(samples.refused, commands.refused),
      unlockMany: figures(samples.unlockMany, commands.unlockMany),
      sequentialLock,
      sequentialUnlock: figures(samples.unlock, commands.unlock),
      speedupP50: round(sequentialLock.p50 / lockMany.p50, 1),
    });
    await Item.deleteMany({ _id: { $in: [...ids, blocker] } }, { skipLockCheck: true });
  }
  return results;
}

export function reportLockMany(results: LockManyBenchResults): void {
  const pad = (s: string, w: number) => s.padEnd(w);
  console.log('\n9. lockMany against N sequential Model.lock calls (commands per call; latency per call in ms, p50 / p99)');
  console.log(`${pad('ids', 6)}${pad('lockMany', 26)}${pad('refused lockMany', 26)}${pad('unlockMany', 24)}${pad('N x Model.lock', 30)}${pad('N x doc.unlock', 28)}speed-up p50`);
  const cell = (f: LatencyFigures, width: number) => pad(`${f.commands} cmd, ${f.p50} / ${f.p99}`, width);
  for (const s of results.sizes) {
    console.log(`${pad(String(s.ids), 6)}${cell(s.lockMany, 26)}${cell(s.refused, 26)}${cell(s.unlockMany, 24)}${cell(s.sequentialLock, 30)}${cell(s.sequentialUnlock, 28)}${s.speedupP50}x`);
  }
}
