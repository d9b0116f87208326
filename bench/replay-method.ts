/**
 * Checks benchmark 1b's method (bench/replay.ts, `compare`) for fairness: `npx tsx bench/replay-method.ts`.
 *
 * Times `Model.lock` + `doc.unlock` against its raw replay under both schedules of `compare`
 * (`rotate`, `blocks`), alternating schedule and configuration round by round in one process so
 * that the machine's load hits both alike, with A/A configurations: two sides running the same
 * code (the raw replay against a second copy of itself, the plugin against a second plugin model),
 * which a fair method puts at 1.00x. The other two sides of 1b (the Mongoose side, the floor) run
 * beside, as in the benchmark. Prints, per configuration and schedule, the median ratio of p50s
 * over rounds (lowest-highest) and each side's median p50. Sizes: METHOD_CYCLES (320) cycles per
 * side and round, METHOD_ROUNDS (7) rounds. Figures of two runs are in docs/evidence.md.
 */
import mongoose, { Schema } from 'mongoose';
import { startBackend } from '../test-backend/backend';
import { lockPlugin, type LockableModel } from '../src';
import { compare, lockUnlockReplay, type Schedule, type Side } from './replay';

interface Row {
  title: string;
  n: number;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.ceil(values.length / 2) - 1]!;
const f3 = (x: number) => x.toFixed(3);

async function main(): Promise<void> {
  const cycles = Number(process.env.METHOD_CYCLES ?? 320);
  const rounds = Number(process.env.METHOD_ROUNDS ?? 7);
  const backend = await startBackend([]);
  const dbName = `mpl_method_${Date.now().toString(36)}`;
  const connection = mongoose.createConnection(backend.uri, { dbName, monitorCommands: true, maxPoolSize: 20 });
  await connection.asPromise();
  try {
    const db = connection.getClient().db(dbName);
    // Two plugin models (collection names of one length, so the commands have one size).
    const model = (name: string, collection: string) => {
      const schema = new Schema<Row>({ title: String, n: Number }, { collection });
      schema.plugin(lockPlugin, { ttl: 600_000 });
      return connection.model<Row, LockableModel<Row>>(name, schema);
    };
    const first = model('MethodFirst', 'method_first_');
    const second = model('MethodSecond', 'method_second');
    for (const m of [first, second]) {
      await m.init();
      await m.lockModel().init();
    }
    const [{ _id: id }] = await first.insertMany([{ title: 'a', n: 0 }]);
    const [{ _id: id2 }] = await second.insertMany([{ title: 'a', n: 0 }]);
    const { cycle, commands, driver, replayer, load, replaySide } = await lockUnlockReplay(connection, db, first as unknown as Parameters<typeof lockUnlockReplay>[2], id);
    const cycle2 = async () => (await second.lock(id2, 'bench-owner')).unlock();
    const plugin: Side = { run: cycle };
    const plugin2: Side = { run: cycle2 };
    const raw = replaySide((p) => driver.send(commands, p));
    const raw2 = replaySide((p) => driver.send(commands, p));
    const mongooseSide = replaySide((p) => driver.send(commands, p, load));
    const floor = replaySide((p) => replayer.send(commands, p));
    // `plugin` and `raw` are the two sides compared (compare's ratio is plugin / raw).
    const configurations: [string, { plugin: Side; raw: Side; mongoose: Side; floor: Side }][] = [
      ['plugin / raw', { plugin, raw, mongoose: mongooseSide, floor }],
      ['A/A: raw / a second raw side', { plugin: raw, raw: raw2, mongoose: mongooseSide, floor }],
      ['A/A: plugin / a second plugin model', { plugin, raw: plugin2, mongoose: mongooseSide, floor }],
    ];
    const schedules: Schedule[] = ['rotate', 'blocks'];
    const results = new Map<string, { ratio: number[]; first: number[]; second: number[] }>();
    for (const [, sides] of configurations) for (const schedule of schedules) await compare('warm-up', [], sides, { cycles: 160, rounds: 1, warmup: 0, schedule });
    for (let r = 0; r < rounds; r++) {
      const runs = configurations.flatMap(([name, sides]) => schedules.map((schedule) => [name, sides, schedule] as const));
      for (const [name, sides, schedule] of r % 2 ? runs.reverse() : runs) {
        const [round] = (await compare(name, [], sides, { cycles, rounds: 1, warmup: 0, schedule })).rounds;
        const key = `${name} | ${schedule}`;
        if (!results.has(key)) results.set(key, { ratio: [], first: [], second: [] });
        const entry = results.get(key)!;
        entry.ratio.push(round!.ratio.p50);
        entry.first.push(round!.plugin.p50 * 1000);
        entry.second.push(round!.raw.p50 * 1000);
      }
      console.log(`[method] round ${r + 1} of ${rounds}`);
    }
    console.log(`Benchmark 1b's schedules, lock + unlock, ${rounds} rounds of ${cycles} cycles per side (median ratio of p50s [lowest-highest]; each side's median p50)`);
    for (const [key, e] of results) {
      console.log(`${key.padEnd(48)} ${f3(median(e.ratio))}x [${f3(Math.min(...e.ratio))}-${f3(Math.max(...e.ratio))}]  ${median(e.first).toFixed(0)} us / ${median(e.second).toFixed(0)} us`);
    }
    await replayer.end();
  } finally {
    await connection.close();
    await backend.stop();
  }
}

main().catch((error) => {
  console.error(error);
  process.exitCode = 1;
});
