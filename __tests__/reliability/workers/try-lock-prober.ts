/**
 * Child process for reliability/group-renewal-answered-late.test.ts: a caller in its own process
 * that takes any of `ids` the moment it is free (`tryLock`, 20 ms sections, release), until
 * `durationMs` passes; so a lock that lapses while another process stands still is taken at once.
 * Prints one line of JSON: how many times it got each document.
 *
 * Configuration arrives as JSON in the environment variable MPL_TRY_LOCK_PROBER (TryLockProberConfig).
 */
import mongoose, { Types } from 'mongoose';
import { recordLockCommands } from '../../support/command-recorder';
import { workItemSchema, type WorkItem, type WorkItemModel } from '../../support/work-item';

export interface TryLockProberConfig {
  uri: string;
  dbName: string;
  modelName: string;
  ids: string[];
  durationMs: number;
  owner: string;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function main(): Promise<void> {
  const config = JSON.parse(process.env.MPL_TRY_LOCK_PROBER ?? '') as TryLockProberConfig;
  const connection = mongoose.createConnection(config.uri, { dbName: config.dbName, monitorCommands: true });
  await connection.asPromise();
  recordLockCommands(connection);
  const model = connection.model<WorkItem, WorkItemModel>(config.modelName, workItemSchema({ ttl: 60_000, ownerStorage: 'plain' }));
  await model.init();
  await model.lockModel().init();
  const ids = config.ids.map((id) => new Types.ObjectId(id));
  const got: Record<string, number> = Object.fromEntries(config.ids.map((id) => [id, 0]));
  process.stdout.write('started\n');
  const end = Date.now() + config.durationMs;
  while (Date.now() < end) {
    for (const id of ids) {
      const doc = await model.tryLock(id, config.owner);
      if (!doc) continue;
      got[id.toHexString()]!++;
      await sleep(20);
      await doc.unlock();
    }
    await sleep(5);
  }
  process.stdout.write(`${JSON.stringify(got)}\n`);
  await connection.close();
}

main().catch((error: unknown) => {
  process.stderr.write(String(error));
  process.exit(1);
});
