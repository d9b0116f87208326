/**
 * Calibrates benchmark 1b's schedules (bench/replay.ts, `compare`) with KNOWN added costs:
 * `npx tsx bench/replay-calibrate.ts`.
 *
 * The compared side is the raw replay itself plus a synthetic cost, so the true overhead is known
 * (or measured in place), and each schedule's ratio can be checked against it:
 *   - busy N us: a spin on the clock, the same cost warm or cold (the control);
 *   - chase: a dependent walk over CHASE_LINES (512) cache lines spread over an 8 MB array (cheap when
 *     the lines are in cache, dearer when other code has evicted them);
 *   - funcs: FUNCS (200) distinct generated functions called once each (a larger code path: cheap when
 *     its code and branch history are warm, dearer cold).
 * The other sides of 1b (the Mongoose side, the floor) run beside, as in the benchmark. For each
 * configuration and schedule it prints the median ratio of p50s, the p50 gap it implies (us), and
 * the synthetic cost as timed in place (median per call, us), so that a schedule that reports less
 * than the cost paid, or a cost only paid warm, shows. Sizes: CAL_CYCLES (320), CAL_ROUNDS (5).
 * CAL_ONLY=<regex> keeps some configurations; CAL_POLLUTE=1 runs other code (a 4 MB write and
 * POLLUTE_FUNCS (300) other functions) in every side's untimed prepare, as an application would
 * between lock calls. About 70 s of CPU with every configuration.
 *
 * What it showed (2026-11-26, load 3-7, review of the blocks schedule): a busy-wait of 10 or 20 us
 * is reported within a few us by both schedules; the A/A row (an identity hook) is 1.006-1.007x
 * rotating and 0.995-0.997x in blocks; the pointer chase, a cost that depends on what is in cache,
 * cost 15-37 us in place rotating and 12-19 us in blocks, and was reported as a p50 gap of 22-42 us
 * rotating against 16-29 us in blocks: blocks time such costs warm, rotation colder.
 */
import mongoose, { Schema } from 'mongoose';
import { startBackend } from '../test-backend/backend';
import { compare, lockUnlockReplay, type Schedule, type Side } from './replay';
import { lockPlugin, type LockableModel } from '../src';

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.ceil(values.length / 2) - 1]!;

// --- synthetic costs --------------------------------------------------------------------------
const busy = (us: number) => () => {
  const end = process.hrtime.bigint() + BigInt(us * 1000);
  while (process.hrtime.bigint() < end);
};

/** A dependent chain over `lines` cache lines spread at random over an 8 MB array. */
function chase(lines: number): () => void {
  const ints = (8 << 20) / 4;
  const a = new Int32Array(ints);
  const stride = 16; // 64 bytes
  const slots = ints / stride;
  let seed = 12345;
  const rnd = () => ((seed = (seed * 1103515245 + 12345) >>> 0), seed);
  const picked = new Set<number>();
  while (picked.size < lines) picked.add(rnd() % slots);
  const order = [...picked];
  for (let k = 0; k < order.length; k++) a[order[k]! * stride] = order[(k + 1) % order.length]! * stride;
  const start = order[0]! * stride;
  let sink = 0;
  return () => {
    let p = start;
    for (let k = 0; k < lines; k++) p = a[p]!;
    sink ^= p;
    if (sink === -1) console.log(sink);
  };
}

/** `n` distinct functions (distinct code), called once each per call. */
function funcs(n: number): () => void {
  const fs: ((x: number) => number)[] = [];
  for (let k = 0; k < n; k++) {
    fs.push(new Function('x', `let y = x ^ ${k * 2654435761 >>> 0}; if (y & ${1 << (k % 20)}) y = (y * ${k + 3}) | 0; else y = (y + ${k * 7}) | 0; for (let i = 0; i < ${1 + (k % 3)}; i++) y = (y << 1) ^ (y >>> 3) ^ ${k}; return y;`) as (x: number) => number);
  }
  let sink = 0;
  return () => {
    let x = sink;
    for (const f of fs) x = f(x);
    sink = x;
  };
}

