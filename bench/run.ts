/**
 * `npm run bench`: the five benchmarks of issue 5 on the active backend (see
 * test-backend/backend.ts: MONGODB_URI, else a real mongod, else the emulator), in one run.
 * Prints a table and writes bench/results/latest.json and bench/results/latest.svg.
 *
 *  1. uncontended lock + unlock cycle: p50/p99 latency and cycles/s, against a raw-driver
 *     baseline (insertOne + deleteOne on a collection with the same indexes), the raw driver
 *     doing the same work as Model.lock (insertOne + findOne + deleteOne), and the npm packages
 *     mongo-locks and mongodb-lock;
 *  1b. the plugin against the raw driver sending the identical commands (bench/identical.ts):
 *     lock + unlock, a guarded save, saveAndUnlock and guarded updateOnes, interleaved, in rounds;
 *  2. database commands per operation (command monitoring);
 *  3. contended handoff: N waiters on one document, change-stream wake-up against polling;
 *  4. releaseAllFor with 10,000 locks held by one owner;
 *  5. acquire latency with 100,000 other locks in the collection against an empty one, and the
 *     query plan of the acquire's filter;
 *  6. the write guard (issue 10, bench/guard.ts): commands per guarded updateOne, 20 concurrent
 *     writers on one unlocked document, guarded updateMany over 1,000 / 10,000 / 100,000
 *     documents against the unguarded write;
 *  7. scale (issue 16, bench/scale.ts): lockStatus, listLocks, listLocks({ owner }), releaseAllFor
 *     and lock + unlock with 1,000 and with 100,000 locks, and the ratio of their latencies.
 *  8. claiming the next free job (issue 17, bench/lock-next.ts): Model.lockNext against the
 *     hand-written find + tryLock loop and the in-document status claim (agenda / mongodb-queue),
 *     with 1, 4 and 16 workers in several processes over 1,000 queued jobs.
 *  9. Model.lockMany (issue 17, bench/lock-many.ts): commands and latency at 1 / 10 / 100 / 1,000
 *     ids against N sequential Model.lock calls, the refused lockMany and unlockMany.
 *
 * Sizes can be lowered with BENCH_SCALE (e.g. 0.2) for a quick look. BENCH_ONLY=core runs only 1-5,
 * BENCH_ONLY=identical only 1b, guard only 6, scale only 7 (also `npm run bench:scale`), next only
 * 8, many only 9, diagnostics only 10; each writes its results to bench/results/latest-<name>.json.
 */
import { createHash } from 'node:crypto';
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createRequire } from 'node:module';
import mongoose, { Schema, Types, type Connection } from 'mongoose';
import type { Db, Document } from 'mongodb';
import { lockPlugin, type LockableModel, type LockMethods, type LockPluginOptions } from '../src';
import { startBackend } from '../test-backend/backend';
import { benchGuard, reportGuard, type GuardBenchResults } from './guard';
import { benchIdentical } from './identical';
import { recordCommands, stripEnvelope, type ReplayComparison } from './replay';
import { benchScale, reportScale, type ScaleBenchResults } from './scale';
import { benchLockNext, reportLockNext, type LockNextBenchResults } from './lock-next';
import { benchLockMany, reportLockMany, type LockManyBenchResults } from './lock-many';
import { benchDiagnostics, reportDiagnostics, type DiagnosticsBenchResults } from './diagnostics';
import { renderSvg } from './svg';

const SCALE = Number(process.env.BENCH_SCALE ?? 1);
const n = (count: number) => Math.max(10, Math.round(count * SCALE));
const CYCLES = n(400);
/** Untimed cycles first: the first rows would otherwise pay for JIT warm-up of the driver and Mongoose. */
const WARMUP = n(200);
const HANDOFFS = n(150);
const HANDOFF_TIME_LIMIT_MS = 25_000;
const WAITERS = Number(process.env.BENCH_WAITERS ?? 8);
const RELEASE_ALL_LOCKS = Math.round(10_000 * SCALE);
const OTHER_LOCKS = Math.round(100_000 * SCALE);
const ACQUIRES = n(300);
const ONLY = process.env.BENCH_ONLY;

interface Item {
  title: string;
  n: number;
}
type ItemModel = LockableModel<Item>;

export interface LatencyRow {
  name: string;
  commandsPerCycle: number | null;
  p50: number;
  p99: number;
  opsPerSec: number;
  ratioToRaw?: number;
  note?: string;
}

