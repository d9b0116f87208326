/**
 * Child process for the Model.lockMany race test (lock-many-races.test.ts). Runs `workers`
 * concurrent loops; each loop locks a group of documents with `Model.lockMany` (overlapping
 * groups, listed in opposite orders by different workers), and while holding them marks itself
 * inside each document in an overlap detector that no lock code touches (collection
 * `group_sections`), then releases the group with `Model.unlockMany`.
 *
 * An independent all-or-nothing check, made with the raw driver on the lock collection (the owner
 * key computed here, as the plugin's default `ownerStorage: 'hash'` stores it): right after
 * `lockMany` returns, this owner holds every document of the group; right after it throws, none.
 *
 * Configuration arrives as JSON in MPL_GROUP_CONTENDER (GroupContenderConfig). Prints one line of
 * JSON (GroupContenderReport) and exits 0, or prints the error on stderr and exits 1.
 */
import { createHash } from 'node:crypto';
import mongoose, { Types } from 'mongoose';
import { LockedError } from '../../../src';
import { recordLockCommands } from '../../support/command-recorder';
import { workItemSchema, type WorkItem, type WorkItemModel } from '../../support/work-item';

export interface GroupContenderConfig {
  uri: string;
  dbName: string;
  process: number;
  workers: number;
  sectionsPerWorker: number;
  /** Hex strings of the contended documents' _ids. */
  ids: string[];
  ttl: number;
  /** How long a waiting lockMany waits (ms); workers with an odd index do not wait at all. */
  waitMs: number;
  /** Every worker waits (default: the even-numbered ones; the others try once and back off). */
  allWait: boolean;
  /** Epoch ms after which no new section starts. */
  deadline: number;
}

export interface GroupContenderReport {
  process: number;
  sections: number;
  /** Document visits: the sum of the sizes of the groups of all sections. */
  visits: number;
  /** Refusals of lockMany without wait (LockedError), and of waits that ran out. */
  refusals: number;
  /** Sections whose detector entry saw another section already inside one of its documents. */
  overlapsSeen: number;
  /** Times the owner held only part of its group right after lockMany returned or threw. */
  partialHolds: number;
  /** Longest single lockMany call, in ms. */
  longestCallMs: number;
  /** Durations of the waiting workers' successful lockMany calls, in ms. */
  waitedMs: number[];
  elapsedMs: number;
}

interface SectionRecord {
  _id: number;
  inside: number;
  maxInside: number;
  value: number;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

function shuffled<T>(items: T[]): T[] {
  const out = [...items];
  for (let i = out.length - 1; i > 0; i--) {
    const j = Math.floor(Math.random() * (i + 1));
    [out[i], out[j]] = [out[j], out[i]];
  }
  return out;
}

async function main(): Promise<void> {
  const config = JSON.parse(process.env.MPL_GROUP_CONTENDER ?? '') as GroupContenderConfig;
  const connection = mongoose.createConnection(config.uri, { dbName: config.dbName, maxPoolSize: 20, monitorCommands: true });
  await connection.asPromise();
  recordLockCommands(connection);
  const WorkItem = connection.model<WorkItem, WorkItemModel>('GroupRaceItem', workItemSchema({ ttl: config.ttl }));
  await WorkItem.init();
  await WorkItem.lockModel().init();
  const raw = connection.getClient().db(config.dbName);
  const sections = raw.collection<SectionRecord>('group_sections');
  const locks = raw.collection(WorkItem.lockModel().collection.collectionName);
  const ids = config.ids.map((hex) => new Types.ObjectId(hex));
  const report: GroupContenderReport = { process: config.process, sections: 0, visits: 0, refusals: 0, overlapsSeen: 0, partialHolds: 0, longestCallMs: 0, waitedMs: [], elapsedMs: 0 };
  const started = performance.now();

  /** How many of `group` this owner holds now (unexpired by the server's clock), read without the plugin. */
  const heldBy = (ownerKey: string, group: Types.ObjectId[]) => locks.countDocuments({ _id: { $in: group }, owner: ownerKey, $expr: { $gt: ['$expiresAt', '$$NOW'] } } as never);

  const worker = async (w: number): Promise<void> => {
    const owner = `group-proc${config.process}-worker${w}`;
    const ownerKey = createHash('sha256').update(owner, 'utf8').digest('base64url');
    const waits = config.allWait || w % 2 === 0;
    for (let done = 0; done < config.sectionsPerWorker && Date.now() < config.deadline; ) {
      // Overlapping groups in opposite orders: a fixed block forwards or backwards, or a random subset.
      const pick = Math.random();
      const group = pick < 0.3 ? ids.slice(0, 4) : pick < 0.6 ? ids.slice(0, 4).reverse() : shuffled(ids).slice(0, 2 + Math.floor(Math.random() * 3));
      const indexes = group.map((id) => ids.findIndex((other) => other.equals(id)));
      const t0 = performance.now();
      let docs;
      try {
        docs = await WorkItem.lockMany(group, owner, waits ? { wait: config.waitMs } : undefined);
      } catch (error) {
        report.longestCallMs = Math.max(report.longestCallMs, performance.now() - t0);
        if (!(error instanceof LockedError)) throw error;
        report.refusals++;
        if ((await heldBy(ownerKey, group)) !== 0) report.partialHolds++;
        await sleep(Math.random() * 20);
        continue;
      }
      report.longestCallMs = Math.max(report.longestCallMs, performance.now() - t0);
      if (waits) report.waitedMs.push(Math.round(performance.now() - t0));
      if ((await heldBy(ownerKey, group)) !== group.length) report.partialHolds++;
      // Critical section over every document of the group.
      const entered = await Promise.all(
        indexes.map((d) =>
          sections.findOneAndUpdate({ _id: d }, [{ $set: { inside: { $add: ['$inside', 1] } } }, { $set: { maxInside: { $max: ['$maxInside', '$inside'] } } }], { returnDocument: 'after' }),
        ),
      );
      if (entered.some((record) => !record || record.inside !== 1)) report.overlapsSeen++;
      await new Promise<void>((resolve) => setImmediate(resolve));
      await Promise.all(indexes.map((d, k) => sections.updateOne({ _id: d }, { $set: { value: entered[k]!.value + 1 }, $inc: { inside: -1 } })));
      await WorkItem.unlockMany(docs);
      report.sections++;
      report.visits += group.length;
      done++;
    }
  };

  await Promise.all(Array.from({ length: config.workers }, (_, w) => worker(w)));
  report.elapsedMs = Math.round(performance.now() - started);
  report.longestCallMs = Math.round(report.longestCallMs);
  await connection.close();
  process.stdout.write(`${JSON.stringify(report)}\n`);
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`group contender failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
