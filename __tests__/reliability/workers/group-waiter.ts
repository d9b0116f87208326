/**
 * Child process for the crashed-waiter tests: a `lockMany(ids, owner, { wait })` (with `single`, a
 * `lock(ids[0], owner, { wait })`) that keeps waiting. Prints one line ("waiting") once the call is under way, then runs until it is killed.
 *
 * Configuration arrives as JSON in the environment variable MPL_GROUP_WAITER (GroupWaiterConfig).
 */
import mongoose, { Types } from 'mongoose';
import { recordLockCommands } from '../../support/command-recorder';
import { workItemSchema, type WorkItemModel, type WorkItem } from '../../support/work-item';

export interface GroupWaiterConfig {
  uri: string;
  dbName: string;
  modelName: string;
  ids: string[];
  ttl: number;
  owner: string;
  waitMs: number;
  /** A single-document waiter (`lock` with `wait`) for ids[0] instead of a group. */
  single?: boolean;
}

async function main(): Promise<void> {
  const config = JSON.parse(process.env.MPL_GROUP_WAITER ?? '') as GroupWaiterConfig;
  const connection = mongoose.createConnection(config.uri, { dbName: config.dbName, monitorCommands: true });
  await connection.asPromise();
  recordLockCommands(connection);
  const WorkItem = connection.model<WorkItem, WorkItemModel>(config.modelName, workItemSchema({ ttl: config.ttl }));
  await WorkItem.init();
  await WorkItem.lockModel().init();
  const ids = config.ids.map((hex) => new Types.ObjectId(hex));
  const waiting = config.single ? WorkItem.lock(ids[0]!, config.owner, { wait: config.waitMs }) : WorkItem.lockMany(ids, config.owner, { wait: config.waitMs });
  process.stdout.write('waiting\n');
  await waiting.catch(() => undefined);
  setInterval(() => undefined, 60_000);
}

main().catch((error: unknown) => {
  process.stderr.write(`group waiter failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