export interface BenchResults {
  when: string;
  backend: string;
  backendKind: string;
  machine: string;
  cycle: LatencyRow[];
  /** 1b. The plugin against the raw driver sending the identical commands (bench/identical.ts). */
  replayed?: ReplayComparison[];
  cycleErrors: Record<string, string>;
  commands: { operation: string; count: number; names: string[] }[];
  handoff: { mode: string; waiters: number; handoffs: number; handoffsPerSec: number; p50: number; p99: number }[];
  releaseAll: { locks: number; released: number; ms: number; locksPerSec: number };
  acquireScale: { otherLocks: number; empty: { p50: number; p99: number }; full: { p50: number; p99: number }; ratioP50: number; plan: string };
  guard?: GuardBenchResults;
  scale?: ScaleBenchResults;
  lockNext?: LockNextBenchResults;
  lockMany?: LockManyBenchResults;
  diagnostics?: DiagnosticsBenchResults;
}

function percentile(sorted: number[], p: number): number {
  if (sorted.length === 0) return NaN;
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)];
}

function summarize(samples: number[]): { p50: number; p99: number } {
  const sorted = [...samples].sort((a, b) => a - b);
  return { p50: round(percentile(sorted, 50)), p99: round(percentile(sorted, 99)) };
}

const round = (x: number, digits = 2) => Math.round(x * 10 ** digits) / 10 ** digits;
const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} did not complete within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/** Runs `cycle` WARMUP + CYCLES times sequentially; latency per cycle in ms. */
async function timeCycles(name: string, commandsPerCycle: number | null, cycle: (i: number) => Promise<void>, note?: string): Promise<LatencyRow> {
  for (let i = 0; i < WARMUP; i++) await cycle(-1 - i);
  const samples: number[] = [];
  const started = performance.now();
  for (let i = 0; i < CYCLES; i++) {
    const t = performance.now();
    await cycle(i);
    samples.push(performance.now() - t);
  }
  const seconds = (performance.now() - started) / 1000;
  return { name, commandsPerCycle, ...summarize(samples), opsPerSec: round(CYCLES / seconds, 1), note };
}

function itemModel(connection: Connection, name: string, options?: LockPluginOptions): ItemModel {
  const schema = new Schema<Item, ItemModel, LockMethods>({ title: String, n: Number });
  schema.plugin(lockPlugin, options);
  return connection.model<Item, ItemModel>(name, schema);
}

async function ready(model: ItemModel): Promise<void> {
  await model.init();
  await model.lockModel().init();
}

const ownerKey = (owner: string) => createHash('sha256').update(owner, 'utf8').digest('base64url');

