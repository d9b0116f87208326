/**
 * Child process for reliability/killed-single-waiter-blocks-nobody.test.ts: one
 * `lock(id, owner, { wait })` from its own process, killed by the test while it waits. Prints
 * `started` once its model is ready and the call is made, then the outcome (it is not expected to
 * get that far).
 *
 * Configuration arrives as JSON in the environment variable MPL_KILLED_SINGLE_WAITER (KilledSingleWaiterConfig).
 */
import mongoose, { Types } from 'mongoose';
import { recordLockCommands } from '../../support/command-recorder';
import { workItemSchema, type WorkItem, type WorkItemModel } from '../../support/work-item';

export interface KilledSingleWaiterConfig {
  uri: string;
  dbName: string;
  modelName: string;
  id: string;
  ttl: number;
  wait: number;
  owner: string;
}

async function main(): Promise<void> {
  const config = JSON.parse(process.env.MPL_KILLED_SINGLE_WAITER ?? '') as KilledSingleWaiterConfig;
  const connection = mongoose.createConnection(config.uri, { dbName: config.dbName, monitorCommands: true });
  await connection.asPromise();
  recordLockCommands(connection);
  const model = connection.model<WorkItem, WorkItemModel>(config.modelName, workItemSchema({ ttl: config.ttl, ownerStorage: 'plain' }));
  await model.init();
  await model.lockModel().init();
  const call = model.lock(new Types.ObjectId(config.id), config.owner, { wait: config.wait });
  process.stdout.write('started\n');
  const doc = await call;
  process.stdout.write(`${JSON.stringify({ served: String(doc._id) })}\n`);
  setInterval(() => undefined, 60_000);
}

main().catch((error: unknown) => {
  process.stdout.write(`${JSON.stringify({ error: String(error) })}\n`);
  setInterval(() => undefined, 60_000);
});
