/**
 * An index the plugin did not make can still break locking: a unique `{ owner: 1 }` index created
 * by hand on the lock collection (the brief's "unique { owner: 1 }") makes the second lock record
 * of one owner a duplicate key. The plugin cannot prevent that, but the caller must get a typed
 * error (PRODUCT.md property 7: clear, typed errors; README "Errors": database failures are
 * LockDatabaseError), not the driver's raw MongoServerError.
 *
 * failures.ts `typed()` passes every duplicate key (11000) through untouched, as "a duplicate key
 * in the caller's own data"; a `lock()` writes no caller data, only a lock record, so the raw
 * `MongoServerError: E11000 duplicate key error ... index: owner_u` reaches the caller of
 * `lock()`. (Nor does the setup, which reads the indexes with listIndexes, say anything about a
 * unique index that no lock record can satisfy.)
 */
import type { Connection } from 'mongoose';
import { LockError } from '../../src';
import { connect, operatorConnection, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemSchema, type WorkItem, type WorkItemModel } from '../support/work-item';

const db = testDatabase('foreignunique');
let conn: MonitoredConnection;
let operator: Connection;

beforeAll(async () => {
  conn = await connect(db.name);
  operator = await operatorConnection(db.name);
});

afterAll(async () => {
  await operator.dropDatabase();
  await operator.close();
  await conn.close();
});

test("a lock refused by a hand-made unique { owner: 1 } index rejects with a LockError, not the driver's error", async () => {
  await operator.db!.collection('uniqueowners.locks').createIndex({ owner: 1 }, { unique: true, name: 'owner_u' });
  const M = conn.connection.model<WorkItem, WorkItemModel>('UniqueOwnerItem', workItemSchema({ ttl: 10_000 }), 'uniqueowners');
  await M.init();
  const a = await M.create({ title: 'a' });
  const b = await M.create({ title: 'b' });
  await M.lock(a._id, 'alice');
  const error = await M.lock(b._id, 'alice').catch((e: unknown) => e);
  expect(error).toBeInstanceOf(Error);
  expect(error).toBeInstanceOf(LockError);
});
