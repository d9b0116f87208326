/**
 * Attack 11, property 10 (writes nobody's lock concerns behave as without the plugin): through
 * `Model.bulkWrite`, Mongoose hands the collection an `insertOne` whose `document` is a Mongoose
 * DOCUMENT (castBulkWrite.js castInsertOne: `insertOne.document = new model(...)`), whose `_id` is
 * an accessor on the prototype, not an own property. The guard's ordered-bulk branch
 * (write-guard.ts `bulk()`) tests `Object.prototype.hasOwnProperty.call(body.document, '_id')`,
 * finds none, and assigns `body.document._id = new ObjectId()` through Mongoose's setter:
 *  - the caller's `_id` is replaced: the document is inserted under a new ObjectId (cast to a
 *    hex string for a String `_id`), and `insertedIds` reports that one;
 *  - the id is still not an own property afterwards, so it is not added to the ids later
 *    operations are narrowed to: a later operation does not reach the inserted document (the
 *    attack-6 fix, tested only through `Model.collection.bulkWrite`, does not hold for
 *    `Model.bulkWrite`).
 */
import { Schema, Types, type Model } from 'mongoose';
import { lockPlugin, type LockableModel, type LockMethods } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';

interface Doc {
  key: string;
  n: number;
}

const db = testDatabase('attack11_insert');
let conn: MonitoredConnection;
let Guarded: LockableModel<Doc>;
let Plain: Model<Doc>;
let GuardedS: LockableModel<Doc & { _id: string }>;
let PlainS: Model<Doc & { _id: string }>;

beforeAll(async () => {
  conn = await connect(db.name);
  const g = new Schema<Doc, LockableModel<Doc>, LockMethods>({ key: String, n: Number });
  g.plugin(lockPlugin, { ttl: 60_000 });
  Guarded = conn.connection.model<Doc, LockableModel<Doc>>('InsDoc', g);
  Plain = conn.connection.model<Doc>('PlainInsDoc', new Schema<Doc>({ key: String, n: Number }));
  const gs = new Schema<Doc & { _id: string }, LockableModel<Doc & { _id: string }>, LockMethods>({ _id: String, key: String, n: Number });
  gs.plugin(lockPlugin, { ttl: 60_000 });
  GuardedS = conn.connection.model<Doc & { _id: string }, LockableModel<Doc & { _id: string }>>('InsDocS', gs);
  PlainS = conn.connection.model<Doc & { _id: string }>('PlainInsDocS', new Schema<Doc & { _id: string }>({ _id: String, key: String, n: Number }));
  for (const m of [Guarded, GuardedS]) {
    await m.init();
    await m.lockModel().init();
  }
  await Plain.init();
  await PlainS.init();
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

test("Model.bulkWrite insertOne keeps the caller's ObjectId _id, as without the plugin", async () => {
  const run = async (model: Model<Doc>) => {
    const id = new Types.ObjectId();
    const result = await model.bulkWrite([{ insertOne: { document: { _id: id, key: 'explicit', n: 1 } } }]);
    const stored = await model.find({ key: 'explicit' }).lean();
    return { storedUnderCallersId: stored.length === 1 && String(stored[0]._id) === String(id), reportedId: String(result.insertedIds[0]) === String(id) };
  };
  expect({ plain: await run(Plain), guarded: await run(Guarded as unknown as Model<Doc>) }).toEqual({
    plain: { storedUnderCallersId: true, reportedId: true },
    guarded: { storedUnderCallersId: true, reportedId: true },
  });
});

test("Model.bulkWrite insertOne keeps the caller's String _id 'abc', as without the plugin", async () => {
  const run = async (model: Model<Doc & { _id: string }>) => {
    await model.bulkWrite([{ insertOne: { document: { _id: 'abc', key: 's', n: 1 } } }]);
    return (await model.find({ key: 's' }).lean()).map((d) => d._id);
  };
  expect({ plain: await run(PlainS), guarded: await run(GuardedS as unknown as Model<Doc & { _id: string }>) }).toEqual({ plain: ['abc'], guarded: ['abc'] });
});

test('Model.bulkWrite: a later updateMany of the ordered bulk reaches the document its insertOne created, as without the plugin', async () => {
  const run = async (model: Model<Doc>) => {
    await model.bulkWrite([{ insertOne: { document: { key: 'later', n: 1 } } }, { updateMany: { filter: { key: 'later' }, update: { $inc: { n: 10 } } } }]);
    return (await model.find({ key: 'later' }).lean()).map((d) => d.n);
  };
  expect({ plain: await run(Plain), guarded: await run(Guarded as unknown as Model<Doc>) }).toEqual({ plain: [11], guarded: [11] });
});
