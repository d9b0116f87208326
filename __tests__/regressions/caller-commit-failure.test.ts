/**
 * Issue 16, item 4: `doc.saveAndUnlock({ session })` inside the caller's transaction, whose COMMIT
 * fails (the server's failCommand fail point answers the first commitTransaction).
 *
 * The driver marks the transaction committed even when the commit fails: driver 7.8's
 * ClientSession.commitTransaction moves it to TRANSACTION_COMMITTED in a `finally`
 * (mongodb/lib/sessions.js), and after a TransientTransactionError `withTransaction` runs the
 * callback again in a new transaction (the convenient transaction API spec, step 10.2). The plugin
 * used to trust that state: the retried callback's saveAndUnlock threw LockNotHeldError
 * ('released'), nothing was saved, the server still held the lock, and `heldLock()` said null.
 *
 * Now an ended transaction's outcome is settled by asking the server: the record still carries
 * this acquisition (the release did not commit) or it does not (released, expired, taken over).
 *
 * Note on the callbacks: Mongoose resets a document's change tracking only when the callback
 * throws (Connection.prototype.transaction, `_resetSessionDocuments`), not when the commit fails,
 * so a retried callback must set the fields it saves to values that differ from the first
 * attempt's for save() to send them (Automattic/mongoose#14460). The callbacks here do.
 * Needs transactions: skipped on a standalone server.
 */
import { mongo } from 'mongoose';
import { LockNotHeldError } from '../../src';
import { deploymentFacts } from '../conformance/support/server';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { usesPrivateServer } from '../support/private-server';
import { replicaSetOnly } from '../support/topology';
import { workItemModel, type WorkItemModel } from '../support/work-item';

// This file configures failCommand: on a server of its own where it can (support/private-server.ts).
usesPrivateServer();

const db = testDatabase('commitfail');
const APP = `mpl-commit-fail-${process.pid}`;
let conn: MonitoredConnection;
let admin: MonitoredConnection;
let M: WorkItemModel;

const needsTransactions = () => replicaSetOnly('transactions need a replica set');

beforeAll(async () => {
  conn = await connect(db.name, { appName: APP });
  admin = await connect(db.name);
  M = await workItemModel(conn.connection, { ttl: 30_000 });
});

afterAll(async () => {
  await failCommits('off');
  await db.drop(admin.connection);
  await Promise.all([conn.close(), admin.close()]);
});

afterEach(() => failCommits('off'));

/**
 * The next commitTransaction of this file's client fails with `errorCode` (NoSuchTransaction:
 * mongod labels it TransientTransactionError, src/mongo/db/error_labels.cpp, and the fail point
 * answers before the command runs, so nothing commits), or gets a writeConcernError after it
 * committed (the commit's outcome is then unknown to the client).
 */
async function failCommits(mode: 'off' | 'NoSuchTransaction' | 'committed-with-write-concern-error'): Promise<void> {
  if (!deploymentFacts().failPoints) return;
  const data =
    mode === 'NoSuchTransaction'
      ? { failCommands: ['commitTransaction'], appName: APP, errorCode: 251 }
      : { failCommands: ['commitTransaction'], appName: APP, writeConcernError: { code: 64, codeName: 'WriteConcernFailed', errmsg: 'waiting for replication timed out', errInfo: { wtimeout: true } } };
  await admin.connection
    .getClient()
    .db('admin')
    .command(mode === 'off' ? { configureFailPoint: 'failCommand', mode: 'off' } : { configureFailPoint: 'failCommand', mode: { times: 1 }, data });
}

const stored = async (id: unknown) => (await M.collection.findOne({ _id: id } as never))?.title;

needsTransactions()("connection.transaction(): the commit fails once, the retried callback saves and releases", async () => {
  const { _id: id } = await M.create({ title: 'original' });
  const item = await M.lock(id, 'alice');
  await failCommits('NoSuchTransaction');
  let attempts = 0;
  await conn.connection.transaction(async (session) => {
    attempts++;
    item.title = `saved by attempt ${attempts}`;
    await item.saveAndUnlock({ session });
  });
  expect(attempts).toBe(2);
  expect(await stored(id)).toBe('saved by attempt 2');
  expect(await M.isLocked(id)).toBe(false);
  expect(item.heldLock()).toBeNull();
  const again = await item.unlock().catch((e: unknown) => e);
  expect(again).toBeInstanceOf(LockNotHeldError);
  expect((again as LockNotHeldError).reason).toBe('released');
});