async function main(): Promise<void> {
  const notes: string[] = [];
  const backend = await startBackend(notes);
  const backendLine = `${backend.description}${notes.length ? ` (${notes.join('; ')})` : ''}`;
  console.log(`[bench] backend: ${backendLine}`);
  const dbName = `mpl_bench_${Date.now().toString(36)}`;
  const connection = mongoose.createConnection(backend.uri, { dbName, monitorCommands: true, maxPoolSize: 20 });
  await connection.asPromise();
  const db = connection.getClient().db(dbName);
  const commandLog: string[] = [];
  connection.getClient().on('commandStarted', (event) => {
    if (!['hello', 'isMaster', 'ismaster', 'ping', 'endSessions', 'getMore'].includes(event.commandName)) commandLog.push(event.commandName);
  });
  const countCommands = async (fn: () => Promise<unknown>): Promise<string[]> => {
    commandLog.length = 0;
    await fn();
    return [...commandLog];
  };
  const os = await import('node:os');
  const results: BenchResults = {
    when: new Date().toISOString(),
    backend: backendLine,
    backendKind: backend.kind,
    machine: `${os.cpus().length} cores (${os.cpus()[0]?.model ?? 'unknown'}), load average ${os.loadavg().map((l) => l.toFixed(1)).join(' ')} at start, Node ${process.version}`,
    cycle: [],
    cycleErrors: {},
    commands: [],
    handoff: [],
    releaseAll: { locks: 0, released: 0, ms: 0, locksPerSec: 0 },
    acquireScale: { otherLocks: OTHER_LOCKS, empty: { p50: 0, p99: 0 }, full: { p50: 0, p99: 0 }, ratioP50: 0, plan: '' },
  };

  try {
    // ---- 1b. The plugin against the raw driver sending the identical commands -------------------
    if (ONLY === undefined || ONLY === 'identical') results.replayed = await benchIdentical(connection, db, SCALE);
    if (ONLY === undefined || ONLY === 'core') await coreBenchmarks();
    // ---- 6. The write guard --------------------------------------------------------------------
    if (ONLY === undefined || ONLY === 'guard') results.guard = await benchGuard(connection, db, countCommands, SCALE);
    // ---- 7. The plugin's calls with 1,000 and 100,000 locks ------------------------------------
    if (ONLY === undefined || ONLY === 'scale') results.scale = await benchScale(connection, db, SCALE);
    // ---- 8. Claiming the next free job ---------------------------------------------------------
    if (ONLY === undefined || ONLY === 'next') results.lockNext = await benchLockNext(backend.uri, db, SCALE);
    // ---- 9. Several documents at once -----------------------------------------------------------
    if (ONLY === undefined || ONLY === 'many') results.lockMany = await benchLockMany(connection, countCommands, SCALE);
    // ---- 10. The diagnostics channels ------------------------------------------------------------
    if (ONLY === undefined || ONLY === 'diagnostics') results.diagnostics = await benchDiagnostics(connection, SCALE);
  } finally {
    await connection.getClient().db(dbName).dropDatabase().catch(() => undefined);
    await connection.close();
    await backend.stop();
  }

  report(results);

  async function coreBenchmarks(): Promise<void> {
    // ---- 1. Uncontended lock + unlock cycle -------------------------------------------------
    console.log(`[bench] 1. uncontended cycle: ${CYCLES} cycles each (+${WARMUP} warm-up)`);
    const Item = itemModel(connection, 'BenchItem', { ttl: 30_000 });
    await ready(Item);
    const ids = (await Item.insertMany(Array.from({ length: 50 }, (_, i) => ({ title: `item ${i}`, n: i })))).map((d) => d._id);
    const split = { lock: [] as number[], unlock: [] as number[] };
    const plugin = await timeCycles('plugin: Model.lock + doc.unlock', 3, async (i) => {
      const t0 = performance.now();
      const doc = await Item.lock(ids[Math.abs(i) % ids.length], 'bench-owner');
      const t1 = performance.now();
      await doc.unlock();
      if (i >= 0) {
        split.lock.push(t1 - t0);
        split.unlock.push(performance.now() - t1);
      }
    });
    plugin.note = `acquire (findAndModify) + load (find) + release (update); p50 Model.lock ${summarize(split.lock).p50} ms, doc.unlock ${summarize(split.unlock).p50} ms`;

    // The raw baseline: a collection shaped like the lock collection (same indexes).
    const rawLocks = db.collection<Document>('raw.locks');
    await rawLocks.createIndex({ expiresAt: 1 }, { expireAfterSeconds: 86_400 });
    await rawLocks.createIndex({ owner: 1 });
    const raw = await timeCycles('raw driver: insertOne + deleteOne', 2, async (i) => {
      const _id = ids[Math.abs(i) % ids.length];
      await rawLocks.insertOne({ _id, owner: 'bench-owner', token: 't', fence: i, acquiredAt: new Date(), expiresAt: new Date(Date.now() + 30_000) });
      await rawLocks.deleteOne({ _id });
    }, 'no expiry check, no takeover of expired locks, no document load');
    const items = db.collection<Document>(Item.collection.collectionName);
    const rawSameWork = await timeCycles('raw driver: insertOne + findOne + deleteOne', 3, async (i) => {
      const _id = ids[Math.abs(i) % ids.length];
      await rawLocks.insertOne({ _id, owner: 'bench-owner', token: 't', fence: i, acquiredAt: new Date(), expiresAt: new Date(Date.now() + 30_000) });
      await items.findOne({ _id });
      await rawLocks.deleteOne({ _id });
    }, 'the same round trips as Model.lock + unlock (lock, load, release)');
    results.cycle.push(plugin, raw, rawSameWork);

    // mongo-locks: LockManager.lock(key) = insertOne; lock.free() = deleteOne.
    try {
      const { LockManager } = await import('mongo-locks');
      const manager = new LockManager(db.collection('mongo-locks') as never);
      const row = await timeCycles('mongo-locks: lock + free', 2, async (i) => {
        const lock = await manager.lock(`item-${Math.abs(i) % ids.length}`);
        if (!lock) throw new Error('mongo-locks did not grant an uncontended lock');
        await lock.free();
      }, 'insertOne + deleteOne; expiry by the TTL monitor only (client clock)');
      results.cycle.push(row);
    } catch (error) {
      results.cycleErrors['mongo-locks'] = (error as Error).message;
    }

    // mongodb-lock 1.0.1: callback API (written for driver 3.x).
    try {
      const require_ = createRequire(__filename);
      const mongodbLock = require_('mongodb-lock') as (col: unknown, name: string, opts?: object) => {
        ensureIndexes(cb: (err: unknown) => void): void;
        acquire(cb: (err: unknown, code?: string | null) => void): void;
        release(code: string, cb: (err: unknown, ok?: boolean) => void): void;
      };
      const col = db.collection('mongodb-lock');
      const locks = ids.map((_, i) => mongodbLock(col, `item-${i}`, { timeout: 30_000 }));
      const call = <T>(fn: (cb: (err: unknown, value?: T) => void) => void, what: string) =>
        withTimeout(new Promise<T | undefined>((resolve, reject) => fn((err, value) => (err ? reject(err) : resolve(value)))), 3_000, what);
      await call((cb) => locks[0].ensureIndexes(cb), 'mongodb-lock ensureIndexes');
      const row = await timeCycles('mongodb-lock: acquire + release', 3, async (i) => {
        const lock = locks[Math.abs(i) % locks.length];
        const code = await call<string | null>((cb) => lock.acquire(cb), 'mongodb-lock acquire');
        if (!code) throw new Error('mongodb-lock did not grant an uncontended lock');
        await call<boolean>((cb) => lock.release(code, cb), 'mongodb-lock release');
      });
      results.cycle.push(row);
    } catch (error) {
      results.cycleErrors['mongodb-lock'] =
        `${(error as Error).message}. mongodb-lock 1.0.1 is written for the callback API of mongodb driver 3.x ` +
        '(createIndexes(..., callback), findOneAndUpdate(..., callback), insertOne(..., callback), result.ops); driver 5+ removed callbacks, ' +
        `so with driver ${(createRequire(__filename)('mongodb/package.json') as { version: string }).version} the callbacks are never called and nothing completes.`;
    }
    for (const row of results.cycle) row.ratioToRaw = round(row.p50 / raw.p50);

    // ---- 2. Commands per operation ----------------------------------------------------------
    console.log('[bench] 2. commands per operation');
    const id0 = ids[0];
    let doc = await Item.lock(id0, 'counter');
    await doc.unlock();
    const record = (operation: string, names: string[]) => results.commands.push({ operation, count: names.length, names });
    record('Model.lock (acquire + load)', await countCommands(async () => {
      doc = await Item.lock(id0, 'counter');
    }));
    record('doc.unlock', await countCommands(() => doc.unlock()));
    doc = await Item.lock(id0, 'counter');
    doc.n += 1;
    record('doc.saveAndUnlock', await countCommands(() => doc.saveAndUnlock()));
    doc = await Item.lock(id0, 'counter');
    doc.n += 1;
    record('doc.save (guarded, lock held)', await countCommands(() => doc.save()));
    await doc.unlock();
    await Item.lock(ids[1], 'counter');
    await Item.lock(ids[2], 'counter');
    record('Model.releaseAllFor (2 locks)', await countCommands(() => Item.releaseAllFor('counter')));
    record('updateOne with lockOwner (guarded query write)', await countCommands(() => Item.updateOne({ _id: id0 }, { $inc: { n: 1 } }).setOptions({ lockOwner: 'counter' }).exec()));
    record('updateOne, skipLockCheck (unguarded)', await countCommands(() => Item.updateOne({ _id: id0 }, { $inc: { n: 1 } }).setOptions({ skipLockCheck: true }).exec()));

    // ---- 3. Contended handoff ---------------------------------------------------------------
    for (const mode of ['auto', 'never'] as const) {
      const label = mode === 'auto' ? 'change streams' : 'polling';
      console.log(`[bench] 3. handoff, ${WAITERS} waiters, ${label}`);
      const Contended = itemModel(connection, `HandoffItem_${mode}`, { ttl: 30_000, changeStreams: mode });
      await ready(Contended);
      const { _id } = await Contended.create({ title: 'contended', n: 0 });
      let releasedAt = 0;
      const gaps: number[] = [];
      let handoffs = 0;
      // Resolved at each acquisition: a releaser rejoins only after someone else took the lock,
      // so every measured gap is a handoff to a waiting contender, never a self-reacquisition.
      let nextAcquisition: { promise: Promise<void>; resolve: () => void } | undefined;
      const arm = () => {
        let resolve!: () => void;
        const promise = new Promise<void>((r) => (resolve = r));
        nextAcquisition = { promise, resolve };
        return promise;
      };
      const started = performance.now();
      const deadline = started + HANDOFF_TIME_LIMIT_MS;
      const done = () => handoffs >= HANDOFFS || performance.now() >= deadline;
      await Promise.all(
        Array.from({ length: WAITERS }, async (_, w) => {
          while (!done()) {
            const held = await Contended.lock(_id, `waiter-${w}`, { wait: 60_000 });
            if (releasedAt > 0) {
              gaps.push(performance.now() - releasedAt);
              handoffs++;
            }
            nextAcquisition?.resolve();
            const someoneElse = arm();
            await held.unlock();
            releasedAt = performance.now();
            if (done()) {
              nextAcquisition?.resolve();
              return;
            }
            await Promise.race([someoneElse, sleep(5_000)]);
          }
          nextAcquisition?.resolve();
        }),
      );
      const seconds = (performance.now() - started) / 1000;
      results.handoff.push({ mode: label, waiters: WAITERS, handoffs, handoffsPerSec: round(handoffs / seconds, 1), ...summarize(gaps) });
    }

    // ---- 4. releaseAllFor with 10,000 locks ------------------------------------------------
    console.log(`[bench] 4. releaseAllFor with ${RELEASE_ALL_LOCKS} locks held by one owner`);
    const Many = itemModel(connection, 'ReleaseAllItem', { ttl: 600_000 });
    await ready(Many);
    const manyLocks = db.collection<Document>(Many.lockModel().collection.collectionName);
    // 100 locks taken through the API, the rest written in the very same shape in bulk (faster).
    const viaApi = Math.min(100, RELEASE_ALL_LOCKS);
    const apiIds = (await Many.insertMany(Array.from({ length: viaApi }, (_, i) => ({ title: `many ${i}`, n: i })))).map((d) => d._id);
    for (const id of apiIds) await Many.lock(id, 'session-with-many-locks');
    const sample = await manyLocks.findOne({ _id: apiIds[0] });
    const nowMs = Date.now();
    for (let i = viaApi; i < RELEASE_ALL_LOCKS; i += 2_000) {
      const batch = Array.from({ length: Math.min(2_000, RELEASE_ALL_LOCKS - i) }, () => ({
        _id: new Types.ObjectId(),
        owner: ownerKey('session-with-many-locks'),
        token: `bulk${i}`,
        fence: sample!.fence,
        acquiredAt: new Date(nowMs),
        expiresAt: new Date(nowMs + 600_000),
      }));
      await manyLocks.insertMany(batch);
    }
    const t4 = performance.now();
    const released = await Many.releaseAllFor('session-with-many-locks');
    const ms4 = performance.now() - t4;
    results.releaseAll = { locks: RELEASE_ALL_LOCKS, released, ms: round(ms4, 1), locksPerSec: Math.round(released / (ms4 / 1000)) };

    // ---- 5. Acquire latency: empty vs 100,000 other locks ----------------------------------
    console.log(`[bench] 5. acquire latency, empty collection vs ${OTHER_LOCKS} other locks`);
    const Scale = itemModel(connection, 'ScaleItem', { ttl: 30_000 });
    await ready(Scale);
    const scaleIds = (await Scale.insertMany(Array.from({ length: 20 }, (_, i) => ({ title: `scale ${i}`, n: i })))).map((d) => d._id);
    const scaleLocks = db.collection<Document>(Scale.lockModel().collection.collectionName);
    const acquireLatency = async () => {
      for (let i = 0; i < WARMUP; i++) await (await Scale.lock(scaleIds[i % scaleIds.length], 'scale')).unlock();
      const samples: number[] = [];
      for (let i = 0; i < ACQUIRES; i++) {
        const t = performance.now();
        const held = await Scale.lock(scaleIds[i % scaleIds.length], 'scale');
        samples.push(performance.now() - t);
        await held.unlock();
      }
      return summarize(samples);
    };
    results.acquireScale.empty = await acquireLatency();
    for (let i = 0; i < OTHER_LOCKS; i += 5_000) {
      const batch = Array.from({ length: Math.min(5_000, OTHER_LOCKS - i) }, (_, j) => ({
        _id: new Types.ObjectId(),
        owner: ownerKey(`other-${(i + j) % 997}`),
        token: `other${i + j}`,
        fence: i + j,
        acquiredAt: new Date(nowMs),
        expiresAt: new Date(nowMs + ((i + j) % 2 ? 3_600_000 : -1)),
      }));
      await scaleLocks.insertMany(batch);
    }
    results.acquireScale.full = await acquireLatency();
    results.acquireScale.ratioP50 = round(results.acquireScale.full.p50 / results.acquireScale.empty.p50);
    results.acquireScale.plan = await explainAcquire(db, connection, Scale, scaleIds[0]);
  }
}

