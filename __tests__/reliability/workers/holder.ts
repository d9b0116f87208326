/**
 * Child process for the crash test: takes locks on the given documents, prints one line of JSON
 * describing them (HolderReport), then keeps running until it is killed. It never releases.
 *
 * Configuration arrives as JSON in the environment variable MPL_HOLDER (see HolderConfig).
 */
import mongoose, { Types } from 'mongoose';
import { recordLockCommands } from '../../support/command-recorder';
import { workItemSchema, type WorkItemModel, type WorkItem } from '../../support/work-item';

export interface HolderConfig {
  uri: string;
  dbName: string;
  modelName: string;
  ids: string[];
  ttl: number;
  owner: string;
}

export interface HolderReport {
  pid: number;
  locks: { id: string; fence: number; acquiredAt: string; expiresAt: string }[];
}

async function main(): Promise<void> {
  const config = JSON.parse(process.env.MPL_HOLDER ?? '') as HolderConfig;
  const connection = mongoose.createConnection(config.uri, { dbName: config.dbName, monitorCommands: true });
  await connection.asPromise();
  recordLockCommands(connection);
  const WorkItem = connection.model<WorkItem, WorkItemModel>(config.modelName, workItemSchema({ ttl: config.ttl }));
  await WorkItem.init();
  const report: HolderReport = { pid: process.pid, locks: [] };
  for (const hex of config.ids) {
    const doc = await WorkItem.lock(new Types.ObjectId(hex), config.owner);
    const held = doc.heldLock()!;
    report.locks.push({ id: hex, fence: held.fence, acquiredAt: held.acquiredAt.toISOString(), expiresAt: held.expiresAt.toISOString() });
  }
  process.stdout.write(`${JSON.stringify(report)}\n`);
  // Hold on (with the connection open) until SIGKILL arrives.
  setInterval(() => undefined, 60_000);
}

main().catch((error: unknown) => {
  process.stderr.write(`holder failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