needsTransactions()('session.withTransaction(): the commit fails once, the retried callback saves and releases', async () => {
  const { _id: id } = await M.create({ title: 'original' });
  const item = await M.lock(id, 'alice');
  await failCommits('NoSuchTransaction');
  const session = await conn.connection.startSession();
  let attempts = 0;
  try {
    await session.withTransaction(async () => {
      attempts++;
      item.title = `saved by attempt ${attempts}`;
      await item.saveAndUnlock({ session });
    });
  } finally {
    await session.endSession();
  }
  expect(attempts).toBe(2);
  expect(await stored(id)).toBe('saved by attempt 2');
  expect(await M.isLocked(id)).toBe(false);
});

needsTransactions()("the caller's own retry after a failed commit: the lock is still held, so it saves and releases", async () => {
  const { _id: id } = await M.create({ title: 'original' });
  const item = await M.lock(id, 'alice');
  await failCommits('NoSuchTransaction');
  const session = await conn.connection.startSession();
  try {
    session.startTransaction();
    item.title = 'first try';
    await item.saveAndUnlock({ session });
    const failed = await session.commitTransaction().catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(mongo.MongoServerError);
    expect((failed as mongo.MongoServerError).hasErrorLabel('TransientTransactionError')).toBe(true);
    expect(await M.isLocked(id)).toBe(true); // nothing committed
    // The driver calls the failed transaction committed: this process cannot tell, so the
    // instance does not claim the lock until the server has been asked.
    expect(item.heldLock()).toBeNull();

    session.startTransaction();
    item.title = 'second try';
    await item.saveAndUnlock({ session });
    await session.commitTransaction();
  } finally {
    await session.endSession();
  }
  expect(await stored(id)).toBe('second try');
  expect(await M.isLocked(id)).toBe(false);
});

needsTransactions()('a failed commit the caller gives up on: the lock is still held, and the instance can release it', async () => {
  const { _id: id } = await M.create({ title: 'original' });
  const item = await M.lock(id, 'alice');
  await failCommits('NoSuchTransaction');
  const session = await conn.connection.startSession();
  try {
    session.startTransaction();
    item.title = 'never committed';
    await item.saveAndUnlock({ session });
    await session.commitTransaction().catch(() => undefined);
    // The failed transaction is still open on the server (the fail point answered instead of
    // the commit); the next transaction number on the session ends it, as mongod does
    // (TransactionParticipant::beginOrContinue aborts the older transaction).
    session.startTransaction();
    await M.findOne({ _id: id }).session(session);
    await session.abortTransaction();
  } finally {
    await session.endSession();
  }
  expect(await stored(id)).toBe('original');
  expect(await M.isLocked(id)).toBe(true);
  await expect(item.unlock()).resolves.toBeUndefined();
  expect(await M.isLocked(id)).toBe(false);
});

needsTransactions()('a commit that applied but answered an error: the release is reported as released', async () => {
  const { _id: id } = await M.create({ title: 'original' });
  const item = await M.lock(id, 'alice');
  await failCommits('committed-with-write-concern-error');
  const session = await conn.connection.startSession();
  try {
    session.startTransaction();
    item.title = 'committed';
    await item.saveAndUnlock({ session });
    const failed = await session.commitTransaction().catch((e: unknown) => e);
    expect(failed).toBeInstanceOf(mongo.MongoServerError);
  } finally {
    await session.endSession();
  }
  expect(await stored(id)).toBe('committed');
  expect(await M.isLocked(id)).toBe(false);
  const again = await item.unlock().catch((e: unknown) => e);
  expect(again).toBeInstanceOf(LockNotHeldError);
  expect((again as LockNotHeldError).reason).toBe('released');
});
