/**
 * A lock found expired is told with the server's expiry, on the single-lock path as on the group
 * path: lock-loss.ts (lossOf) is shared by both, and names `record.expiresAt` when the read
 * returned it ("the server's, which is what 'expired' names"). LockStore.explainGroupLoss reads it;
 * LockStore.explainLoss (unlock, extendLock, a guarded save in a transaction) read only the token
 * and the fence, and LockStore.verify (a guarded save without a transaction) read `expiresAt` but
 * did not pass it on: LockExpiredError's `expiredAt` (and its message, "expired at ... (server
 * time)") was this instance's own last knowledge of the expiry, wrong when another instance of the
 * acquisition in another process moved it (a resume with a ticket, `Model.lock(id, owner,
 * { resume, ttl })`, or its extendLock) before the lock ran out.
 * The other process's resume is the very update lock-store.ts `resume` sends (same acquisition,
 * `expiresAt: $$NOW + ttl`), sent here through another connection: within one process a resume
 * shares the first instance's lease, so it would not show.
 * Runs on a replica set and on a standalone server.
 */
import type { Connection } from 'mongoose';
import { LockExpiredError } from '../../src';
import { connect, operatorConnection, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('expired_server_expiry');
let conn: MonitoredConnection;
let operator: Connection;
let M: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  operator = await operatorConnection(db.name);
  M = await workItemModel(conn.connection, { ttl: 800 }, 'ServerExpiry');
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
  await operator.close();
});

const records = () => operator.db!.collection(M.lockModel().collection.collectionName);

/** Locks a document for 800 ms; another process resumes the acquisition for 1500 ms; waits until that expiry passed. */
async function resumedElsewhereThenExpired(): Promise<{ doc: Awaited<ReturnType<WorkItemModel['lock']>>; serverExpiry: Date }> {
  const { _id: id } = await M.create({ title: 'resumed elsewhere' });
  const doc = await M.lock(id, 'alice');
  const { token } = doc.heldLock()!;
  await records().updateOne({ _id: id, token, $expr: { $gt: ['$expiresAt', '$$NOW'] } } as never, [{ $set: { expiresAt: { $add: ['$$NOW', { $literal: 1_500 }] } } }]);
  const serverExpiry = (await records().findOne({ _id: id } as never))!.expiresAt as Date;
  expect(serverExpiry.getTime()).toBeGreaterThan(doc.heldLock()!.expiresAt.getTime());
  await sleep(serverExpiry.getTime() - Date.now() + 300);
  return { doc, serverExpiry };
}

test.each([
  ['doc.unlock()', (doc: Awaited<ReturnType<WorkItemModel['lock']>>) => doc.unlock()],
  ['doc.extendLock()', (doc: Awaited<ReturnType<WorkItemModel['lock']>>) => doc.extendLock()],
  ['doc.save()', (doc: Awaited<ReturnType<WorkItemModel['lock']>>) => ((doc.title = 'late'), doc.save())],
])('%s: LockExpiredError names the server\'s expiry', async (_how, use) => {
  const { doc, serverExpiry } = await resumedElsewhereThenExpired();
  const error = await use(doc).then(() => undefined, (e: unknown) => e);
  expect(error).toBeInstanceOf(LockExpiredError);
  expect((error as LockExpiredError).expiredAt?.toISOString()).toBe(serverExpiry.toISOString());
}, 20_000);

test('the group path already does: unlockMany after a resume elsewhere names the server expiry', async () => {
  const [a, b] = await M.create([{ title: 'g1' }, { title: 'g2' }]);
  const docs = await M.lockMany([a._id, b._id], 'bob');
  const { token } = docs[0].heldLock()!;
  await records().updateOne({ _id: a._id, token } as never, [{ $set: { expiresAt: { $add: ['$$NOW', { $literal: 1_500 }] } } }]);
  const serverExpiry = (await records().findOne({ _id: a._id } as never))!.expiresAt as Date;
  await sleep(serverExpiry.getTime() - Date.now() + 300);
  const error = await M.unlockMany(docs).then(() => undefined, (e: unknown) => e);
  expect(error).toBeInstanceOf(LockExpiredError);
  expect((error as LockExpiredError).expiredAt?.toISOString()).toBe(serverExpiry.toISOString());
}, 20_000);
