/**
 * Child process for leftovers.test.ts: takes a lock handle (auto-renewing) and forgets it, then
 * closes the connection. Prints "closed" once the connection is closed; a process whose only
 * remaining work is a forgotten handle's timers must then exit by itself.
 * Environment: MPL_URI, MPL_DB.
 */
import mongoose, { Schema } from 'mongoose';
import { lockPlugin } from '../../../../src';

async function main(): Promise<void> {
  const connection = mongoose.createConnection(process.env.MPL_URI!, { dbName: process.env.MPL_DB });
  await connection.asPromise();
  const schema = new Schema({ title: String });
  schema.plugin(lockPlugin, { ttl: 60_000 });
  const Item = connection.model('Forgotten', schema);
  await Item.init();
  const { _id: id } = await Item.create({ title: 'forgotten' });
  const statics = Item as unknown as { acquireLock(id: unknown, owner: string): Promise<unknown> };
  await statics.acquireLock(id, 'forgetful'); // never released
  await connection.close();
  process.stdout.write('closed\n');
}

main().catch((error: unknown) => {
  process.stderr.write(`forgotten-handle failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
