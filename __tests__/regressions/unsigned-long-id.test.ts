/**
 * Property 10 (writes to documents nobody has locked succeed as without the plugin), for numeric
 * `_id`s: id-key.ts must key a number by the value BSON actually sends. An unsigned Long prints its
 * unsigned value (`Long.fromString('18446744073709551615', true)` is "18446744073709551615") but is
 * serialized as the signed int64 -1, so `-1` and that Long are one `_id` on the server. Keyed apart,
 * the guard claimed two lock records for one `_id`: a duplicate key of its own, retried until it
 * timed out. Now Longs are keyed by `Long.fromBits(low, high, false)`.
 */
import { Schema, mongo, type Connection } from 'mongoose';
import { idKey } from '../../src/id-key';
import { lockPlugin, type LockableModel, type LockMethods } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { outcome } from '../plugin/guard/support';

interface Numbered {
  _id: number;
  title: string;
}
type NumberedModel = LockableModel<Numbered>;

const db = testDatabase('ulong');
let conn: MonitoredConnection;
let M: NumberedModel;

function numberedModel(connection: Connection): NumberedModel {
  const schema = new Schema<Numbered, NumberedModel, LockMethods>({ _id: Number, title: String });
  schema.plugin(lockPlugin, { ttl: 30_000 });
  return connection.model<Numbered, NumberedModel>('Numbered', schema);
}

beforeAll(async () => {
  conn = await connect(db.name);
  M = numberedModel(conn.connection);
  await M.init();
  await M.lockModel().init();
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

test('updateMany naming -1 and Long(2^64-1, unsigned) (one _id on the server) succeeds on an unlocked document', async () => {
  await M.create({ _id: -1, title: 'free' });
  const unsigned = mongo.Long.fromString('18446744073709551615', true);
  const write = outcome(M.collection.updateMany({ _id: { $in: [-1, unsigned] } } as never, { $set: { title: 'written' } }) as Promise<unknown>);
  const timedOut = new Promise<'timed out'>((resolve) => setTimeout(() => resolve('timed out'), 10_000).unref());
  const result = await Promise.race([write, timedOut]);
  const summary = result === 'timed out' ? 'timed out' : result.ok ? (result.value as { modifiedCount: number }).modifiedCount : `${(result.error as Error).name}: ${(result.error as Error).message}`;
  expect(summary).toBe(1);
}, 20_000);

test('an unsigned Long is keyed by the signed int64 BSON sends', () => {
  expect(idKey(mongo.Long.fromString('18446744073709551615', true))).toBe(idKey(-1));
  expect(idKey(mongo.Long.fromString('9223372036854775808', true))).toBe(idKey(mongo.Long.MIN_VALUE));
  expect(idKey(mongo.Long.fromNumber(5, true))).toBe(idKey(5));
});
