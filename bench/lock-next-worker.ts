/**
 * Child process of the lockNext benchmark (bench/lock-next.ts): `workers` concurrent job-worker
 * loops claiming queued jobs with one of three methods, finishing each job, until this process has
 * finished `quota` jobs. Commands are counted per phase with command monitoring: the driver emits
 * `commandStarted` in the async context of the operation, so an AsyncLocalStorage tells the
 * claim's commands from the completion's. Prints one JSON line (WorkerReport).
 *
 * Methods:
 *  - `lockNext`: `Job.lockNext({ status: 'queued' }, owner, { sort })`, then `status = 'done'` and
 *    `saveAndUnlock()`;
 *  - `findTryLock`: the hand-written loop: `findOne({ status: 'queued', _id: { $nin: tried } })`
 *    sorted, `tryLock` it, check it still matches (unlock and try the next one otherwise); the same
 *    completion;
 *  - `inDocument`: the status-field claim of agenda / mongodb-queue on a model without the plugin:
 *    `findOneAndUpdate({ status: 'queued' }, { $set: { status: 'running', lockedBy, lockedAt } },
 *    { sort, new: true })`, then `updateOne({ _id, lockedBy }, { $set: { status: 'done' } })`.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import mongoose, { Schema, type Types } from 'mongoose';
import { lockPlugin, type LockableModel, type LockMethods } from '../src';
import { nextStats } from '../src/lock-next';

export type Method = 'lockNext' | 'findTryLock' | 'inDocument';

export interface WorkerConfig {
  uri: string;
  dbName: string;
  collection: string;
  method: Method;
  process: number;
  workers: number;
  quota: number;
  /** Epoch ms at which every process starts claiming (so they overlap). */
  startAt: number;
}

export interface WorkerReport {
  process: number;
  finished: number;
  /** Null answers (no free job found) before the quota: false "queue empty" (must be 0). */
  nulls: number;
  /** Commands sent while claiming, and while finishing. */
  claimCommands: number;
  finishCommands: number;
  /** Claim attempts that did not yield a job (collisions, stale candidates, lost races). */
  wasted: number;
  /** lockNext only: its counters (candidate reads, acquisitions, collisions, stale candidates). */
  stats?: typeof nextStats;
  perWorker: number[];
  claimedIds: string[];
  elapsedMs: number;
  cpuMs: number;
}

interface Job {
  status: string;
  priority: number;
  createdAt: Date;
  payload: string;
  lockedBy?: string;
  lockedAt?: Date;
}

const SORT = { priority: -1, createdAt: 1 } as const;

async function main(): Promise<void> {
  const config = JSON.parse(process.env.MPL_BENCH_NEXT ?? '') as WorkerConfig;
  const connection = mongoose.createConnection(config.uri, { dbName: config.dbName, maxPoolSize: Math.max(10, config.workers * 2), monitorCommands: true });
  await connection.asPromise();
  const phase = new AsyncLocalStorage<'claim' | 'finish'>();
  const report: WorkerReport = { process: config.process, finished: 0, nulls: 0, claimCommands: 0, finishCommands: 0, wasted: 0, perWorker: Array(config.workers).fill(0), claimedIds: [], elapsedMs: 0, cpuMs: 0 };
  connection.getClient().on('commandStarted', (event) => {
    const current = phase.getStore();
    if (current === 'claim') report.claimCommands++;
    else if (current === 'finish') report.finishCommands++;
    void event;
  });

  const schema = new Schema<Job>({ status: String, priority: Number, createdAt: Date, payload: String, lockedBy: String, lockedAt: Date }, { collection: config.collection });
  schema.index({ status: 1, priority: -1, createdAt: 1 });
  let claimOne: (owner: string) => Promise<{ id: Types.ObjectId; finish(): Promise<void> } | null>;
  if (config.method === 'inDocument') {
    const Plain = connection.model<Job>('BenchNextPlain', schema);
    claimOne = async (owner) => {
      const job = await Plain.findOneAndUpdate({ status: 'queued' }, { $set: { status: 'running', lockedBy: owner, lockedAt: new Date() } }, { sort: SORT, new: true }).lean();
      if (!job) return null;
      return { id: job._id, finish: async () => void (await Plain.updateOne({ _id: job._id, lockedBy: owner }, { $set: { status: 'done' } })) };
    };
  } else {
    schema.plugin(lockPlugin, { ttl: 60_000 });
    const Locked = connection.model<Job, LockableModel<Job>>('BenchNextLocked', schema as unknown as Schema<Job, LockableModel<Job>, LockMethods>);
    await Locked.init();
    await Locked.lockModel().init();
    const done = (doc: NonNullable<Awaited<ReturnType<typeof Locked.lockNext>>>) => async () => {
      doc.status = 'done';
      await doc.saveAndUnlock();
    };
    if (config.method === 'lockNext') {
      claimOne = async (owner) => {
        const doc = await Locked.lockNext({ status: 'queued' }, owner, { sort: SORT });
        return doc && { id: doc._id, finish: done(doc) };
      };
    } else {
      claimOne = async (owner) => {
        const tried: Types.ObjectId[] = [];
        for (;;) {
          const candidate = await Locked.findOne({ status: 'queued', _id: { $nin: tried } }, { _id: 1 }).sort(SORT).lean();
          if (!candidate) return null;
          const doc = await Locked.tryLock(candidate._id, owner);
          if (doc && doc.status === 'queued') return { id: doc._id, finish: done(doc) };
          if (doc) await doc.unlock();
          tried.push(candidate._id);
          report.wasted++;
        }
      };
    }
  }

  await new Promise((resolve) => setTimeout(resolve, Math.max(0, config.startAt - Date.now())));
  const started = performance.now();
  const cpuBefore = process.cpuUsage();
  let reserved = 0;
  const worker = async (w: number): Promise<void> => {
    const owner = `p${config.process}w${w}`;
    while (reserved < config.quota) {
      const claimed = await phase.run('claim', () => claimOne(owner));
      if (!claimed) {
        report.nulls++;
        continue;
      }
      report.claimedIds.push(claimed.id.toHexString());
      reserved++;
      await phase.run('finish', () => claimed.finish());
      report.finished++;
      report.perWorker[w]++;
    }
  };
  await Promise.all(Array.from({ length: config.workers }, (_, w) => worker(w)));
  report.elapsedMs = performance.now() - started;
  const cpu = process.cpuUsage(cpuBefore);
  report.cpuMs = (cpu.user + cpu.system) / 1000;
  if (config.method === 'lockNext') {
    report.wasted += nextStats.collisions + nextStats.notMatching + nextStats.late;
    report.stats = nextStats;
  }
  await connection.close();
  process.stdout.write(`${JSON.stringify(report)}\n`);
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`lock-next bench worker failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
