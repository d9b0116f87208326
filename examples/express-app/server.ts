/**
 * Runs the example back office on the embedded backend (a real mongod when one is available,
 * the project's emulator otherwise): `npx tsx examples/express-app/server.ts`, then open
 * http://127.0.0.1:3000 in two browsers (or a normal and a private window) as two users.
 */
import { randomBytes } from 'node:crypto';
import mongoose from 'mongoose';
import { startBackend } from '../../test-backend/backend';
import { createApp, workItemModel } from './app';

async function main(): Promise<void> {
  const backend = await startBackend();
  const connection = await mongoose.createConnection(backend.uri, { dbName: 'mpl_example' }).asPromise();
  const WorkItem = workItemModel(connection);
  await WorkItem.init();
  if ((await WorkItem.estimatedDocumentCount()) === 0) {
    await WorkItem.create([
      { title: 'Refund request #4711', status: 'pending', notes: 'Customer called twice.' },
      { title: 'Invoice #1042 disputed', status: 'open' },
      { title: 'Address change for order #88', status: 'open' },
    ]);
  }
  const port = Number(process.env.PORT ?? 3000);
  const ttl = process.env.LOCK_TTL_MS === undefined ? undefined : Number(process.env.LOCK_TTL_MS);
  const app = createApp({ WorkItem, sessionSecret: randomBytes(32).toString('hex'), lockTtlMs: ttl });
  const server = app.listen(port, '127.0.0.1', () => {
    console.log(`Listening on http://127.0.0.1:${port} (MongoDB: ${backend.description})`);
  });
  const stop = () => {
    server.close();
    void connection.close().then(() => backend.stop()).then(() => process.exit(0));
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

void main();
