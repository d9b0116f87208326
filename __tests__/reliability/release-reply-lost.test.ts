/**
 * Model finding F2 (spec/README.md, `finding-F2-unlock-error`): a release that the server applied
 * but whose reply never reached the holder. PRODUCT.md property 13: no client believes it holds a
 * lock longer than the server grants it. The release may have applied as soon as it was SENT, so
 * from then on the instance counts on nothing (`msLeft()` is 0, a handle's signal aborts), while
 * the call still reports its error and a later call learns the truth from the server.
 *
 * The fault: the release (`update` on the lock collection, a retryable write) is sent, the first
 * attempt's connection closes before it runs (`failCommand` with `closeConnection`: mongod
 * evaluates it before the command, src/mongo/db/commands.cpp evaluateFailCommandFailPoint), the
 * driver retries once (retryable writes spec: one retry after a retryable error), and the retry is
 * applied and then its connection closes before the reply (`onPrimaryTransactionalWrite`,
 * src/mongo/db/transaction/transaction_participant.cpp: "closeConnection (bool, default = true):
 * Closes the connection on which the write was executed"; the write commits). The driver then
 * reports the network error: the release ran on the server, the caller got an error.
 * Both fail points are server-wide, so this file runs on a private replica-set server (retryable
 * writes need one).
 */
import { mongo, type Types } from 'mongoose';
import { LockDatabaseError, LockNotHeldError } from '../../src';
import { testDatabase, type MonitoredConnection } from '../support/db';
import { privateReplicaSet } from '../support/private-replica-set';
import { workItemModel, type WorkItemModel } from '../support/work-item';

jest.setTimeout(120_000);

const db = testDatabase('releasereplylost');
const fixture = privateReplicaSet(db, 'ReleaseReplyLost');
let conn: MonitoredConnection;
let raw: mongo.MongoClient;
let M: WorkItemModel;
let skip: string | undefined;

beforeAll(() => {
  ({ conn, raw, model: M, skipped: skip } = fixture);
});

/** The next `update` is applied on the server, and neither its first attempt nor its retry is answered. */
async function loseNextUpdateReply(): Promise<void> {
  const admin = raw!.db('admin');
  await admin.command({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['update'], closeConnection: true } });
  await admin.command({ configureFailPoint: 'onPrimaryTransactionalWrite', mode: { times: 1 } });
}

/**
 * The next `update` runs, and its reply carries a writeConcernError instead of the acknowledgement
 * (mongod's failCommand adds it after the command ran: src/mongo/db/commands.cpp,
 * evaluateFailCommandFailPoint / the writeConcernError branch): the driver reports an error for a
 * release that was applied. Used for multi-document releases, which are not retryable writes
 * (`update` with `multi: true`; retryable-writes spec, "Supported Write Operations"), so
 * onPrimaryTransactionalWrite does not act on them. WriteConcernFailed (64) is not a retryable
 * writeConcernError code, so the driver does not retry.
 */
async function errorAfterNextUpdate(): Promise<void> {
  await raw!.db('admin').command({
    configureFailPoint: 'failCommand',
    mode: { times: 1 },
    data: { failCommands: ['update'], writeConcernError: { code: 64, codeName: 'WriteConcernFailed', errmsg: 'waiting for replication timed out', errInfo: { wtimeout: true } } },
  });
}

afterEach(async () => {
  const admin = raw?.db('admin');
  await admin?.command({ configureFailPoint: 'failCommand', mode: 'off' });
  await admin?.command({ configureFailPoint: 'onPrimaryTransactionalWrite', mode: 'off' });
});

/** The lock record as the server has it, read by a client of its own. */
async function record(id: unknown): Promise<mongo.Document | null> {
  return raw!.db(db.name).collection(M.lockModel().collection.collectionName).findOne({ _id: id } as never);
}

async function expectReleasedOnServer(id: unknown): Promise<void> {
  const found = await record(id);
  expect(found?.token ?? null).toBeNull();
  expect(await M.isLocked(id as Types.ObjectId)).toBe(false);
}

test('doc.unlock() whose reply is lost after the release ran: the error is reported, the instance counts on nothing, a retry learns the truth', async () => {
  if (skip) return console.log(`release-reply-lost: skipped (${skip})`);
  const { _id: id } = await M.create({ title: 'unlock, reply lost' });
  const doc = await M.lock(id, 'alice');
  expect(doc.heldLock()!.msLeft()).toBeGreaterThan(20_000);
  await loseNextUpdateReply();
  const error = await doc.unlock().then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(LockDatabaseError);
  await expectReleasedOnServer(id);
  // The server let go of the lock: this instance must not count on it any more.
  expect(doc.heldLock()?.msLeft() ?? 0).toBe(0);
  // Another owner takes it; the two never both count on it.
  const bob = await M.lock(id, 'bob');
  expect(bob.heldLock()!.msLeft()).toBeGreaterThan(20_000);
  expect(doc.heldLock()?.msLeft() ?? 0).toBe(0);
  // The truth, settled by the server as before: the acquisition was released.
  const again = await doc.unlock().then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(again).toBeInstanceOf(LockNotHeldError);
  expect(doc.heldLock()).toBeNull();
  await bob.unlock();
});

