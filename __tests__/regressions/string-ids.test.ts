/**
 * Guarded writes on a model whose `_id`s are strings: a never-locked document is written (its
 * claim record inserted and deleted again inside the guard's transaction), a document another
 * owner holds is refused, and its holder writes it. The commands the guard sends for string
 * `_id`s are in the compatibility record (an independent attack found the claim's `delete` with a
 * string `_id` missing from docs/lock-commands.json: no test had sent it).
 */
import { Schema } from 'mongoose';
import { LockedError, lockPlugin, type LockableModel, type LockMethods } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';

interface Slug {
  _id: string;
  title: string;
}
type SlugModel = LockableModel<Slug>;

/**
 * A write's options as bob. Typed loosely: the plugin declares `lockOwner` on the driver's option
 * interfaces (`declare module 'mongodb'`), which reach Mongoose's types only when the `mongodb`
 * this checkout resolves is the one Mongoose uses; in the Mongoose 8 run (scripts/test-mongoose8.sh)
 * it is not (this checkout's mongodb 7 beside Mongoose 8's own mongodb 6), and a literal fails
 * to compile with TS2353. (The same in __tests__/plugin/guard/stalled-holder.test.ts.)
 */
const asBob: Record<string, unknown> = { lockOwner: 'bob' };

const db = testDatabase('string_ids');
let conn: MonitoredConnection;
let S: SlugModel;

beforeAll(async () => {
  conn = await connect(db.name);
  const schema = new Schema<Slug, SlugModel, LockMethods>({ _id: String, title: String });
  schema.plugin(lockPlugin, { ttl: 60_000 });
  S = conn.connection.model<Slug, SlugModel>('Slug', schema);
  await S.init();
  await S.lockModel().init();
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

test('string _ids: a never-locked document is written, a held one refused, its holder writes it', async () => {
  await S.create([{ _id: 'free', title: 'a' }, { _id: 'held', title: 'b' }]);
  await S.updateOne({ _id: 'free' }, { $set: { title: 'written' } });
  expect((await S.findById('free').lean())?.title).toBe('written');
  expect(await S.lockModel().countDocuments({ _id: 'free' })).toBe(0); // the claim record is gone

  const doc = await S.lock('held', 'alice');
  await expect(S.updateOne({ _id: 'held' }, { $set: { title: 'bob' } }, asBob)).rejects.toBeInstanceOf(LockedError);
  await expect(S.updateMany({ title: 'b' }, { $set: { title: 'anyone' } })).rejects.toBeInstanceOf(LockedError);
  doc.title = 'alice';
  await doc.saveAndUnlock();
  expect((await S.findById('held').lean())?.title).toBe('alice');
});
