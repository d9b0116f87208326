/**
 * Benchmark 7 (issue 16, "The emulator scans where mongod uses an index"): the plugin's calls with
 * 1,000 and with 100,000 lock records in the lock collection, and the ratio of their p50 latencies.
 * On mongod each of these calls reads through an index (the `_id` index or `{ owner: 1, _id: 1 }`),
 * so its cost does not grow with the number of locks; the target is a ratio within 2x.
 *
 *  - `lockStatus(100 ids)`: one find `{ _id: { $in: ids }, $expr }` (50 ids locked, 50 not);
 *  - a `listLocks` page: one find `{ $expr, _id: { $gt: after } }` sorted on `_id`, limit 51
 *    (pages 1 to 20 in turn, following `next`);
 *  - `listLocks({ owner })`: one find `{ owner, $expr }` sorted on `_id`, limit 51 (the owner holds 5);
 *  - `releaseAllFor(owner)` of 5 locks: one updateMany `{ owner, $expr }` (a fresh owner each time);
 *  - `lock` + `unlock` of one document.
 *
 * Both collections live in the same server and the two sizes are measured in turns (1k, 100k,
 * 1k, ...), so a change in the machine's load affects both alike. The plan of each call is the
 * server's `explain` of the command the plugin sent (captured by command monitoring).
 *
 * Sizes scale with BENCH_SCALE (the large size only; at least 2,000). Run alone with
 * `npm run bench:scale` (results in bench/results/latest-scale.json), or as part of `npm run bench`.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import mongoose, { Schema, Types, type Connection } from 'mongoose';
import type { Db, Document } from 'mongodb';
import { lockPlugin, type LockableModel, type LockMethods } from '../src';

interface Item {
  title: string;
}
type ItemModel = LockableModel<Item>;

export interface ScaleRow {
  call: string;
  small: { locks: number; p50: number; p99: number };
  large: { locks: number; p50: number; p99: number };
  /** p50 with the large collection over p50 with the small one. */
  ratio: number;
  /** The winning plan of the command the call sent, as the server explains it. */
  plan: string;
}

export interface ScaleBenchResults {
  samples: number;
  rows: ScaleRow[];
}

const SMALL = 1_000;
const OWNER_LOCKS = 5;
const round = (x: number, digits = 2) => Math.round(x * 10 ** digits) / 10 ** digits;
const ownerKey = (owner: string) => createHash('sha256').update(owner, 'utf8').digest('base64url');

function percentile(sorted: number[], p: number): number {
  return sorted[Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1))];
}

function summary(samples: number[]): { p50: number; p99: number } {
  const sorted = [...samples].sort((a, b) => a - b);
  return { p50: round(percentile(sorted, 50), 3), p99: round(percentile(sorted, 99), 3) };
}

/** One model (and its lock collection) holding `size` lock records in the plugin's shape. */
interface Fixture {
  size: number;
  model: ItemModel;
  locks: ReturnType<Db['collection']>;
  statusIds: Types.ObjectId[];
  itemIds: Types.ObjectId[];
  /** The `next` cursors of pages 1..20 of listLocks (undefined for page 1). */
  pageCursors: Array<unknown>;
}

