/**
 * Child process for reliability/killed-group-waiter-blocks-nobody.test.ts: one `lockMany(ids, owner, { wait })`
 * from its own process, killed by the test while it waits. Prints `started` once its model is
 * ready and the call is made, then the outcome (it is not expected to get that far).
 *
 * Configuration arrives as JSON in the environment variable MPL_KILLED_GROUP_WAITER (KilledGroupWaiterConfig).
 */
import mongoose, { Types } from 'mongoose';
import { recordLockCommands } from '../../support/command-recorder';
import { workItemSchema, type WorkItem, type WorkItemModel } from '../../support/work-item';

export interface KilledGroupWaiterConfig {
  uri: string;
  dbName: string;
  modelName: string;
  ids: string[];
  ttl: number;
  wait: number;
  owner: string;
}

async function main(): Promise<void> {
  const config = JSON.parse(process.env.MPL_KILLED_GROUP_WAITER ?? '') as KilledGroupWaiterConfig;
  const connection = mongoose.createConnection(config.uri, { dbName: config.dbName, monitorCommands: true });
  await connection.asPromise();
  recordLockCommands(connection);
  const model = connection.model<WorkItem, WorkItemModel>(config.modelName, workItemSchema({ ttl: config.ttl, ownerStorage: 'plain' }));
  await model.init();
  await model.lockModel().init();
  const call = model.lockMany(config.ids.map((id) => new Types.ObjectId(id)), config.owner, { wait: config.wait });
  process.stdout.write('started\n');
  const docs = await call;
  process.stdout.write(`${JSON.stringify({ served: docs.length })}\n`);
  setInterval(() => undefined, 60_000);
}

main().catch((error: unknown) => {
  process.stdout.write(`${JSON.stringify({ error: String(error) })}\n`);
  setInterval(() => undefined, 60_000);
});
