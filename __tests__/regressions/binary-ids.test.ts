/**
 * Attack: the "who is editing this?" calls on a model whose `_id` is a Buffer (README, Statics:
 * "`id` is cast to the schema's `_id` type; it must be a scalar (ObjectId, string, number, Date,
 * Buffer, UUID)").
 *
 * - `lockStatus` matches records to the ids asked for by `canonicalId` (EJSON). The cast id is a
 *   MongooseBuffer, the record's `_id` comes back from the driver as a `Binary`, and the two
 *   canonical forms differ: every locked document is reported free (`null`). A list page would
 *   show "free" on a document someone is editing.
 * - `listLocks` returns `documentId` as a `Binary` and a `next` cursor holding it; reading that
 *   cursor back casts a `Binary`, which `isScalarId` refuses, so the plugin's own cursor is
 *   rejected with InvalidLockOptionError ("this is not a cursor from listLocks()"): the second page
 *   can never be read.
 */
import { Schema } from 'mongoose';
import { lockPlugin, type LockableModel } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';

const db = testDatabase('atk_binids');
let conn: MonitoredConnection;
let M: LockableModel<{ title: string }>;
const ids = [Buffer.from('item-a'), Buffer.from('item-b'), Buffer.from('item-c')];

beforeAll(async () => {
  conn = await connect(db.name);
  const schema = new Schema({ _id: Buffer, title: String });
  schema.plugin(lockPlugin, { ttl: 10_000 });
  M = conn.connection.model('BinaryIdItem', schema) as unknown as LockableModel<{ title: string }>;
  await M.init();
  await M.lockModel().init();
  for (const id of ids) await M.create({ _id: id, title: id.toString() } as never);
  await M.lock(ids[0] as never, 'alice', { label: 'Alice' });
  await M.lock(ids[1] as never, 'bob');
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

test('lockStatus reports the locks of Buffer ids (not null for a locked document)', async () => {
  const status = await M.lockStatus(ids as never, { owner: 'alice' });
  expect(status.map((s) => (s === null ? null : { label: s.label, mine: s.mine }))).toEqual([
    { label: 'Alice', mine: true },
    { label: null, mine: false },
    null,
  ]);
});

test("listLocks' own `next` cursor reads the next page for Buffer ids", async () => {
  const first = await M.listLocks({ limit: 1 });
  expect(first.locks).toHaveLength(1);
  expect(first.next).not.toBeNull();
  const second = await M.listLocks({ limit: 1, after: first.next! });
  expect(second.locks).toHaveLength(1);
});
