/**
 * Attack: a transient fault while the lock collection is being set up (a failover, a network blip,
 * a primary stepping down while the application starts).
 *
 * The runtime of a lock collection keeps `ready = lockModel.init()` for the life of the process and
 * every plugin call awaits it; Mongoose caches `init()`'s promise, rejections included. So one
 * transient error of `create` or `createIndexes` when the model is compiled leaves every later
 * `Model.lock` of that process failing with the same error, reported as `retryable: true` ("This is
 * transient; trying again may succeed"), although no retry can ever succeed. Expected: once the
 * fault is gone, the next call sets the collection up again (or goes ahead without it) and locks.
 * The fault is injected with failCommand (errorCode 189 PrimarySteppedDown, once) on this test's
 * own appName.
 */
import { Schema } from 'mongoose';
import { lockPlugin, type LockableModel } from '../../src';
import { testDatabase, type MonitoredConnection } from '../support/db';
import { appUnderFailPoints } from '../support/fail-point-app';
import { usesPrivateServer } from '../support/private-server';

// This file configures failCommand: on a server of its own where it can (support/private-server.ts).
usesPrivateServer();

const db = testDatabase('atk_initfault');
const APP = `mpl-atk-initfault-${process.pid}`;
const connections = appUnderFailPoints(db, APP);
let admin: MonitoredConnection;
let conn: MonitoredConnection;
beforeAll(() => ({ admin, app: conn } = connections));

test('a transient error while creating the lock collection does not break locking for the rest of the process', async () => {
  await admin.connection.getClient().db('admin').command({
    configureFailPoint: 'failCommand',
    mode: { times: 1 },
    data: { appName: APP, failCommands: ['create'], errorCode: 189 },
  });
  const schema = new Schema({ title: String });
  schema.plugin(lockPlugin, { ttl: 10_000 });
  const M = conn.connection.model('InitFaultItem', schema) as unknown as LockableModel<{ title: string }>;
  await M.init().catch(() => undefined);
  await M.lockModel().init().catch(() => undefined); // the injected fault hits here (once)

  const { _id: id } = await M.create({ title: 'x' });
  const attempts: string[] = [];
  for (let i = 0; i < 3; i++) {
    attempts.push(
      await M.lock(id, 'alice').then(
        () => 'locked',
        (error: unknown) => `${(error as Error).name} (retryable: ${String((error as { retryable?: unknown }).retryable)}): ${(error as Error).message.slice(0, 90)}`,
      ),
    );
    if (attempts[i] === 'locked') break;
  }
  expect(attempts[attempts.length - 1]).toBe('locked');
});
