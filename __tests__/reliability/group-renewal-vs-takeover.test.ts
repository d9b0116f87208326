/**
 * A group handle whose renewal is held back past its lease (PRODUCT.md property 13; README
 * "Together": `signal` aborts with the error of the first lock lost): another owner waiting for one
 * of its documents gets it once the server's expiry passes; the handle's signal must have aborted
 * before that grant, and its msLeft() must be 0 by then. The renewal (`update` on the lock
 * collection, worker's connection only) is held back by a fail point (failCommand blockConnection;
 * mongod src/mongo/db/commands/fail_point_cmd.cpp).
 */
import type { mongo } from 'mongoose';
import { appUnderFailPoints } from '../support/fail-point-app';
import { usesPrivateServer } from '../support/private-server';
import { testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel } from '../support/work-item';

usesPrivateServer();
jest.setTimeout(120_000);

const APP = 'group-renewal-takeover';
const db = testDatabase('group_renew_takeover');
const connections = appUnderFailPoints(db, APP);
let admin: MonitoredConnection;
let worker: MonitoredConnection;
beforeAll(() => ({ admin, app: worker } = connections));

test('the signal aborts (and msLeft is 0) before another owner is granted a document of the group', async () => {
  const Admin = await workItemModel(admin.connection, { ttl: 30_000 }, 'RenewTakeover');
  const Worker = await workItemModel(worker.connection, { ttl: 30_000 }, 'RenewTakeover');
  const ids = (await Admin.insertMany([{ title: 'a' }, { title: 'b' }])).map((d) => d._id);
  const locks = Admin.lockModel().collection.collectionName;
  const handle = await Worker.acquireLocks(ids, 'holder', { ttl: 2_400 });
  let abortedAt = Infinity;
  handle.signal.addEventListener('abort', () => (abortedAt = performance.now()));
  await admin.connection.getClient().db('admin').command({
    configureFailPoint: 'failCommand',
    mode: { times: 1 },
    data: { failCommands: ['update'], appName: APP, namespace: `${db.name}.${locks}`, blockConnection: true, blockTimeMS: 6_000 },
  });
  let renewalSentAt = 0;
  const client = worker.connection.getClient();
  const listener = (event: { commandName: string; command: mongo.Document }) => {
    if (event.commandName === 'update' && event.command.update === locks) renewalSentAt = performance.now();
  };
  client.on('commandStarted', listener);
  const taken = await Admin.lock(ids[1], 'other', { wait: 20_000 });
  const grantedSeenAt = performance.now();
  const leftThen = handle.msLeft();
  client.off('commandStarted', listener);
  expect(renewalSentAt).toBeGreaterThan(0);
  expect({ abortedBeforeGrantSeen: abortedAt <= grantedSeenAt, leftThen }).toEqual({ abortedBeforeGrantSeen: true, leftThen: 0 });
  // The grant itself cannot be earlier than the holder's server expiry.
  expect(taken.heldLock()!.acquiredAt.getTime()).toBeGreaterThanOrEqual(handle.documents[1].heldLock()?.expiresAt.getTime() ?? 0);
  await taken.unlock();
  await handle.release().catch(() => undefined);
});
