/**
 * Child process: another server of the same application. Takes one lock (the document, owner
 * and ttl in the environment variable MPL_TICKET_ISSUER, JSON), prints its ticket as one line of
 * JSON and exits without releasing it: the lock stays held on the server, and no instance of it
 * lives in the process that resumes it.
 */
import mongoose, { Types } from 'mongoose';
import { workItemSchema, type WorkItem, type WorkItemModel } from '../../support/work-item';

export interface TicketIssuerConfig {
  uri: string;
  dbName: string;
  modelName: string;
  id: string;
  owner: string;
  ttl: number;
}

async function main(): Promise<void> {
  const config = JSON.parse(process.env.MPL_TICKET_ISSUER ?? '') as TicketIssuerConfig;
  const connection = await mongoose.createConnection(config.uri, { dbName: config.dbName }).asPromise();
  const WorkItem = connection.model<WorkItem, WorkItemModel>(config.modelName, workItemSchema({ ttl: config.ttl }));
  const doc = await WorkItem.lock(new Types.ObjectId(config.id), config.owner, { ttl: config.ttl });
  process.stdout.write(`${JSON.stringify({ ticket: doc.heldLock()!.ticket })}\n`);
  await connection.close();
}

main().catch((error: unknown) => {
  process.stderr.write(`ticket-issuer failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
