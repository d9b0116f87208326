/**
 * Child process for the cross-process mutual exclusion test. Runs `workers` concurrent loops;
 * each loop takes locks on randomly chosen documents with `Model.lock` and, while holding one,
 * performs a deliberately non-atomic read-modify-write of a counter and marks itself in an
 * overlap detector (collection `me_sections`, which no lock code touches).
 *
 * Configuration arrives as JSON in the environment variable MPL_CONTENDER (see ContenderConfig).
 * Prints exactly one line of JSON (ContenderReport) on stdout and exits 0, or prints the error
 * on stderr and exits 1.
 */
import mongoose, { Types } from 'mongoose';
import { LockedError } from '../../../src';
import { recordLockCommands } from '../../support/command-recorder';
import { workItemSchema, type WorkItemModel, type WorkItem } from '../../support/work-item';

export interface ContenderConfig {
  uri: string;
  dbName: string;
  /** Index of this process, used in owner names. */
  process: number;
  workers: number;
  sectionsPerWorker: number;
  /** Hex strings of the contended documents' _ids. */
  ids: string[];
  ttl: number;
  /** First and largest bound of the random pause after a LockedError (doubling per miss), in ms. */
  backoffMs: number;
  backoffCapMs: number;
  /** Upper bound of the random pause after each critical section, in ms (pacing). */
  thinkMs: number;
  /**
   * Wall-clock time (epoch ms) after which workers start no new critical section once this
   * process has run `minSections`: the test is sized by a time budget, so a loaded machine runs
   * fewer sections instead of timing out.
   */
  deadline: number;
  /** Sections this process runs even past `deadline` (but not past `hardDeadline`). */
  minSections: number;
  /** Wall-clock time (epoch ms) after which no new section starts at all. */
  hardDeadline: number;
}

export interface ContenderReport {
  process: number;
  sections: number;
  lockedErrors: number;
  /** Sections whose detector entry saw another section already inside. */
  overlapsSeen: number;
  elapsedMs: number;
  /** CPU time this process used (user + system), in ms. */
  cpuMs: number;
}

interface SectionRecord {
  _id: number;
  value: number;
  inside: number;
  maxInside: number;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

async function main(): Promise<void> {
  const config = JSON.parse(process.env.MPL_CONTENDER ?? '') as ContenderConfig;
  const connection = mongoose.createConnection(config.uri, { dbName: config.dbName, maxPoolSize: 10, monitorCommands: true });
  await connection.asPromise();
  recordLockCommands(connection);
  const WorkItem = connection.model<WorkItem, WorkItemModel>('ReliabilityItem', workItemSchema({ ttl: config.ttl }));
  await WorkItem.init();
  await WorkItem.lockModel().init();
  const sections = connection.getClient().db(config.dbName).collection<SectionRecord>('me_sections');
  const ids = config.ids.map((hex) => new Types.ObjectId(hex));

  const report: ContenderReport = { process: config.process, sections: 0, lockedErrors: 0, overlapsSeen: 0, elapsedMs: 0, cpuMs: 0 };
  const started = performance.now();

  const worker = async (w: number): Promise<void> => {
    const owner = `proc${config.process}-worker${w}`;
    let backoff = config.backoffMs;
    const more = () => {
      const now = Date.now();
      return now < config.hardDeadline && (now < config.deadline || report.sections < config.minSections);
    };
    for (let done = 0; done < config.sectionsPerWorker && more(); ) {
      const d = Math.floor(Math.random() * ids.length);
      let doc;
      try {
        doc = await WorkItem.lock(ids[d], owner);
      } catch (error) {
        if (!(error instanceof LockedError)) throw error;
        report.lockedErrors++;
        // Jittered exponential backoff: pacing only, so the server is not flooded with misses.
        await sleep(Math.random() * backoff);
        backoff = Math.min(config.backoffCapMs, backoff * 2);
        continue;
      }
      backoff = config.backoffMs;
      // Critical section. Entering: count ourselves in and read the counter (one command).
      const entered = await sections.findOneAndUpdate(
        { _id: d },
        [{ $set: { inside: { $add: ['$inside', 1] } } }, { $set: { maxInside: { $max: ['$maxInside', '$inside'] } } }],
        { returnDocument: 'after' },
      );
      if (!entered) throw new Error(`me_sections record ${d} is missing`);
      if (entered.inside !== 1) report.overlapsSeen++;
      // Give a second holder, if the lock let one in, time to interleave.
      await new Promise<void>((resolve) => setImmediate(resolve));
      // Leaving: write back the value read on entry plus one (a lost update if anyone overlapped).
      await sections.updateOne({ _id: d }, { $set: { value: entered.value + 1 }, $inc: { inside: -1 } });
      await doc.unlock();
      report.sections++;
      done++;
      if (config.thinkMs > 0) await sleep(Math.random() * config.thinkMs);
    }
  };

  await Promise.all(Array.from({ length: config.workers }, (_, w) => worker(w)));
  report.elapsedMs = Math.round(performance.now() - started);
  const cpu = process.cpuUsage();
  report.cpuMs = Math.round((cpu.user + cpu.system) / 1000);
  await connection.close();
  process.stdout.write(`${JSON.stringify(report)}\n`);
}

main().then(
  () => process.exit(0),
  (error: unknown) => {
    process.stderr.write(`contender failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
    process.exit(1);
  },
);