/** The query plan of the acquire's findAndModify, explained exactly as the plugin sends it. */
async function explainAcquire(db: Db, connection: Connection, model: ItemModel, id: Types.ObjectId): Promise<string> {
  const sent = await recordCommands(connection, async () => {
    await (await model.lock(id, 'scale')).unlock();
  });
  const acquire = sent.find((command) => 'findAndModify' in command);
  if (!acquire) return 'no findAndModify was sent';
  try {
    const explained = await db.command({ explain: stripEnvelope(acquire), verbosity: 'queryPlanner' });
    const winning = (explained.queryPlanner as Document | undefined)?.winningPlan as Document | undefined;
    const stages: string[] = [];
    const walk = (stage: Document | undefined) => {
      if (!stage) return;
      stages.push(`${stage.stage}${stage.indexName ? `(${stage.indexName})` : ''}`);
      walk((stage.inputStage ?? stage.queryPlan) as Document | undefined);
    };
    walk(winning);
    return stages.length ? stages.join(' <- ') : JSON.stringify(winning ?? explained).slice(0, 300);
  } catch (error) {
    return `explain not available on this backend: ${(error as Error).message}`;
  }
}

/** Table 1b: the ratios with their spread over rounds (median [min-max]). */
function reportReplayed(rows: ReplayComparison[]): void {
  const pad = (s: string, w: number) => s.padEnd(w);
  const spread = (s: { median: number; min: number; max: number } | undefined) => (s ? `${s.median.toFixed(2)}x [${s.min.toFixed(2)}-${s.max.toFixed(2)}]` : '-');
  const first = rows[0];
  if (!first) return;
  console.log(`1b. The plugin against the raw driver sending the identical commands (interleaved ${first.schedule === 'rotate' ? 'rotating every cycle' : 'in blocks of cycles'}, ${first.rounds.length} rounds of ${first.cycles}; median [min-max] over rounds; target <= 1.10x)`);
  console.log(`${pad('', 66)}${pad('p50', 20)}${pad('mean', 20)}${pad('CPU', 20)}${pad('Mongoose side p50', 20)}${pad('Mongoose side CPU', 20)}${pad('floor p50', 20)}${pad('floor CPU', 20)}p50 ms plugin / raw / floor`);
  for (const row of rows) {
    const mid = [...row.rounds].sort((a, b) => a.ratio.p50 - b.ratio.p50)[row.rounds.length >> 1]!;
    console.log(
      `${pad(row.operation, 66)}${pad(spread(row.ratioP50), 20)}${pad(spread(row.ratioMean), 20)}${pad(spread(row.ratioCpu), 20)}${pad(spread(row.mongooseRatioP50), 20)}${pad(spread(row.mongooseRatioCpu), 20)}${pad(spread(row.floorRatioP50), 20)}${pad(spread(row.floorRatioCpu), 20)}${mid.plugin.p50} / ${mid.raw.p50} / ${mid.floor?.p50 ?? '-'}`,
    );
    // The warm-up's first rounds, in order: what a colder process sees (bench/replay.ts, Settle).
    const cold = (row.warmupRounds ?? []).slice(0, 3).map((r) => r.ratio.p50.toFixed(2));
    console.log(`${pad('', 4)}A/A (control / raw) ${spread(row.aaRatioP50)}; warm-up ${row.warmupRounds?.length ?? 0} rounds${row.settled === false ? ' (NOT settled)' : ''}, p50 ratio in its first rounds ${cold.join(', ') || '-'}`);
  }
  console.log(`(raw: ${first.rawSide ?? 'db.command'}; Mongoose side: the same commands with Mongoose doing its part of the operation and the driver API the rest, against the raw side; floor: the plugin against db.command on one long-lived session with txnNumbers set by hand, which no application reaches)\n`);
}

