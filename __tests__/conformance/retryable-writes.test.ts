/**
 * A retryable findAndModify (lsid + txnNumber) sent again after it ran; and a retryable `update`
 * of several statements, retried statement by statement.
 *
 * Sources:
 *  - find_and_modify.cpp (src/mongo/db/commands/query_cmd/find_and_modify.cpp): for a retryable
 *    write, `TransactionParticipant::checkStatementExecuted(stmtId)` looks for the oplog entry of the
 *    statement; when found, the reply is `parseOplogEntryForFindAndModify(...)` plus
 *    `setRetriedStmtId(stmtId)` (stmtId defaults to 0), and the command does not run again.
 *  - parseOplogEntryForFindAndModify (src/mongo/db/query/write_ops/write_ops_retryability.cpp):
 *    an update entry answers `lastErrorObject: { n: 1, updatedExisting: true }` and the stored pre-
 *    or post-image; an insert (upsert) entry `{ n: 1, updatedExisting: false, upserted: <_id> }` and
 *    the inserted document only with `new: true`; a delete entry `{ n: 1 }` and the pre-image. The
 *    request's `fields` (projection) is never applied (SERVER-31242, SERVER-48368).
 *  - The same function always sets `n: 1`: a findAndModify that matched nothing wrote no oplog entry,
 *    has none to be rebuilt from, and runs again when retried.
 *  - performUpdates (src/mongo/db/query/write_ops/write_ops_exec.cpp @04682736): for a retryable
 *    `update`, each statement is looked up on its own (`checkStatementExecutedAndFetchOplogEntry`
 *    with the statement's stmtId, its index when the command carries no stmtIds); a statement that
 *    ran is answered by parseOplogEntryForUpdate (write_ops_retryability.cpp: an insert entry (an
 *    upsert) as `n: 1, nModified: 0` with its `upserted` `_id`, an update entry as `n: 1,
 *    nModified: 1`) and its stmtId goes to `retriedStmtIds`; the others run now. A statement that
 *    changed nothing wrote no oplog entry and runs again. The reply carries `retriedStmtIds` when
 *    any statement was answered that way (write_commands.cpp, serializeReply).
 *  - performSingleUpdateOpWithDupKeyRetry: "Cannot use (or request) retryable writes with
 *    multi=true" (InvalidOptions) for a `multi` statement of a retryable write, as that
 *    statement's error.
 * Retryable writes need a replica set (a standalone answers IllegalOperation), so these run only
 * there.
 */
import { Long, type ClientSession, type Db, type Document, type MongoClient } from 'mongodb';
import { testTopology } from '../../test-backend/test-env';
import { openClient, uniqueDbName } from './support/server';

const dbName = uniqueDbName('conf_retryable');
const replset = testTopology() === 'replset';
let client: MongoClient;
let db: Db;
let session: ClientSession;
let txnNumber = 0;

beforeAll(async () => {
  client = await openClient();
  db = client.db(dbName);
  session = client.startSession();
});

afterAll(async () => {
  await session.endSession();
  await db.dropDatabase();
  await client.close();
});

/** Sends `cmd` twice with the same lsid and txnNumber (as the driver does when it retries). */
async function twice(cmd: Document): Promise<[Document, Document]> {
  const withTxn = { ...cmd, txnNumber: Long.fromNumber(++txnNumber) };
  const first = await db.command(withTxn, { session });
  const again = await db.command(withTxn, { session });
  return [first, again];
}

const maybe = replset ? test : test.skip;

maybe('update with new and fields: the retry answers the whole post-image, written once', async () => {
  await db.collection('fam').insertOne({ _id: 1 as never, n: 0, other: 'x' });
  const [first, again] = await twice({ findAndModify: 'fam', query: { _id: 1 }, update: { $inc: { n: 1 } }, new: true, fields: { n: 1, _id: 0 } });
  expect(first.value).toEqual({ n: 1 });
  expect(first.lastErrorObject).toEqual({ n: 1, updatedExisting: true });
  expect(again.value).toEqual({ _id: 1, n: 1, other: 'x' });
  expect(again.lastErrorObject).toEqual({ n: 1, updatedExisting: true });
  expect(again.retriedStmtId).toBe(0);
  expect(await db.collection('fam').findOne({ _id: 1 as never })).toEqual({ _id: 1, n: 1, other: 'x' });
});

maybe('update without new: the retry answers the whole pre-image', async () => {
  await db.collection('fam').insertOne({ _id: 2 as never, n: 0 });
  const [first, again] = await twice({ findAndModify: 'fam', query: { _id: 2 }, update: { $set: { n: 5 } }, fields: { _id: 0 } });
  expect(first.value).toEqual({ n: 0 });
  expect(again.value).toEqual({ _id: 2, n: 0 });
});

