/**
 * `listLocks` pages through every lock in `_id` order also when the `_id`s are of several BSON
 * types (a Mixed `_id`: numbers, strings, binary data, ObjectIds, dates).
 *
 * The next page was asked for with `_id: { $gt: <last _id> }`, and a query's `$gt` only matches
 * values of the operand's own type bracket (manual, "Comparison/Sort Order"), while the sort
 * orders all types together: with `limit: 1` the listing stopped at the first type boundary and
 * answered `next: null` with the locks of the other types never listed. Now the next page is
 * "`$gt` the last `_id`, or of a type that sorts after its type" (LockStore.list).
 */
import { Schema, Types, mongo } from 'mongoose';
import { lockPlugin, type LockableModel } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';

interface Item {
  _id: unknown;
  title: string;
}

const db = testDatabase('listtypes');
let conn: MonitoredConnection;
let Items: LockableModel<Item>;

beforeAll(async () => {
  conn = await connect(db.name);
  const schema = new Schema<Item>({ _id: Schema.Types.Mixed, title: String });
  schema.plugin(lockPlugin);
  Items = conn.connection.model<Item, LockableModel<Item>>('MixedListItem', schema);
  await Items.init();
  await Items.lockModel().init();
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

const wire = (value: unknown) => mongo.BSON.EJSON.stringify({ v: value } as mongo.Document, { relaxed: false });

test.each([1, 2, 50])('locks on ids of five BSON types are all listed, in _id order, with limit %i', async (limit) => {
  const owner = `owner-${limit}`;
  // In mongod's sort order: numbers, strings, binary data, ObjectIds, dates.
  const ids: unknown[] = [7, 2n ** 60n, 'b', new mongo.Binary(Buffer.from('zz')), new Types.ObjectId(), new Date(86_400_000 * limit)];
  for (const id of ids) {
    await Items.create({ _id: id, title: 't' });
    await Items.lock(id as string, owner);
  }
  const listed: unknown[] = [];
  let after: string | undefined;
  for (let page = 0; page < 20; page++) {
    const { locks, next } = await Items.listLocks({ owner, limit, ...(after === undefined ? {} : { after }) });
    listed.push(...locks.map((lock) => lock.documentId));
    if (next === null) break;
    after = next;
  }
  expect(listed.map(wire)).toEqual(ids.map(wire));
  await Items.releaseAllFor(owner);
  await Items.deleteMany({});
});
