/**
 * Child process for the crashed- and killed-waiter tests (support/waiter.ts startWaiter): a
 * `lockMany(ids, owner, { wait })` (with `single`, a `lock(ids[0], owner, { wait })`) that keeps
 * waiting. Prints `started` once its model is ready and the call is made, then runs until the test
 * kills it (SIGKILL: no `finally`, no release, no clearing of anything).
 *
 * Configuration arrives as JSON in the environment variable MPL_WAITER (WaiterConfig).
 */
import mongoose, { Types } from 'mongoose';
import { recordLockCommands } from '../../support/command-recorder';
import { workItemSchema, type WorkItem, type WorkItemModel } from '../../support/work-item';

export interface WaiterConfig {
  uri: string;
  dbName: string;
  modelName: string;
  ids: string[];
  ttl: number;
  owner: string;
  waitMs: number;
  /** A single-document waiter (`lock` with `wait`) for ids[0] instead of a group. */
  single?: boolean;
  /** The model's owner storage, as the test's own model of the same collection. */
  ownerStorage?: 'plain';
}

async function main(): Promise<void> {
  const config = JSON.parse(process.env.MPL_WAITER ?? '') as WaiterConfig;
  const connection = mongoose.createConnection(config.uri, { dbName: config.dbName, monitorCommands: true });
  await connection.asPromise();
  recordLockCommands(connection);
  const model = connection.model<WorkItem, WorkItemModel>(config.modelName, workItemSchema({ ttl: config.ttl, ...(config.ownerStorage ? { ownerStorage: config.ownerStorage } : {}) }));
  await model.init();
  await model.lockModel().init();
  const ids = config.ids.map((hex) => new Types.ObjectId(hex));
  const waiting = config.single ? model.lock(ids[0]!, config.owner, { wait: config.waitMs }) : model.lockMany(ids, config.owner, { wait: config.waitMs });
  process.stdout.write('started\n');
  await waiting.catch(() => undefined);
  setInterval(() => undefined, 60_000);
}

main().catch((error: unknown) => {
  process.stderr.write(`waiter failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
