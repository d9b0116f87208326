/**
 * How long benchmark 1b's lock + unlock takes to warm up, and whether `compare`'s settle criterion
 * (bench/replay.ts, Settle) ends the warm-up where the figures stop drifting:
 * `npx tsx bench/replay-warmup.ts`.
 *
 * The five sides of 1b (the plugin, the raw driver, the Mongoose side, the floor, and a control: a
 * second copy of the raw side, whose ratio to the raw side is the A/A check) run in blocks from a
 * cold start (no untimed cycles), WARMUP_ROUNDS (24) rounds of WARMUP_CYCLES (400) cycles per side.
 * Prints every round in order (cycles per side run before it, each side's p50, plugin/raw, A/A,
 * Mongoose/raw), the round after which the criterion (window 3, tolerance 0.01) first holds, and
 * the medians of the rounds before and after that point, and of the first rounds after the 500
 * untimed cycles benchmark 1b used before (what the previous figures were read from).
 */
import mongoose, { Schema } from 'mongoose';
import { startBackend } from '../test-backend/backend';
import { lockPlugin, type LockableModel } from '../src';
import { compare, hasSettled, lockUnlockReplay, type RoundResult, type Settle } from './replay';

interface Row {
  title: string;
  n: number;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.ceil(values.length / 2) - 1]!;
const f3 = (x: number) => x.toFixed(3);
const us = (ms: number) => (ms * 1000).toFixed(0);

async function main(): Promise<void> {
  const cycles = Number(process.env.WARMUP_CYCLES ?? 400);
  const rounds = Number(process.env.WARMUP_ROUNDS ?? 24);
  const settle: Settle = { window: 3, tolerance: 0.01, maxRounds: rounds };
  const backend = await startBackend([]);
  const dbName = `mpl_warmup_${Date.now().toString(36)}`;
  const connection = mongoose.createConnection(backend.uri, { dbName, monitorCommands: true, maxPoolSize: 20 });
  await connection.asPromise();
  try {
    const db = connection.getClient().db(dbName);
    const schema = new Schema<Row>({ title: String, n: Number }, { collection: 'warmup_items' });
    schema.plugin(lockPlugin, { ttl: 600_000 });
    const model = connection.model<Row, LockableModel<Row>>('WarmupItem', schema);
    await model.init();
    await model.lockModel().init();
    const [{ _id: id }] = await model.insertMany([{ title: 'a', n: 0 }]);
    const { cycle, commands, driver, replayer, load, replaySide } = await lockUnlockReplay(connection, db, model as unknown as Parameters<typeof lockUnlockReplay>[2], id);
    const result = await compare(
      'warm-up study',
      [],
      {
        plugin: { run: cycle },
        raw: replaySide((p) => driver.send(commands, p)),
        mongoose: replaySide((p) => driver.send(commands, p, load)),
        floor: replaySide((p) => replayer.send(commands, p)),
        control: replaySide((p) => driver.send(commands, p)),
      },
      { cycles, rounds, warmup: 0 },
    );
    const all: RoundResult[] = result.rounds;
    let settledAt = -1;
    for (let n = 1; n <= all.length && settledAt < 0; n++) if (hasSettled(all.slice(0, n), settle)) settledAt = n;
    console.log(`lock + unlock from a cold start, blocks, ${rounds} rounds of ${cycles} cycles per side (machine load at end: ${(await import('node:os')).loadavg().map((x) => x.toFixed(1)).join(' ')})`);
    console.log('round  cycles before  plugin us  raw us  control us  plugin/raw  A/A    mongoose/raw');
    all.forEach((r, k) =>
      console.log(
        `${String(k + 1).padStart(5)}  ${String(k * (cycles + Math.ceil(cycles / 16))).padStart(13)}  ${us(r.plugin.p50).padStart(9)}  ${us(r.raw.p50).padStart(6)}  ${us(r.control!.p50).padStart(10)}  ${f3(r.ratio.p50).padStart(10)}  ${f3(r.aaRatio!.p50)}  ${f3(r.mongooseRatio!.p50)}${k + 1 === settledAt ? '  <- criterion met' : ''}`,
      ),
    );
    const summary = (label: string, rs: RoundResult[]) =>
      rs.length && console.log(`${label.padEnd(44)} plugin/raw ${f3(median(rs.map((r) => r.ratio.p50)))} [${f3(Math.min(...rs.map((r) => r.ratio.p50)))}-${f3(Math.max(...rs.map((r) => r.ratio.p50)))}]  A/A ${f3(median(rs.map((r) => r.aaRatio!.p50)))}  (${rs.length} rounds)`);
    summary('rounds 1-2 (cold: 0-850 cycles)', all.slice(0, 2));
    summary('rounds 3-7 (after ~850 cycles, as before)', all.slice(2, 7));
    if (settledAt > 0) {
      summary(`rounds 1-${settledAt} (the warm-up)`, all.slice(0, settledAt));
      summary(`rounds ${settledAt + 1}-${all.length} (after the criterion)`, all.slice(settledAt));
      const after = all.slice(settledAt);
      const half = after.length >> 1;
      summary('  first half of those', after.slice(0, half));
      summary('  second half of those', after.slice(half));
    } else console.log('the criterion was not met');
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
