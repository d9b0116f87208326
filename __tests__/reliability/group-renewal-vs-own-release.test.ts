/**
 * README, Several documents: "A document released on its own (`saveAndUnlock()`, `unlock()`) leaves
 * the group: it is no longer renewed or released with it." And the handle's `signal` aborts only
 * when a lock of the group is lost.
 *
 * The group's automatic renewal (lock-group.ts extendGroup) picks the documents still held when it
 * is SENT, and counts a renewal that matched fewer of them as a lost group; its explanation
 * (LockStore.explainGroupLoss with afterOwnRelease false) reads a released record as "released by
 * someone". So a holder that releases one document of the group with `saveAndUnlock()` while a
 * renewal is on its way (one is sent when a third of the ttl is left: with many groups this is routine, not a rare
 * interleaving) gets its whole group declared lost: the signal aborts with
 * LockNotHeldError('released') and renewals stop, although every other document is still held
 * (and was just renewed) and nobody else released anything.
 *
 * The interleaving is forced with a fail point that holds back the renewal's `update` on the
 * worker's connection (mongod: src/mongo/db/commands/fail_point_cmd.cpp, `failCommand` with
 * `blockConnection`; the block happens before the command runs), while the holder saves and
 * releases one document on another pooled connection.
 */
import type { mongo } from 'mongoose';
import { LockNotHeldError } from '../../src';
import { appUnderFailPoints } from '../support/fail-point-app';
import { usesPrivateServer } from '../support/private-server';
import { sleep, testDatabase, waitUntil, type MonitoredConnection } from '../support/db';
import { workItemModel } from '../support/work-item';

usesPrivateServer();
jest.setTimeout(120_000);

const APP = 'group-renewal-own-release';
const db = testDatabase('group_renew_release');
const connections = appUnderFailPoints(db, APP);
let admin: MonitoredConnection;
let worker: MonitoredConnection;
beforeAll(() => ({ admin, app: worker } = connections));

test('saveAndUnlock of one document while the group renewal is in flight does not abort the group', async () => {
  const Admin = await workItemModel(admin.connection, { ttl: 30_000 }, 'RenewRelease');
  const Worker = await workItemModel(worker.connection, { ttl: 30_000 }, 'RenewRelease');
  const ids = (await Admin.insertMany([{ title: 'a' }, { title: 'b' }, { title: 'c' }])).map((d) => d._id);
  const locks = Admin.lockModel().collection.collectionName;

  // A ttl of 12 s: the first renewal is sent when a third is left, about 8 s after the grant; held
  // back 2 s, it still lands 2 s before the expiry.
  const handle = await Worker.acquireLocks(ids, 'holder', { ttl: 12_000 });
  const grantedUntil = handle.expiresAt.getTime();
  const [first] = handle.documents;
  await admin.connection.getClient().db('admin').command({
    configureFailPoint: 'failCommand',
    mode: { times: 1 },
    data: { failCommands: ['update'], appName: APP, namespace: `${db.name}.${locks}`, blockConnection: true, blockTimeMS: 2_000 },
  });
  const renewalSent = new Promise<void>((resolve) => {
    const client = worker.connection.getClient();
    const listener = (event: { commandName: string; command: mongo.Document }) => {
      if (event.commandName === 'update' && event.command.update === locks) {
        client.off('commandStarted', listener);
        resolve();
      }
    };
    client.on('commandStarted', listener);
  });
  await renewalSent;
  // The renewal of all three is held back on the server. The holder finishes the first document.
  first.title = 'a: done';
  await first.saveAndUnlock();
  // Wait for the renewal to come back (2 s stall) and be processed: the handle either moved its
  // expiry or aborted (bounded; no guess at how long a loaded machine takes).
  await waitUntil(() => handle.signal.aborted || handle.expiresAt.getTime() > grantedUntil, 20_000);

  expect(handle.signal.aborted ? String(handle.signal.reason) : 'not aborted').toBe('not aborted');
  expect(handle.expiresAt.getTime()).toBeGreaterThan(grantedUntil);
  expect(handle.msLeft()).toBeGreaterThan(0);
  // The other two are still held by the holder, and keep being renewed past the original ttl.
  await sleep(Math.max(0, grantedUntil + 1_500 - Date.now()));
  expect((await Admin.lockStatus(ids, { owner: 'holder' })).map((s) => s?.mine === true)).toEqual([false, true, true]);
  expect(handle.signal.aborted).toBe(false);
  await handle.release();
});

test('a lock of the group released by someone else (forceUnlock) is still a loss: decided by the next renewal, never counted on meanwhile', async () => {
  const Admin = await workItemModel(admin.connection, { ttl: 30_000 }, 'RenewForced');
  const Worker = await workItemModel(worker.connection, { ttl: 30_000 }, 'RenewForced');
  const ids = (await Admin.insertMany([{ title: 'a' }, { title: 'b' }])).map((d) => d._id);
  const handle = await Worker.acquireLocks(ids, 'holder', { ttl: 30_000, autoExtend: false });
  await Admin.forceUnlock(ids[1]);
  const before = handle.documents[1].heldLock()!.msLeft();
  // First renewal: the released lock may be this process's own release in flight; undecided, and
  // no lock of the group is counted on for longer than before.
  await handle.extend();
  expect(handle.signal.aborted).toBe(false);
  expect(handle.documents[1].heldLock()!.msLeft()).toBeLessThanOrEqual(before);
  // Second renewal: still counted as held here, released on the server: lost.
  const error = await handle.extend().catch((e: unknown) => e);
  expect(error).toBeInstanceOf(LockNotHeldError);
  expect((error as LockNotHeldError).reason).toBe('released');
  expect(handle.signal.aborted).toBe(true);
  expect(handle.msLeft()).toBe(0);
  await handle[Symbol.asyncDispose]();
  expect((await Admin.lockStatus(ids, { owner: 'holder' })).map((s) => s?.mine === true)).toEqual([false, false]);
});
