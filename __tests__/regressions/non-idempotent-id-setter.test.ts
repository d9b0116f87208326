/**
 * `lock()` loads the document the caller named, also when the schema's `_id` has a setter that is
 * not idempotent (`set: (v) => \`tenant:${v}\``): Mongoose applies it once to a query's filter,
 * so `findById('x')` finds the document stored as 'tenant:x'. This worked before b9fe5f1.
 *
 * Since b9fe5f1, lockAndLoad (src/plugin.ts) loads with `findById(documentId)`, the id AFTER
 * castId already applied the setter, and Mongoose applies it again: it looks for 'tenant:tenant:x',
 * finds nothing, releases the lock and throws LockTargetNotFoundError for a document that exists.
 * The code's comment says "setters must be idempotent"; neither the README nor the CHANGELOG
 * does, and the guard and the lock record both use 'tenant:x'.
 */
import { Schema } from 'mongoose';
import { lockPlugin, type LockableModel } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';

interface Tenanted {
  _id: string;
  title: string;
}

const db = testDatabase('idsetter');
let conn: MonitoredConnection;

beforeAll(async () => {
  conn = await connect(db.name);
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

test("lock('x') locks and loads the document Mongoose's findById('x') finds", async () => {
  const schema = new Schema<Tenanted>({ _id: { type: String, set: (v: string) => `tenant:${v}` }, title: String });
  schema.plugin(lockPlugin);
  const M = conn.connection.model<Tenanted, LockableModel<Tenanted>>('TenantedItem', schema);
  await M.init();
  await M.create({ _id: 'x', title: 'stored as tenant:x' });
  expect((await M.findById('x'))?._id).toBe('tenant:x');
  const doc = await M.lock('x', 'alice');
  expect(doc._id).toBe('tenant:x');
  expect(doc.heldLock()!.documentId).toBe('tenant:x');
  await doc.unlock();
});
