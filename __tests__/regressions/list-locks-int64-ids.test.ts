/**
 * `listLocks` lists locks on documents whose `_id` is an int64 beyond 2^53 (Mongoose's BigInt
 * type, or a bigint in a Mixed `_id`), which `lock`, `isLocked` and `lockStatus` accept.
 *
 * The driver reads such an `_id` back as a `Long` (promoteLongs turns only values within 2^53 into
 * numbers), fromStoredId passes it on, and listLocks casts it with the schema's `_id` caster,
 * whose first look (isScalarId, src/arguments.ts) knows no Long: the whole listing rejects with
 * `InvalidLockArgumentError: Invalid id: ... got a Long`, an error about an argument the caller
 * never passed.
 *
 * Note: the commands a bigint id makes the plugin send (`_id: <long>`) are not in
 * docs/lock-commands.json, so running this file also fails Jest's global teardown until they are
 * recorded and traced (PRODUCT.md property 9).
 */
import { Schema } from 'mongoose';
import { lockPlugin, type LockableModel } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';

interface Item {
  _id: bigint;
  title: string;
}

const db = testDatabase('int64list');
let conn: MonitoredConnection;

beforeAll(async () => {
  conn = await connect(db.name);
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

test.each([
  ['BigInt', BigInt],
  ['Mixed', Schema.Types.Mixed],
] as [string, unknown][])('a lock on the %s _id 2^60 is listed, with that id', async (name, type) => {
  const schema = new Schema<Item>({ _id: type as typeof BigInt, title: String });
  schema.plugin(lockPlugin);
  const Items = conn.connection.model<Item, LockableModel<Item>>(`Int64Listed${name}`, schema);
  await Items.init();
  const id = 2n ** 60n;
  await Items.create({ _id: id, title: 'big' });
  const doc = await Items.lock(id, 'alice');
  expect(doc.heldLock()!.documentId).toBe(id);
  const { locks, next } = await Items.listLocks();
  expect(locks.map((lock) => lock.documentId)).toEqual([id]);
  expect(next).toBeNull();
});
