/**
 * Child process for the lockNext race test: `workers` concurrent job-worker loops claiming queued
 * jobs with `Model.lockNext`, each recording its claim in an independent detector (collection
 * `ln_claims`, which no lock code touches) before working and saving, exactly as a job worker would:
 *
 *   claim = await Job.lockNext({ status: 'queued' }, owner, { sort })
 *   detector: inside += 1 (its maximum kept), claims += 1, claimants += [owner]
 *   work (a tick), then either give the job back (unlock: it stays queued, to be claimed again) or
 *   finish it (status 'done', saveAndUnlock)
 *   detector: inside -= 1 (before the lock is given back)
 *
 * The process stops after `quota` finished jobs (or at the time budget, see `deadline`), so (with
 * every process's quota) at least
 * `reserve` jobs stay queued the whole time: free documents always exist, and any null answer is a
 * false "queue empty". Configuration comes as JSON in MPL_NEXT_CLAIMER; one JSON line
 * (NextClaimerReport) is printed on stdout, or the error on stderr with exit code 1.
 */
import mongoose, { type Types } from 'mongoose';
import { nextStats } from '../../../src/lock-next';
import { recordLockCommands } from '../../support/command-recorder';
import { jobSchema, type Job, type JobModel } from '../../support/job';

export interface NextClaimerConfig {
  uri: string;
  dbName: string;
  modelName: string;
  process: number;
  workers: number;
  /** Jobs this process finishes before it stops. */
  quota: number;
  /** Probability that a claimed job is given back unfinished (claimed again later). */
  giveBack: number;
  ttl: number;
  /** Workers of one process share one owner (true) or each have their own. */
  sharedOwner: boolean;
  /**
   * Epoch ms after which no new claim starts once this process has finished `minFinished` jobs
   * (the test is sized by a time budget; a process that started late still does its share).
   */
  deadline: number;
  minFinished: number;
  /** Epoch ms after which no new claim starts at all. */
  hardDeadline: number;
}

export interface NextClaimerReport {
  process: number;
  finished: number;
  givenBack: number;
  /** Null answers while free documents existed (must be 0). */
  nulls: number;
  /** Claims whose detector entry saw another claimant inside (must be 0). */
  overlapsSeen: number;
  /** Jobs finished by each worker (no worker starved). */
  perWorker: number[];
  stats: typeof nextStats;
  elapsedMs: number;
}

interface ClaimRecord {
  _id: Types.ObjectId;
  inside: number;
  maxInside: number;
  claims: number;
}

async function main(): Promise<void> {
  const config = JSON.parse(process.env.MPL_NEXT_CLAIMER ?? '') as NextClaimerConfig;
  const connection = mongoose.createConnection(config.uri, { dbName: config.dbName, maxPoolSize: Math.max(10, config.workers * 2), monitorCommands: true });
  await connection.asPromise();
  recordLockCommands(connection);
  const Job = connection.model<Job, JobModel>(config.modelName, jobSchema({ ttl: config.ttl }));
  await Job.init();
  await Job.lockModel().init();
  const detector = connection.getClient().db(config.dbName).collection<ClaimRecord>('ln_claims');

  const report: NextClaimerReport = { process: config.process, finished: 0, givenBack: 0, nulls: 0, overlapsSeen: 0, perWorker: Array(config.workers).fill(0), stats: nextStats, elapsedMs: 0 };
  const started = performance.now();
  let reserved = 0;

  const worker = async (w: number): Promise<void> => {
    const owner = config.sharedOwner ? `proc${config.process}` : `proc${config.process}-worker${w}`;
    const more = () => {
      const now = Date.now();
      return reserved < config.quota && now < config.hardDeadline && (now < config.deadline || reserved < config.minFinished);
    };
    while (more()) {
      const job = await Job.lockNext({ status: 'queued' }, owner, { sort: { priority: -1, createdAt: 1 } });
      if (!job) {
        report.nulls++;
        continue;
      }
      const entered = await detector.findOneAndUpdate(
        { _id: job._id },
        [
          { $set: { inside: { $add: [{ $ifNull: ['$inside', 0] }, 1] }, claims: { $add: [{ $ifNull: ['$claims', 0] }, 1] } } },
          { $set: { maxInside: { $max: [{ $ifNull: ['$maxInside', 0] }, '$inside'] } } },
        ],
        { upsert: true, returnDocument: 'after' },
      );
      if (entered!.inside !== 1) report.overlapsSeen++;
      // Give a second claimant, if the lock let one in, time to interleave.
      await new Promise<void>((resolve) => setImmediate(resolve));
      // Decided (and counted) synchronously, so the workers together never finish more than the quota.
      const finish = reserved < config.quota && Math.random() >= config.giveBack;
      if (finish) reserved++;
      await detector.updateOne({ _id: job._id }, { $inc: { inside: -1 } });
      if (finish) {
        job.status = 'done';
        job.attempts += 1;
        await job.saveAndUnlock();
        report.finished++;
        report.perWorker[w]++;
      } else {
        await job.unlock();
        report.givenBack++;
      }
    }
  };

  await Promise.all(Array.from({ length: config.workers }, (_, w) => worker(w)));
  report.elapsedMs = Math.round(performance.now() - started);
  await connection.close();
  process.stdout.write(`${JSON.stringify(report)}\n`);
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`next-claimer failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
