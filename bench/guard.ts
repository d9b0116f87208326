/**
 * Benchmark 6 (issue 10): the write guard's cost.
 *  a. commands per guarded updateOne (command monitoring), by kind of filter and document;
 *  b. 20 concurrent `$inc`s on one document nobody locked: how many succeed, and the final count;
 *  c. guarded updateMany over 1,000 / 10,000 / 100,000 documents against the same write with
 *     `skipLockCheck` (unguarded): time, ratio, and lock records left behind.
 * Sizes scale with BENCH_SCALE; BENCH_GUARD_SIZES overrides the updateMany sizes (comma-separated).
 */
import { Schema, type Connection } from 'mongoose';
import type { Db, Document } from 'mongodb';
import { lockPlugin, type LockableModel, type LockMethods, type LockPluginOptions } from '../src';

interface Row {
  n: number;
  title: string;
}
type RowModel = LockableModel<Row>;

export interface GuardBenchResults {
  commands: { write: string; count: number; names: string[] }[];
  concurrentWriters: { mode: string; writers: number; succeeded: number; finalCount: number; ms: number; commits: number; aborts: number }[];
  updateMany: { mode: string; documents: number; unguardedMs: number; guardedMs: number; ratio: number; lockRecordsLeft: number }[];
}

const round = (x: number, digits = 2) => Math.round(x * 10 ** digits) / 10 ** digits;

function rowModel(connection: Connection, name: string, options?: LockPluginOptions): RowModel {
  const schema = new Schema<Row, RowModel, LockMethods>({ n: Number, title: String });
  schema.plugin(lockPlugin, options);
  return connection.model<Row, RowModel>(name, schema);
}

async function ready(model: RowModel): Promise<void> {
  await model.init();
  await model.lockModel().init();
}

