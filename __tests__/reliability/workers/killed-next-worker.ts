/**
 * Child process for reliability/lock-next-reservation-never-outlives-the-call.test.ts: one waiting
 * `lockNext(filter, owner, { wait })` from its own process, killed (SIGKILL) by the test while it
 * waits (and, by then, reserves the held match: next-reservation.ts). Prints `started` once its
 * model is ready and the call is made.
 *
 * Configuration arrives as JSON in the environment variable MPL_KILLED_NEXT_WORKER.
 */
import mongoose from 'mongoose';
import { workItemSchema, type WorkItem, type WorkItemModel } from '../../support/work-item';

export interface KilledNextWorkerConfig {
  uri: string;
  dbName: string;
  modelName: string;
  title: string;
  ttl: number;
  wait: number;
  owner: string;
}

async function main(): Promise<void> {
  const config = JSON.parse(process.env.MPL_KILLED_NEXT_WORKER ?? '') as KilledNextWorkerConfig;
  const connection = mongoose.createConnection(config.uri, { dbName: config.dbName });
  await connection.asPromise();
  const model = connection.model<WorkItem, WorkItemModel>(config.modelName, workItemSchema({ ttl: config.ttl, ownerStorage: 'plain' }));
  await model.init();
  await model.lockModel().init();
  const call = model.lockNext({ title: config.title, status: 'open' }, config.owner, { wait: config.wait });
  process.stdout.write('started\n');
  const doc = await call;
  process.stdout.write(`${JSON.stringify({ served: doc ? String(doc._id) : null })}\n`);
  setInterval(() => undefined, 60_000);
}

main().catch((error: unknown) => {
  process.stdout.write(`${JSON.stringify({ error: String(error) })}\n`);
  setInterval(() => undefined, 60_000);
});
