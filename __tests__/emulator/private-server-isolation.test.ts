/**
 * support/private-server.ts: a file that calls usesPrivateServer() runs on an emulator of its own,
 * so the failCommand it arms reaches no other file (the server has one failCommand fail point:
 * mongod src/mongo/db/commands/fail_point_cmd.cpp; a new configureFailPoint replaces it), and the
 * files that arm it need not wait for one another. Checked: this file's MONGODB_URI is another
 * server's than the run's, and a fail point armed there fails this file's commands and not the
 * shared server's. (The test environment's teardown stops the private server after the file; no
 * test here sees that.)
 */
import { mongo } from 'mongoose';
import { testBackendKind } from '../../test-backend/test-env';
import { usesPrivateServer } from '../support/private-server';

const shared = process.env.MONGODB_URI!;
usesPrivateServer();

const onEmulator = testBackendKind() === 'emulator' && process.env.MPL_PRIVATE_SERVERS !== '0' ? test : test.skip;

onEmulator('a fail point armed on the private server fails its commands only, not the shared server\'s', async () => {
  const own = process.env.MONGODB_URI!;
  expect(own).not.toBe(shared);
  const [mine, theirs] = [new mongo.MongoClient(own), new mongo.MongoClient(shared)];
  try {
    await Promise.all([mine.connect(), theirs.connect()]);
    await mine.db('admin').command({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['find'], errorCode: 2 } });
    const onShared = await theirs.db('private_server_isolation').collection('x').find({}).toArray();
    const onOwn = await mine.db('private_server_isolation').collection('x').find({}).toArray().then(() => 'answered', (error: unknown) => (error as { code?: number }).code);
    expect({ onShared, onOwn }).toEqual({ onShared: [], onOwn: 2 });
  } finally {
    await mine.db('admin').command({ configureFailPoint: 'failCommand', mode: 'off' }).catch(() => undefined);
    await Promise.all([mine.close(), theirs.close()]);
  }
});