async function main(): Promise<void> {
  const cycles = Number(process.env.CAL_CYCLES ?? 320);
  const rounds = Number(process.env.CAL_ROUNDS ?? 5);
  const chaseLines = Number(process.env.CHASE_LINES ?? 512);
  const nFuncs = Number(process.env.FUNCS ?? 200);
  const withPlugin = process.env.CAL_PLUGIN !== '0';
  const backend = await startBackend([]);
  const dbName = `mpl_cal_${Date.now().toString(36)}`;
  const connection = mongoose.createConnection(backend.uri, { dbName, monitorCommands: true, maxPoolSize: 20 });
  await connection.asPromise();
  try {
    const db = connection.getClient().db(dbName);
    const schema = new Schema<{ title: string; n: number }>({ title: String, n: Number }, { collection: 'cal_rows' });
    schema.plugin(lockPlugin, { ttl: 600_000 });
    const M = connection.model<{ title: string; n: number }, LockableModel<{ title: string; n: number }>>('CalRow', schema);
    await M.init();
    await M.lockModel().init();
    const [{ _id: id }] = await M.insertMany([{ title: 'a', n: 0 }]);
    const { cycle, commands, find, driver, replayer, load, replaySide } = await lockUnlockReplay(connection, db, M as unknown as Parameters<typeof lockUnlockReplay>[2], id);
    const raw = replaySide((p) => driver.send(commands, p));
    const mongooseSide = replaySide((p) => driver.send(commands, p, load));
    const floor = replaySide((p) => replayer.send(commands, p));
    const plugin: Side = { run: cycle };
    /** The raw side plus `extra`, timed in place (after the first command's reply, mid-cycle). */
    const costs = new Map<string, number[]>();
    let current = '';
    const rawPlus = (extra: () => void): Side => {
      const at = new Map([[find, async () => {
        const t0 = performance.now();
        extra();
        costs.get(current)?.push((performance.now() - t0) * 1000);
        return db.collection(commands[find]!.body.find as string).findOne({ _id: id }, { readPreference: 'primary' });
      }]]);
      return replaySide((p) => driver.send(commands, p, at));
    };
    const extras: [string, () => void][] = [
      ['busy 10 us', busy(10)],
      ['busy 20 us', busy(20)],
      [`chase ${chaseLines} lines / 8 MB`, chase(chaseLines)],
      [`${nFuncs} distinct functions`, funcs(nFuncs)],
    ];
    // Hot cost of each extra, alone in a loop.
    for (const [name, f] of extras) {
      for (let k = 0; k < 2000; k++) f();
      const t0 = performance.now();
      for (let k = 0; k < 2000; k++) f();
      console.log(`[cal] ${name}: hot in a loop ${(((performance.now() - t0) / 2000) * 1000).toFixed(2)} us`);
    }
    const configurations: [string, { plugin: Side; raw: Side; mongoose: Side; floor: Side }][] = [
      ['A/A: raw + nothing (identity find hook) / raw', { plugin: rawPlus(() => {}), raw, mongoose: mongooseSide, floor }],
      ...extras.map(([name, f]) => [`raw + ${name} / raw`, { plugin: rawPlus(f), raw, mongoose: mongooseSide, floor }] as [string, { plugin: Side; raw: Side; mongoose: Side; floor: Side }]),
      ...(withPlugin ? [['plugin / raw', { plugin, raw, mongoose: mongooseSide, floor }] as [string, { plugin: Side; raw: Side; mongoose: Side; floor: Side }]] : []),
    ];
    // CAL_POLLUTE=1: every side's untimed `prepare` first runs other code (a 4 MB write, POLLUTE_FUNCS
    // other distinct functions), as an application does between its lock calls: then no schedule
    // keeps any side's code warm for it.
    if (process.env.CAL_POLLUTE === '1') {
      const buffer = new Int32Array((4 << 20) / 4);
      const other = funcs(Number(process.env.POLLUTE_FUNCS ?? 300));
      const pollute = () => {
        for (let k = 0; k < buffer.length; k += 16) buffer[k] = (buffer[k]! + k) | 0;
        other();
      };
      for (const [, sides] of configurations) {
        for (const side of Object.values(sides)) {
          if ((side as Side & { polluted?: true }).polluted) continue;
          const prepare = side.prepare;
          side.prepare = (i) => {
            pollute();
            return prepare?.(i);
          };
          (side as Side & { polluted?: true }).polluted = true;
        }
      }
    }
    const only = process.env.CAL_ONLY ? new RegExp(process.env.CAL_ONLY) : undefined;
    if (only) configurations.splice(0, configurations.length, ...configurations.filter(([name]) => only.test(name)));
    const schedules: Schedule[] = ['rotate', 'blocks'];
    const results = new Map<string, { ratio: number[]; gap: number[]; raw: number[] }>();
    for (const [, sides] of configurations) for (const schedule of schedules) await compare('warm-up', [], sides, { cycles: 96, rounds: 1, warmup: 0, schedule });
    for (let r = 0; r < rounds; r++) {
      const runs = configurations.flatMap(([name, sides]) => schedules.map((schedule) => [name, sides, schedule] as const));
      for (const [name, sides, schedule] of r % 2 ? runs.reverse() : runs) {
        const key = `${name} | ${schedule}`;
        current = key;
        if (!costs.has(key)) costs.set(key, []);
        const [round] = (await compare(name, [], sides, { cycles, rounds: 1, warmup: 0, schedule })).rounds;
        if (!results.has(key)) results.set(key, { ratio: [], gap: [], raw: [] });
        const e = results.get(key)!;
        e.ratio.push(round!.ratio.p50);
        e.gap.push((round!.plugin.p50 - round!.raw.p50) * 1000);
        e.raw.push(round!.raw.p50 * 1000);
      }
      console.log(`[cal] round ${r + 1} of ${rounds}`);
    }
    console.log(`\n${rounds} rounds of ${cycles} cycles per side; median over rounds [lowest-highest]`);
    console.log(`${'configuration | schedule'.padEnd(58)} ${'ratio p50'.padEnd(22)} ${'p50 gap us'.padEnd(20)} ${'raw p50'.padEnd(9)} extra in place (median us)`);
    for (const [key, e] of results) {
      const c = costs.get(key) ?? [];
      console.log(
        `${key.padEnd(58)} ${`${median(e.ratio).toFixed(3)} [${Math.min(...e.ratio).toFixed(3)}-${Math.max(...e.ratio).toFixed(3)}]`.padEnd(22)} ${`${median(e.gap).toFixed(1)} [${Math.min(...e.gap).toFixed(0)}..${Math.max(...e.gap).toFixed(0)}]`.padEnd(20)} ${median(e.raw).toFixed(0).padEnd(9)} ${c.length ? median(c).toFixed(2) : '-'}`,
      );
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