async function fixture(connection: Connection, db: Db, size: number): Promise<Fixture> {
  const schema = new Schema<Item, ItemModel, LockMethods>({ title: String });
  schema.plugin(lockPlugin, { ttl: 600_000 });
  const model = connection.model<Item, ItemModel>(`ScaleItem${size}`, schema);
  await model.init();
  await model.lockModel().init();
  const locks = db.collection<Document>(model.lockModel().collection.collectionName);
  const now = Date.now();
  const ids: Types.ObjectId[] = [];
  // The records bench 5 writes: every fifth one released (owner null, expired), the others held
  // by owners of OWNER_LOCKS locks each.
  for (let i = 0; i < size; i += 5_000) {
    const batch = Array.from({ length: Math.min(5_000, size - i) }, (_, j) => {
      const n = i + j;
      const _id = new Types.ObjectId();
      ids.push(_id);
      const released = n % 5 === 0;
      return {
        _id,
        owner: released ? null : ownerKey(`owner-${Math.floor(n / OWNER_LOCKS)}`),
        token: released ? null : `t${n}`,
        fence: n + 1,
        acquiredAt: new Date(now),
        expiresAt: new Date(released ? now - 1_000 : now + 3_600_000),
        label: null,
      };
    });
    await locks.insertMany(batch);
  }
  const statusIds = [...Array.from({ length: 50 }, (_, k) => ids[Math.floor((k * ids.length) / 50)]), ...Array.from({ length: 50 }, () => new Types.ObjectId())];
  const itemIds = (await model.insertMany(Array.from({ length: 20 }, (_, k) => ({ title: `item ${k}` })))).map((d) => d._id as Types.ObjectId);
  const pageCursors: unknown[] = [undefined];
  for (let p = 1; p < 20; p++) {
    const page = await model.listLocks({ after: pageCursors[p - 1] as never });
    if (!page.next) break;
    pageCursors.push(page.next);
  }
  return { size, model, locks, statusIds, itemIds, pageCursors };
}

type Call = [name: string, run: (f: Fixture, i: number) => Promise<unknown>];

/** Five held records of a fresh owner (untimed set-up of the releaseAllFor call). */
async function giveLocks(f: Fixture, owner: string): Promise<void> {
  const now = Date.now();
  await f.locks.insertMany(
    Array.from({ length: OWNER_LOCKS }, (_, k) => ({
      _id: new Types.ObjectId(),
      owner: ownerKey(owner),
      token: `r${k}`,
      fence: 1,
      acquiredAt: new Date(now),
      expiresAt: new Date(now + 3_600_000),
      label: null,
    })),
  );
}

const CALLS: Call[] = [
  ['lockStatus(100 ids)', (f) => f.model.lockStatus(f.statusIds)],
  ['listLocks() page (pages 1-20)', (f, i) => f.model.listLocks({ after: f.pageCursors[Math.abs(i) % f.pageCursors.length] as never })],
  [`listLocks({ owner }) (${OWNER_LOCKS} locks)`, (f) => f.model.listLocks({ owner: 'owner-7' })],
  [`releaseAllFor(owner) (${OWNER_LOCKS} locks)`, (f, i) => f.model.releaseAllFor(`releaser-${i}`)],
  [
    'lock + unlock',
    async (f, i) => {
      const held = await f.model.lock(f.itemIds[Math.abs(i) % f.itemIds.length], 'scale-bench');
      await held.unlock();
    },
  ],
];

/** The winning plan of the first find/update/findAndModify `run` sends, as `A <- B(index)`. */
async function planOf(connection: Connection, db: Db, run: () => Promise<unknown>): Promise<string> {
  const sent: Document[] = [];
  const listener = (event: { commandName: string; command: Document }) => {
    if (['find', 'update', 'findAndModify', 'delete'].includes(event.commandName)) sent.push(event.command);
  };
  connection.getClient().on('commandStarted', listener);
  try {
    await run();
  } finally {
    connection.getClient().off('commandStarted', listener);
  }
  const plans: string[] = [];
  for (const command of sent) {
    const { lsid: _lsid, $clusterTime: _ct, $db: _db, txnNumber: _txn, $readPreference: _rp, ...rest } = command;
    try {
      const explained = await db.command({ explain: rest, verbosity: 'queryPlanner' });
      const stages: string[] = [];
      const walk = (stage: Document | undefined) => {
        if (!stage) return;
        const bounds = stage.indexBounds ? ` ${JSON.stringify(stage.indexBounds)}` : '';
        stages.push(`${stage.stage}${stage.indexName ? `(${stage.indexName}${bounds.length < 160 ? bounds : ''})` : ''}`);
        walk(stage.inputStage as Document | undefined);
      };
      walk((explained.queryPlanner as Document | undefined)?.winningPlan as Document | undefined);
      plans.push(stages.join(' <- '));
    } catch (error) {
      plans.push(`explain failed: ${(error as Error).message}`);
    }
  }
  return plans.join('; ');
}

