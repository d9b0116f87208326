/** Runs the example app on the embedded backend: `npx tsx examples/express-app/server.ts`. */
import { randomBytes } from 'node:crypto';
import mongoose from 'mongoose';
import { startBackend } from '../../test-backend/backend';
import { createApp, workItemModel } from './app';

async function main(): Promise<void> {
  const backend = await startBackend();
  const connection = await mongoose.createConnection(backend.uri, { dbName: 'mpl_example' }).asPromise();
  const WorkItem = workItemModel(connection);
  const { _id } = await WorkItem.create({ title: 'Example work item' });
  const port = Number(process.env.PORT ?? 3000);
  const server = createApp(WorkItem, randomBytes(32).toString('hex')).listen(port, '127.0.0.1', () => {
    console.log(`Listening on http://127.0.0.1:${port} (MongoDB: ${backend.description}); try GET /items/${_id.toHexString()}`);
  });
  const stop = () => {
    server.close();
    void connection.close().then(() => backend.stop()).then(() => process.exit(0));
  };
  process.on('SIGINT', stop);
  process.on('SIGTERM', stop);
}

void main();
