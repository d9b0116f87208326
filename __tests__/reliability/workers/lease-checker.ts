/**
 * Child process for lease-under-stalls.test.ts: `workers` loops that take locks with short ttls
 * while the server stalls some of their commands (the parent arms `failCommand` with an activation
 * probability for this appName), and check every lock they are handed against the server, with the
 * raw driver, independently of the plugin:
 *
 *   docs = await Job.lockNext(...)  or  await Job.lockMany([...])
 *   record = raw find of the lock record(s) { token, expiresAt, now: $$NOW }
 *   left = doc.heldLock().msLeft()            (read AFTER the record's reply arrived)
 *   if left > 0, the server must still show this acquisition: same token, expiresAt > now.
 *
 * A "believed" violation is a lock the process counts on (msLeft() > 0) that the server no longer
 * grants (PRODUCT.md property 13). An overlap detector (collection `lease_inside`, no lock code
 * touches it) counts two holders inside one document at once, entered only while msLeft() > 0 and
 * left before the lock is given back; a holder whose lease ran out inside counts as `lateExits`
 * (then an overlap is its own fault, and is reported apart).
 *
 * Configuration: JSON in MPL_LEASE_CHECKER; one JSON line (LeaseCheckerReport) on stdout.
 */
import mongoose, { Types } from 'mongoose';
import { LockError } from '../../../src';
import { recordLockCommands } from '../../support/command-recorder';
import { jobSchema, type Job, type JobModel } from '../../support/job';

export interface LeaseCheckerConfig {
  uri: string;
  dbName: string;
  appName: string;
  modelName: string;
  process: number;
  workers: number;
  ttl: number;
  mode: 'next' | 'many';
  /** Hex ids of the documents lockMany picks its groups from. */
  ids: string[];
  /** Workers take no new lock after this (epoch ms)... */
  deadline: number;
  /** ...unless this process has been granted fewer locks than this, until hardDeadline. */
  minGranted: number;
  hardDeadline: number;
}

export interface LeaseCheckerReport {
  process: number;
  granted: number;
  /** Locks counted on (msLeft() > 0) that the server no longer granted to this acquisition. */
  believed: number;
  believedExamples: string[];
  overlaps: number;
  lateExits: number;
  nulls: number;
  errors: Record<string, number>;
}

interface InsideRecord {
  _id: Types.ObjectId;
  inside: number;
  maxInside: number;
}

async function main(): Promise<void> {
  const config = JSON.parse(process.env.MPL_LEASE_CHECKER ?? '') as LeaseCheckerConfig;
  const connection = mongoose.createConnection(config.uri, { dbName: config.dbName, appName: config.appName, maxPoolSize: 2 * config.workers + 4, monitorCommands: true });
  await connection.asPromise();
  recordLockCommands(connection);
  const Job = connection.model<Job, JobModel>(config.modelName, jobSchema({ ttl: config.ttl }));
  await Job.init();
  await Job.lockModel().init();
  // The checks and the detector go through a connection the fail point does not stall.
  const detector = mongoose.createConnection(config.uri, { dbName: config.dbName, appName: `${config.appName}-detector`, maxPoolSize: 2 * config.workers + 4 });
  await detector.asPromise();
  const raw = detector.getClient().db(config.dbName);
  const locks = raw.collection(Job.lockModel().collection.collectionName);
  const inside = raw.collection<InsideRecord>('lease_inside');
  const ids = config.ids.map((hex) => new Types.ObjectId(hex));
  const report: LeaseCheckerReport = { process: config.process, granted: 0, believed: 0, believedExamples: [], overlaps: 0, lateExits: 0, nulls: 0, errors: {} };

  const check = async (docs: { _id: Types.ObjectId; heldLock(): { token: string; msLeft(): number } | null }[]) => {
    const records = await locks.find({ _id: { $in: docs.map((d) => d._id) } }, { projection: { token: 1, expiresAt: 1, now: '$$NOW' } }).toArray();
    for (const doc of docs) {
      const held = doc.heldLock();
      const left = held?.msLeft() ?? 0;
      if (!held || left <= 0) continue;
      const record = records.find((r) => (r._id as Types.ObjectId).equals(doc._id));
      const ok = record && record.token === held.token && (record.expiresAt as Date) > (record.now as Date);
      if (!ok) {
        report.believed++;
        if (report.believedExamples.length < 5) {
          report.believedExamples.push(`msLeft ${Math.round(left)} ms but the server has ${record ? `token ${record.token === held.token ? 'same' : 'other'}, ${(record.expiresAt as Date).getTime() - (record.now as Date).getTime()} ms left` : 'no record'}`);
        }
      }
    }
  };

  const worker = async (w: number): Promise<void> => {
    const owner = `lease-p${config.process}-w${w}`;
    // A loaded machine grants fewer locks in the budget: go on past it until this process has
    // checked enough of them (bounded by the hard deadline) rather than prove less.
    while (Date.now() < config.deadline || (report.granted < config.minGranted && Date.now() < config.hardDeadline)) {
      let docs: (mongoose.HydratedDocument<Job> & { heldLock(): { token: string; msLeft(): number } | null; unlock(): Promise<void> })[];
      try {
        if (config.mode === 'next') {
          const doc = await Job.lockNext({ status: 'queued' }, owner, { sort: { priority: -1, createdAt: 1 } });
          if (!doc) {
            report.nulls++;
            continue;
          }
          docs = [doc as never];
        } else {
          const group = [...ids].sort(() => Math.random() - 0.5).slice(0, 2 + Math.floor(Math.random() * 2));
          docs = (await Job.lockMany(group, owner)) as never;
        }
      } catch (error) {
        const name = error instanceof LockError ? error.name : `other ${(error as Error).name}`;
        report.errors[name] = (report.errors[name] ?? 0) + 1;
        continue;
      }
      report.granted++;
      await check(docs);
      // Critical section, entered only while every lease lasts.
      if (docs.every((d) => (d.heldLock()?.msLeft() ?? 0) > 0)) {
        const entered = await Promise.all(
          docs.map((d) => inside.findOneAndUpdate({ _id: d._id }, [{ $set: { inside: { $add: [{ $ifNull: ['$inside', 0] }, 1] } } }, { $set: { maxInside: { $max: [{ $ifNull: ['$maxInside', 0] }, '$inside'] } } }], { upsert: true, returnDocument: 'after' })),
        );
        await new Promise((resolve) => setTimeout(resolve, Math.random() * 30));
        const lateExit = docs.some((d) => (d.heldLock()?.msLeft() ?? 0) <= 0);
        if (lateExit) report.lateExits++;
        else if (entered.some((r) => r!.inside !== 1)) report.overlaps++;
        await Promise.all(docs.map((d) => inside.updateOne({ _id: d._id }, { $inc: { inside: -1 } })));
      }
      await Promise.all(docs.map((d) => d.unlock().catch(() => undefined)));
    }
  };

  await Promise.all(Array.from({ length: config.workers }, (_, w) => worker(w)));
  await connection.close();
  await detector.close();
  process.stdout.write(`${JSON.stringify(report)}\n`);
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`lease checker failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