export async function benchScale(connection: Connection, db: Db, scale = 1): Promise<ScaleBenchResults> {
  const large = Math.max(2_000, Math.round(100_000 * scale));
  const samples = Math.max(30, Math.round(200 * Math.min(1, scale)));
  const warmup = Math.max(10, Math.round(samples / 4));
  console.log(`[bench] 7. scale: the plugin's calls with ${SMALL} and ${large} locks (${samples} samples each, in turns)`);
  const small = await fixture(connection, db, SMALL);
  const big = await fixture(connection, db, large);
  const rows: ScaleRow[] = [];
  let release = 0;
  for (const [name, run] of CALLS) {
    const timed = async (f: Fixture, i: number): Promise<number> => {
      if (name.startsWith('releaseAllFor')) {
        const owner = `releaser-${release++}`;
        await giveLocks(f, owner);
        const t = performance.now();
        await f.model.releaseAllFor(owner);
        return performance.now() - t;
      }
      const t = performance.now();
      await run(f, i);
      return performance.now() - t;
    };
    for (let i = 0; i < warmup; i++) {
      await timed(small, -1 - i);
      await timed(big, -1 - i);
    }
    const times: { small: number[]; large: number[] } = { small: [], large: [] };
    for (let i = 0; i < samples; i++) {
      times.small.push(await timed(small, i));
      times.large.push(await timed(big, i));
    }
    const s = summary(times.small);
    const l = summary(times.large);
    const plan = await planOf(connection, db, () => (name.startsWith('releaseAllFor') ? giveLocks(big, 'plan-owner').then(() => big.model.releaseAllFor('plan-owner')) : run(big, 1)));
    rows.push({ call: name, small: { locks: SMALL, ...s }, large: { locks: large, ...l }, ratio: round(l.p50 / s.p50), plan });
  }
  return { samples, rows };
}

export function reportScale(r: ScaleBenchResults): void {
  const pad = (s: string, w: number) => s.padEnd(w);
  const first = r.rows[0];
  console.log(`\n7. The plugin's calls with ${first?.small.locks} and ${first?.large.locks} locks (p50 / p99 ms, ${r.samples} samples each; target: p50 ratio <= 2x)`);
  console.log(`${pad('', 36)}${pad(`${first?.small.locks} locks`, 22)}${pad(`${first?.large.locks} locks`, 22)}ratio`);
  for (const row of r.rows) {
    console.log(`${pad(row.call, 36)}${pad(`${row.small.p50} / ${row.small.p99}`, 22)}${pad(`${row.large.p50} / ${row.large.p99}`, 22)}${row.ratio}x`);
  }
  console.log('   plans (with the large collection):');
  for (const row of r.rows) console.log(`   ${pad(row.call, 33)}${row.plan}`);
}

async function main(): Promise<void> {
  const { startBackend } = await import('../test-backend/backend');
  const notes: string[] = [];
  const backend = await startBackend(notes);
  const backendLine = `${backend.description}${notes.length ? ` (${notes.join('; ')})` : ''}`;
  console.log(`[bench] backend: ${backendLine}`);
  const dbName = `mpl_scale_${Date.now().toString(36)}`;
  const connection = mongoose.createConnection(backend.uri, { dbName, maxPoolSize: 10, monitorCommands: true });
  await connection.asPromise();
  const db = connection.getClient().db(dbName);
  const os = await import('node:os');
  const machine = `${os.cpus().length} cores (${os.cpus()[0]?.model ?? 'unknown'}), load average ${os.loadavg().map((l) => l.toFixed(1)).join(' ')} at start, Node ${process.version}`;
  let results: ScaleBenchResults;
  try {
    results = await benchScale(connection, db, Number(process.env.BENCH_SCALE ?? 1));
  } finally {
    await db.dropDatabase().catch(() => undefined);
    await connection.close();
    await backend.stop();
  }
  console.log(`\nBenchmarks on ${backendLine}\n${machine}`);
  reportScale(results);
  const dir = join(__dirname, 'results');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'latest-scale.json'), `${JSON.stringify({ when: new Date().toISOString(), backend: backendLine, backendKind: backend.kind, machine, scale: results }, null, 2)}\n`);
  console.log(`\nwrote ${join('bench', 'results', 'latest-scale.json')}`);
}

if (require.main === module) {
  main().then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