test('handle.release() whose reply is lost: the handle counts on nothing', async () => {
  if (skip) return console.log(`release-reply-lost: skipped (${skip})`);
  const { _id: id } = await M.create({ title: 'handle, reply lost' });
  const handle = await M.acquireLock(id, 'alice', { autoExtend: false });
  await loseNextUpdateReply();
  await expect(handle.release()).rejects.toBeInstanceOf(LockDatabaseError);
  await expectReleasedOnServer(id);
  expect(handle.msLeft()).toBe(0);
  expect(handle.document.heldLock()?.msLeft() ?? 0).toBe(0);
  // Settled by the server: the acquisition was released.
  await expect(handle.release()).rejects.toBeInstanceOf(LockNotHeldError);
  expect(handle.msLeft()).toBe(0);
});

test('Model.unlock(id, owner, { ticket }) whose reply is lost: the instance carrying that acquisition counts on nothing', async () => {
  if (skip) return console.log(`release-reply-lost: skipped (${skip})`);
  const { _id: id } = await M.create({ title: 'ticket unlock, reply lost' });
  const doc = await M.lock(id, 'alice');
  const { ticket } = doc.heldLock()!;
  await loseNextUpdateReply();
  await expect(M.unlock(id, 'alice', { ticket })).rejects.toBeInstanceOf(LockDatabaseError);
  await expectReleasedOnServer(id);
  expect(doc.heldLock()?.msLeft() ?? 0).toBe(0);
});

test('unlockMany applied but answered with an error: no document of the group is counted on', async () => {
  if (skip) return console.log(`release-reply-lost: skipped (${skip})`);
  const created = await M.create([{ title: 'group a' }, { title: 'group b' }]);
  const ids = created.map((d) => d._id);
  const docs = await M.lockMany(ids, 'alice');
  await errorAfterNextUpdate();
  await expect(M.unlockMany(docs)).rejects.toBeInstanceOf(LockDatabaseError);
  for (const id of ids) await expectReleasedOnServer(id);
  expect(docs.map((d) => d.heldLock()?.msLeft() ?? 0)).toEqual([0, 0]);
});

test('a group handle whose release was applied but answered with an error: the handle counts on nothing', async () => {
  if (skip) return console.log(`release-reply-lost: skipped (${skip})`);
  const created = await M.create([{ title: 'group handle a' }, { title: 'group handle b' }]);
  const ids = created.map((d) => d._id);
  const handle = await M.acquireLocks(ids, 'alice', { autoExtend: false });
  await errorAfterNextUpdate();
  await expect(handle.release()).rejects.toBeInstanceOf(LockDatabaseError);
  for (const id of ids) await expectReleasedOnServer(id);
  expect(handle.documents.map((d) => d.heldLock()?.msLeft() ?? 0)).toEqual([0, 0]);
  expect(handle.msLeft()).toBe(0);
  // Settled by the server: the group was released; the handle still counts on nothing.
  await expect(handle.release()).rejects.toBeInstanceOf(LockNotHeldError);
  expect(handle.msLeft()).toBe(0);
});

test("saveAndUnlock without transactions, its release applied but answered with an error: the instance counts on nothing", async () => {
  if (skip) return console.log(`release-reply-lost: skipped (${skip})`);
  // transactions: 'never': the guard checks, the save writes, then a separate release (plugin.ts saveAndUnlockDocument).
  const Never = await workItemModel(conn.connection, { ttl: 30_000, transactions: 'never' }, 'ReleaseReplyLostNever');
  const { _id: id } = await Never.create({ title: 'save and unlock, reply lost' });
  const doc = await Never.lock(id, 'alice');
  doc.title = 'saved';
  // Only the release: the fail point is limited to the lock collection's namespace.
  await raw!.db('admin').command({
    configureFailPoint: 'failCommand',
    mode: { times: 1 },
    data: {
      failCommands: ['update'],
      namespace: `${db.name}.${Never.lockModel().collection.collectionName}`,
      writeConcernError: { code: 64, codeName: 'WriteConcernFailed', errmsg: 'waiting for replication timed out', errInfo: { wtimeout: true } },
    },
  });
  await expect(doc.saveAndUnlock()).rejects.toBeInstanceOf(LockDatabaseError);
  const found = await raw!.db(db.name).collection(Never.lockModel().collection.collectionName).findOne({ _id: id } as never);
  expect(found?.token ?? null).toBeNull();
  expect((await Never.findById(id))?.title).toBe('saved');
  expect(doc.heldLock()?.msLeft() ?? 0).toBe(0);
});
