/**
 * What LockStore.takeGroup reads from the driver's bulk-write errors (src/bulk-errors.ts), pinned
 * against the real driver and server:
 *  - a statement that fails with a duplicate key is a write error of that statement alone, the
 *    others run (`ordered: false`), and the driver throws a MongoBulkWriteError whose write errors
 *    are all 11000: `onlyDuplicateKeys` is true, and the group counts that statement as not taken;
 *  - any other failure is not: a network error reaches the caller unwrapped (the driver wraps it
 *    in a MongoBulkWriteError that is not a MongoNetworkError; mongodb/lib/bulk/common.js
 *    executeCommands), so failures.ts classifies it as any other command's network error and the
 *    caller's `cause` is the driver's own error.
 */
import { mongo } from 'mongoose';
import { onlyDuplicateKeys, unwrapBulkError } from '../../src/bulk-errors';
import { toLockError } from '../../src/failures';
import { LockDatabaseError } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';

// The driver Mongoose itself uses (Mongoose 8 carries its own), as the plugin does.
const { MongoBulkWriteError, MongoNetworkError } = mongo;
type Document = mongo.Document;
import { usesPrivateServer } from '../support/private-server';

usesPrivateServer();

const db = testDatabase('bulk_errors');
let conn: MonitoredConnection;
let coll: mongo.Collection<Document>;

beforeAll(async () => {
  conn = await connect(db.name, { retryWrites: true });
  coll = conn.connection.getClient().db(db.name).collection('statements');
  await coll.createIndex({ u: 1 }, { unique: true });
  await coll.insertOne({ _id: 'first' as never, u: 1 });
});

afterAll(async () => {
  await conn.connection.getClient().db('admin').command({ configureFailPoint: 'failCommand', mode: 'off' }).catch(() => undefined);
  await db.drop(conn.connection);
  await conn.close();
});

const upserts = (uValues: number[]) => uValues.map((u, i) => ({ updateOne: { filter: { _id: `s${u}-${i}` } as Document, update: [{ $set: { u } }], upsert: true } }));

test('a duplicate key in one statement: only that statement fails; onlyDuplicateKeys is true', async () => {
  const error = await coll.bulkWrite(upserts([2, 1, 3]), { ordered: false }).catch((e: unknown) => e);
  expect(error).toBeInstanceOf(MongoBulkWriteError);
  const bulk = error as mongo.MongoBulkWriteError;
  expect(bulk.result.upsertedCount).toBe(2);
  expect((Array.isArray(bulk.writeErrors) ? bulk.writeErrors : [bulk.writeErrors]).map((e) => [e.index, e.code])).toEqual([[1, 11000]]);
  expect(onlyDuplicateKeys(error)).toBe(true);
  expect(unwrapBulkError(error)).toBe(error);
});

test('another statement error is not a duplicate key', async () => {
  const error = await coll.bulkWrite([{ updateOne: { filter: { _id: 'x' } as Document, update: [{ $set: { _id: 'y' } }], upsert: true } }], { ordered: false }).catch((e: unknown) => e);
  expect(error).toBeInstanceOf(MongoBulkWriteError);
  expect(onlyDuplicateKeys(error)).toBe(false);
});

test('a network error (the retry fails too): unwrapped, it is a retryable LockDatabaseError', async () => {
  await conn.connection.getClient().db('admin').command({ configureFailPoint: 'failCommand', mode: { times: 2 }, data: { namespace: `${db.name}.statements`, failCommands: ['update'], closeConnection: true } });
  const error = await coll.bulkWrite(upserts([7, 8]), { ordered: false }).catch((e: unknown) => e);
  expect(error).toBeInstanceOf(MongoBulkWriteError);
  expect(error).not.toBeInstanceOf(MongoNetworkError);
  expect(onlyDuplicateKeys(error)).toBe(false);
  const unwrapped = unwrapBulkError(error);
  expect(unwrapped).toBeInstanceOf(MongoNetworkError);
  const typed = toLockError('lockMany', unwrapped);
  expect(typed).toBeInstanceOf(LockDatabaseError);
  expect((typed as LockDatabaseError).retryable).toBe(true);
  // The caller's `cause` is the driver's own network error, not the bulk wrapper.
  expect((typed as LockDatabaseError).cause).toBe(unwrapped);
});
