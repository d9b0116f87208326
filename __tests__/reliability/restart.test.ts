/**
 * Restart (issue 5): a lock the server acknowledged (majority write concern, journaled) is still
 * held after the server restarts on the same data: others are still refused, its expiry is
 * unchanged, and its holder still holds it.
 */
import { Types } from 'mongoose';
import { createHash } from 'node:crypto';
import { tempDir } from '../../test-backend/backend';
import { startRestartableBackend } from '../../test-backend/test-env';
import { connectTo, type MonitoredConnection } from '../support/db';
import { workItemModel } from '../support/work-item';

const TTL_MS = 120_000;
const dataDir = tempDir('mpl-restart-');
const servers: { stop(): Promise<void> }[] = [];
const connections: MonitoredConnection[] = [];

afterAll(async () => {
  await Promise.all(connections.map((c) => c.close().catch(() => undefined)));
  for (const server of servers) await server.stop().catch(() => undefined);
  dataDir.remove();
});

const ownerKey = (owner: string) => createHash('sha256').update(owner, 'utf8').digest('base64url');

test('an acknowledged lock survives a server restart on the same data', async () => {
  const first = await startRestartableBackend(dataDir.path);
  if ('unsupported' in first) {
    console.log(`restart test skipped: ${first.unsupported}`);
    return;
  }
  servers.push(first);
  const options = { writeConcern: { w: 'majority' as const, journal: true } };
  const before = await connectTo(first.uri, 'mpl_restart', options);
  connections.push(before);
  const WorkItem = await workItemModel(before.connection, { ttl: TTL_MS }, 'RestartItem');
  const id: Types.ObjectId = (await WorkItem.create({ title: 'survives restarts' }))._id;
  const doc = await WorkItem.lock(id, 'holder-before-restart');
  const held = doc.heldLock()!;
  await before.close();
  await first.stop();

  const second = await startRestartableBackend(dataDir.path);
  if ('unsupported' in second) throw new Error(`the server could not be started again: ${second.unsupported}`);
  servers.push(second);
  const after = await connectTo(second.uri, 'mpl_restart', options);
  connections.push(after);
  const Again = await workItemModel(after.connection, { ttl: TTL_MS }, 'RestartItem');

  // The record is there, exactly as acknowledged.
  const record = await Again.lockModel().collection.findOne({ _id: id });
  expect(record).toMatchObject({ owner: ownerKey('holder-before-restart'), token: held.token, fence: held.fence, expiresAt: held.expiresAt });
  // Others are refused; the lock's expiry is unchanged.
  expect(await Again.isLocked(id)).toBe(true);
  expect(await Again.tryLock(id, 'someone-else')).toBeNull();
  expect((await Again.getLock(id))!.expiresAt).toEqual(held.expiresAt);
  // The holder is still recognised: locking again renews its own lock (a new token, a higher fence).
  const renewed = await Again.lock(id, 'holder-before-restart');
  expect(renewed.heldLock()!.fence).toBeGreaterThan(held.fence);
  await renewed.unlock();
  expect(await Again.isLocked(id)).toBe(false);
}, 90_000);
