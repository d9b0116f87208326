/**
 * A plain `doc.save()` (and `doc.deleteOne()`) of a locked instance after a caller's transaction
 * in which it ran `saveAndUnlock({ session })` failed to commit. The driver marks such a
 * transaction committed anyway (held-lock.ts, settleRelease), so whether the release committed is
 * known only to the server. `saveAndUnlock()`, `unlock()` and `extendLock()` settle it by asking
 * the server (one read); the write guard used to settle it only from what the driver says, and
 * refused the holder's plain save as `'released'` while the server still held the lock for it.
 * Now the guard settles it the same way, once, for the holder's write.
 *
 * Failed before the change: the first test (LockNotHeldError 'released', nothing saved).
 * Needs transactions and fail points: skipped on a standalone server.
 */
import { LockNotHeldError } from '../../src';
import { deploymentFacts } from '../conformance/support/server';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { usesPrivateServer } from '../support/private-server';
import { replicaSetOnly } from '../support/topology';
import { workItemModel, type WorkItemModel } from '../support/work-item';
import { outcome } from '../plugin/guard/support';

// This file configures failCommand: on a server of its own where it can (support/private-server.ts).
usesPrivateServer();

const db = testDatabase('holdersavefailedcommit');
const APP = `mpl-holder-save-commit-${process.pid}`;
let conn: MonitoredConnection;
let admin: MonitoredConnection;
let M: WorkItemModel;
/** Lock-collection finds this file's client sent (the guard's settling read is one). */
let lockReads = 0;

beforeAll(async () => {
  conn = await connect(db.name, { appName: APP });
  admin = await connect(db.name);
  M = await workItemModel(conn.connection, { ttl: 30_000 });
  conn.connection.getClient().on('commandStarted', (event) => {
    if (event.commandName === 'find' && event.command.find === M.lockModel().collection.collectionName) lockReads++;
  });
});

afterAll(async () => {
  await failCommits('off');
  await db.drop(admin.connection);
  await Promise.all([conn.close(), admin.close()]);
});

afterEach(() => failCommits('off'));

/** The next commitTransaction of this file's client fails before it runs (NoSuchTransaction), or after it applied (a writeConcernError). */
async function failCommits(mode: 'off' | 'not committed' | 'committed'): Promise<void> {
  if (!deploymentFacts().failPoints) return;
  const data =
    mode === 'not committed'
      ? { failCommands: ['commitTransaction'], appName: APP, errorCode: 251 }
      : { failCommands: ['commitTransaction'], appName: APP, writeConcernError: { code: 64, codeName: 'WriteConcernFailed', errmsg: 'waiting for replication timed out', errInfo: { wtimeout: true } } };
  await admin.connection
    .getClient()
    .db('admin')
    .command(mode === 'off' ? { configureFailPoint: 'failCommand', mode: 'off' } : { configureFailPoint: 'failCommand', mode: { times: 1 }, data });
}

/** A locked instance whose saveAndUnlock ran in a transaction whose commit then failed as `mode` says. */
async function afterFailedCommit(mode: 'not committed' | 'committed') {
  const { _id: id } = await M.create({ title: 'original' });
  const item = await M.lock(id, 'alice');
  await failCommits(mode);
  const session = await conn.connection.startSession();
  try {
    session.startTransaction();
    item.title = 'in the transaction';
    await item.saveAndUnlock({ session });
    await session.commitTransaction().catch(() => undefined);
    if (mode === 'not committed') {
      // The fail point answered instead of the commit: the transaction is still open on the
      // server; the next transaction number on the session ends it (TransactionParticipant::beginOrContinue).
      session.startTransaction();
      await M.findOne({ _id: id }).session(session);
      await session.abortTransaction();
    }
  } finally {
    await session.endSession();
  }
  return { id, item };
}

replicaSetOnly('transactions need a replica set')('the release did not commit: a plain save() of the instance settles it with one read and saves, as its holder', async () => {
  const { id, item } = await afterFailedCommit('not committed');
  expect(await M.isLocked(id)).toBe(true);
  item.title = 'saved after the failed commit';
  const before = lockReads;
  const saved = await outcome(item.save());
  expect({ ok: saved.ok, error: saved.ok ? null : String(saved.error) }).toEqual({ ok: true, error: null });
  expect(lockReads - before).toBe(1);
  expect((await M.collection.findOne({ _id: id } as never))?.title).toBe('saved after the failed commit');
  expect(await M.isLocked(id)).toBe(true);
  expect(item.heldLock()).not.toBeNull();
  await item.unlock();
});

replicaSetOnly('transactions need a replica set')('the release committed (the commit answered an error after applying): a plain save() is refused as released', async () => {
  const { id, item } = await afterFailedCommit('committed');
  expect(await M.isLocked(id)).toBe(false);
  item.title = 'not saved';
  const saved = await outcome(item.save());
  expect(!saved.ok && saved.error instanceof LockNotHeldError && saved.error.reason).toBe('released');
  expect((await M.collection.findOne({ _id: id } as never))?.title).toBe('in the transaction');
});