function report(results: BenchResults): void {
  const pad = (s: string, w: number) => s.padEnd(w);
  const num = (x: number | null | undefined) => (x === null || x === undefined || Number.isNaN(x) ? '-' : String(x));
  console.log(`\nBenchmarks on ${results.backend}\n${results.machine}\n`);
  if (results.replayed) reportReplayed(results.replayed);
  if (ONLY !== undefined && ONLY !== 'core') {
    if (results.guard) reportGuard(results.guard);
    if (results.scale) reportScale(results.scale);
    if (results.lockNext) reportLockNext(results.lockNext);
    if (results.lockMany) reportLockMany(results.lockMany);
    if (results.diagnostics) reportDiagnostics(results.diagnostics);
    const dir = join(__dirname, 'results');
    mkdirSync(dir, { recursive: true });
    writeFileSync(join(dir, `latest-${ONLY}.json`), `${JSON.stringify(results, null, 2)}\n`);
    console.log(`\nwrote ${join('bench', 'results', `latest-${ONLY}.json`)}`);
    return;
  }
  console.log('1. Uncontended lock + unlock cycle (sequential, one client)');
  console.log(`${pad('', 48)}${pad('cmds', 6)}${pad('p50 ms', 9)}${pad('p99 ms', 9)}${pad('cycles/s', 10)}p50 vs raw`);
  for (const row of results.cycle) {
    console.log(`${pad(row.name, 48)}${pad(num(row.commandsPerCycle), 6)}${pad(num(row.p50), 9)}${pad(num(row.p99), 9)}${pad(num(row.opsPerSec), 10)}${pad(`${num(row.ratioToRaw)}x`, 8)}${row.note ?? ''}`);
  }
  for (const [name, message] of Object.entries(results.cycleErrors)) console.log(`${pad(name, 48)}did not run: ${message}`);
  console.log('\n2. Commands per operation');
  for (const c of results.commands) console.log(`${pad(c.operation, 48)}${pad(String(c.count), 4)}${c.names.join(', ')}`);
  console.log(`\n3. Contended handoff (${results.handoff[0]?.waiters} waiters on one document; gap = previous unlock resolved -> next lock resolved, includes loading the document)`);
  for (const h of results.handoff) console.log(`${pad(h.mode, 48)}${h.handoffs} handoffs, ${h.handoffsPerSec}/s, gap p50 ${h.p50} ms, p99 ${h.p99} ms`);
  const r = results.releaseAll;
  console.log(`\n4. releaseAllFor: ${r.released} of ${r.locks} locks released in ${r.ms} ms (${r.locksPerSec} locks/s, one command)`);
  const a = results.acquireScale;
  console.log(`\n5. Acquire (Model.lock) latency: empty collection p50 ${a.empty.p50} / p99 ${a.empty.p99} ms; with ${a.otherLocks} other locks p50 ${a.full.p50} / p99 ${a.full.p99} ms (p50 ratio ${a.ratioP50}x)`);
  console.log(`   plan: ${a.plan}`);
  if (results.guard) reportGuard(results.guard);
  if (results.scale) reportScale(results.scale);
  if (results.lockNext) reportLockNext(results.lockNext);
  if (results.lockMany) reportLockMany(results.lockMany);
  if (results.diagnostics) reportDiagnostics(results.diagnostics);

  const dir = join(__dirname, 'results');
  mkdirSync(dir, { recursive: true });
  writeFileSync(join(dir, 'latest.json'), `${JSON.stringify(results, null, 2)}\n`);
  // The README quotes benchmark 7 from its own file, which BENCH_ONLY=many also writes.
  if (results.lockMany) writeFileSync(join(dir, 'latest-many.json'), `${JSON.stringify({ ...results, cycle: [], commands: [], handoff: [], guard: undefined }, null, 2)}\n`);
  writeFileSync(join(dir, 'latest.svg'), renderSvg(results));
  console.log(`\nwrote ${join('bench', 'results', 'latest.json')} and ${join('bench', 'results', 'latest.svg')}`);
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