maybe('upsert: the retry reports the upserted _id; the document only with new', async () => {
  let [first, again] = await twice({ findAndModify: 'fam', query: { _id: 3 }, update: { $set: { n: 1 } }, upsert: true, new: true, fields: { n: 1, _id: 0 } });
  expect(first.value).toEqual({ n: 1 });
  expect(first.lastErrorObject).toEqual({ n: 1, updatedExisting: false, upserted: 3 });
  expect(again.value).toEqual({ _id: 3, n: 1 });
  expect(again.lastErrorObject).toEqual({ n: 1, updatedExisting: false, upserted: 3 });
  [first, again] = await twice({ findAndModify: 'fam', query: { _id: 4 }, update: { $set: { n: 1 } }, upsert: true });
  expect(first.value).toBeNull();
  expect(again.value).toBeNull();
  expect(again.lastErrorObject).toEqual({ n: 1, updatedExisting: false, upserted: 4 });
});

maybe('remove: the retry answers the whole deleted document', async () => {
  await db.collection('fam').insertOne({ _id: 5 as never, n: 7 });
  const [first, again] = await twice({ findAndModify: 'fam', query: { _id: 5 }, remove: true, fields: { n: 1, _id: 0 } });
  expect(first.value).toEqual({ n: 7 });
  expect(again.value).toEqual({ _id: 5, n: 7 });
  expect(again.lastErrorObject).toEqual({ n: 1 });
});

maybe('a findAndModify that matched nothing left nothing to replay: the retry runs it again', async () => {
  const cmd = { findAndModify: 'fam', query: { _id: 6 }, update: { $inc: { n: 1 } }, new: true, txnNumber: Long.fromNumber(++txnNumber) };
  const first = await db.command(cmd, { session });
  expect(first.value).toBeNull();
  expect(first.lastErrorObject).toEqual({ n: 0, updatedExisting: false });
  await db.collection('fam').insertOne({ _id: 6 as never, n: 0 });
  const again = await db.command(cmd, { session });
  expect(again.value).toEqual({ _id: 6, n: 1 });
  expect(again.retriedStmtId).toBeUndefined();
});

maybe('a retried update answers the statements that wrote from their record and runs the others again', async () => {
  const coll = db.collection<{ _id: number; n?: number; owner?: string }>('upd');
  await coll.insertMany([{ _id: 10, owner: 'other' }, { _id: 11, n: 0 }]);
  // Statement 0 upserts, 1 is refused (a binary-equal no-op: someone else's record), 2 updates.
  const take = (id: number) => ({
    q: { _id: id },
    u: [{ $set: { owner: { $cond: [{ $eq: [{ $ifNull: ['$owner', null] }, null] }, 'me', '$owner'] } } }],
    upsert: true,
  });
  const cmd = { update: 'upd', ordered: false, updates: [take(12), take(10), { q: { _id: 11 }, u: { $inc: { n: 1 } } }], txnNumber: Long.fromNumber(++txnNumber) };
  const first = await db.command(cmd, { session });
  expect([first.n, first.nModified, first.upserted]).toEqual([3, 1, [{ index: 0, _id: 12 }]]);
  expect(first.retriedStmtIds).toBeUndefined();
  // The record that refused statement 1 is released meanwhile.
  await coll.updateOne({ _id: 10 }, { $unset: { owner: '' } });
  const again = await db.command(cmd, { session });
  // 0 and 2 answered from their oplog entries (the $inc not applied twice); 1 ran and now wrote.
  expect(again.retriedStmtIds).toEqual([0, 2]);
  expect([again.n, again.nModified, again.upserted]).toEqual([3, 2, [{ index: 0, _id: 12 }]]);
  expect(await coll.find().sort({ _id: 1 }).toArray()).toEqual([
    { _id: 10, owner: 'me' },
    { _id: 11, n: 1 },
    { _id: 12, owner: 'me' },
  ]);
});

maybe('a multi statement in a retryable update is that statement\'s InvalidOptions error', async () => {
  const reply = await db.command(
    { update: 'upd', ordered: false, updates: [{ q: { _id: 13 }, u: { $set: { n: 1 } }, upsert: true }, { q: {}, u: { $set: { n: 2 } }, multi: true }], txnNumber: Long.fromNumber(++txnNumber) },
    { session },
  );
  expect(reply.ok).toBe(1);
  expect(reply.n).toBe(1);
  expect(reply.writeErrors).toHaveLength(1);
  expect(reply.writeErrors[0]).toMatchObject({ index: 1, code: 72, errmsg: 'Cannot use (or request) retryable writes with multi=true' });
});
