/**
 * A `Number` `_id` given as the driver's int64 (`mongo.Long`: what the driver hands back for an
 * int64 field read with `promoteLongs: false`, or an id built by code that keeps ids as Longs):
 * Mongoose's findById casts it to the number (lib/cast/number.js) and finds the document;
 * `Model.lock` must lock and load that same document, as docs/api.md says ("`id` is cast to the
 * schema's `_id` type").
 *
 * On perf2 (and before) the lock call refuses it before sending anything: "a Long cannot be cast
 * to this schema's _id type (Number)". arguments.ts replaces the caller's value by its fresh BSON
 * decoding with `useBigInt64: true` (id-value.ts, bsonRoundTrip), so Mongoose's cast receives a
 * bigint instead of the Long the caller gave, and Mongoose's Number cast refuses a bigint.
 */
import { Schema, mongo, type HydratedDocument, type Model } from 'mongoose';
import { lockPlugin, type LockMethods } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';

interface Row {
  _id: number;
  title: string;
}
type Lockable = Model<Row> & { lock(id: unknown, owner: string): Promise<HydratedDocument<Row> & LockMethods>; isLocked(id: unknown): Promise<boolean> };

const db = testDatabase('numberidlong');
let conn: MonitoredConnection;
let Rows: Lockable;

beforeAll(async () => {
  conn = await connect(db.name);
  Rows = conn.connection.model('NumberIdRow', new Schema<Row>({ _id: Number, title: String }).plugin(lockPlugin)) as unknown as Lockable;
  await Rows.init();
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

test.each([
  ['an int32 stored, a Long given', 42, mongo.Long.fromNumber(42)],
  ['an int64 stored, a Long given', mongo.Long.fromNumber(7), mongo.Long.fromNumber(7)],
])('%s: Model.lock locks and loads what findById finds', async (_name, stored, given) => {
  await Rows.collection.insertOne({ _id: stored, title: `row ${String(stored)}` } as never);
  const expected = await Rows.findById(given).read('primary').session(null).orFail();
  const locked = await Rows.lock(given, 'alice');
  expect(locked.toObject()).toEqual(expected.toObject());
  expect(await Rows.isLocked(expected._id)).toBe(true);
  await locked.unlock();
});
