/**
 * A retryable findAndModify (lsid + txnNumber) sent again after it ran.
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