export async function benchGuard(
  connection: Connection,
  db: Db,
  countCommands: (fn: () => Promise<unknown>) => Promise<string[]>,
  scale: number,
): Promise<GuardBenchResults> {
  const results: GuardBenchResults = { commands: [], concurrentWriters: [], updateMany: [] };
  const Auto = rowModel(connection, 'GuardBenchAuto', { ttl: 30_000 });
  const Never = rowModel(connection, 'GuardBenchNever', { ttl: 30_000, transactions: 'never' });
  await ready(Auto);
  await ready(Never);

  // ---- a. commands per guarded updateOne ----------------------------------------------------
  console.log('[bench] 6a. commands per guarded updateOne');
  const count = async (write: string, fn: () => Promise<unknown>) => {
    const names = await countCommands(fn);
    results.commands.push({ write, count: names.length, names });
  };
  const [a, b, c] = (await Auto.insertMany([{ n: 0, title: 'a' }, { n: 0, title: 'b' }, { n: 0, title: 'c' }])).map((d) => d._id);
  await count("auto: updateOne({ _id }), document never locked", () => Auto.updateOne({ _id: a }, { $inc: { n: 1 } }).exec());
  await (await Auto.lock(b, 'bench')).unlock();
  await count("auto: updateOne({ _id }), document with a (released) lock record", () => Auto.updateOne({ _id: b }, { $inc: { n: 1 } }).exec());
  await Auto.lock(c, 'bench');
  await count("auto: updateOne({ _id }, { lockOwner }) by the holder", () => Auto.updateOne({ _id: c }, { $inc: { n: 1 } }, { lockOwner: 'bench' }).exec());
  await count("auto: updateOne({ title }) (target search)", () => Auto.updateOne({ title: 'a' }, { $inc: { n: 1 } }).exec());
  const held = await Auto.lock(a, 'bench');
  held.n += 1;
  await count('auto: doc.save() by the holder', () => held.save());
  held.n += 1;
  await count('auto: doc.saveAndUnlock()', () => held.saveAndUnlock());
  const [d] = (await Never.insertMany([{ n: 0, title: 'd' }])).map((x) => x._id);
  await count("never: updateOne({ _id })", () => Never.updateOne({ _id: d }, { $inc: { n: 1 } }).exec());
  await count("never: updateOne({ title }) (target search)", () => Never.updateOne({ title: 'd' }, { $inc: { n: 1 } }).exec());
  await count('updateOne with skipLockCheck (unguarded)', () => Auto.updateOne({ _id: a }, { $inc: { n: 1 } }, { skipLockCheck: true }).exec());

  // ---- b. 20 concurrent writers on one unlocked document ------------------------------------
  for (const [mode, M] of [['auto', Auto], ['never', Never]] as const) {
    console.log(`[bench] 6b. 20 concurrent updateOne $inc on one unlocked document (${mode})`);
    const { _id } = await M.create({ n: 0, title: 'contended' });
    let names: string[] = [];
    let succeeded = 0;
    const started = performance.now();
    names = await countCommands(async () => {
      const settled = await Promise.allSettled(Array.from({ length: 20 }, () => M.updateOne({ _id }, { $inc: { n: 1 } }).exec()));
      succeeded = settled.filter((s) => s.status === 'fulfilled').length;
    });
    const ms = performance.now() - started;
    const finalCount = (await M.findById(_id).orFail()).n;
    results.concurrentWriters.push({
      mode,
      writers: 20,
      succeeded,
      finalCount,
      ms: round(ms, 1),
      commits: names.filter((x) => x === 'commitTransaction').length,
      aborts: names.filter((x) => x === 'abortTransaction').length,
    });
  }

  // ---- c. updateMany over many documents --------------------------------------------------
  const sizes = (process.env.BENCH_GUARD_SIZES ?? '1000,10000,100000')
    .split(',')
    .map((s) => Math.max(100, Math.round(Number(s) * scale)));
  for (const [mode, options] of [['auto', { ttl: 30_000 }], ['never', { ttl: 30_000, transactions: 'never' }]] as const) {
    for (const size of sizes) {
      console.log(`[bench] 6c. updateMany over ${size} documents (${mode})`);
      const M = rowModel(connection, `GuardMany_${mode}_${size}`, options as LockPluginOptions);
      await ready(M);
      for (let i = 0; i < size; i += 10_000) {
        await M.collection.insertMany(Array.from({ length: Math.min(10_000, size - i) }, (_, j) => ({ n: i + j, title: 'many' })) as Document[]);
      }
      const t0 = performance.now();
      await M.updateMany({ title: 'many' }, { $inc: { n: 1 } }, { skipLockCheck: true }).exec();
      const unguardedMs = performance.now() - t0;
      const t1 = performance.now();
      const result = await M.updateMany({ title: 'many' }, { $inc: { n: 1 } }).exec();
      const guardedMs = performance.now() - t1;
      if (result.modifiedCount !== size) throw new Error(`guarded updateMany modified ${result.modifiedCount} of ${size}`);
      const lockRecordsLeft = await db.collection(M.lockModel().collection.collectionName).countDocuments({});
      results.updateMany.push({ mode, documents: size, unguardedMs: round(unguardedMs, 1), guardedMs: round(guardedMs, 1), ratio: round(guardedMs / unguardedMs), lockRecordsLeft });
      await db.collection(M.collection.collectionName).drop();
    }
  }
  return results;
}

export function reportGuard(results: GuardBenchResults): void {
  const pad = (s: string, w: number) => s.padEnd(w);
  console.log('\n6a. Commands per guarded updateOne (replica set unless "never")');
  for (const c of results.commands) console.log(`${pad(c.write, 64)}${pad(String(c.count), 4)}${c.names.join(', ')}`);
  console.log('\n6b. 20 concurrent updateOne $inc on one document nobody locked');
  for (const w of results.concurrentWriters) {
    console.log(`${pad(w.mode, 8)}${w.succeeded}/${w.writers} succeeded, counter ${w.finalCount}, ${w.ms} ms, ${w.commits} commits, ${w.aborts} aborted attempts`);
  }
  console.log('\n6c. updateMany: guarded against the same write with skipLockCheck');
  for (const u of results.updateMany) {
    console.log(`${pad(u.mode, 8)}${pad(`${u.documents} docs`, 14)}unguarded ${pad(`${u.unguardedMs} ms`, 12)}guarded ${pad(`${u.guardedMs} ms`, 12)}ratio ${pad(`${u.ratio}x`, 8)}lock records left ${u.lockRecordsLeft}`);
  }
}
