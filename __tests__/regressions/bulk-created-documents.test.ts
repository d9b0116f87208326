/**
 * An ordered bulkWrite's later operations reach the documents its earlier operations create, as
 * they do without the plugin (PRODUCT.md property 10: writes nobody's lock concerns behave as
 * without the plugin). The guard sends every searched operation narrowed to the _ids it checked
 * and to those of the operations before it; an insertOne without an _id got its _id from the
 * driver only when the bulk was sent, after the guard had looked, so a later operation was
 * narrowed past it and silently touched nothing (found by an independent attack). The guard now
 * assigns that _id first, as the driver would. An upsert that names its _id in its filter is
 * reached too; one that does not is a documented limit (README, Limits).
 */
import { Schema, type Model } from 'mongoose';
import { lockPlugin, type LockableModel, type LockMethods } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';

interface Counter {
  key: string;
  n: number;
}
type CounterModel = LockableModel<Counter>;

const db = testDatabase('bulk_created');
let conn: MonitoredConnection;
let C: CounterModel;
let Plain: Model<Counter>;

beforeAll(async () => {
  conn = await connect(db.name);
  const schema = new Schema<Counter, CounterModel, LockMethods>({ key: String, n: Number });
  schema.plugin(lockPlugin, { ttl: 60_000 });
  C = conn.connection.model<Counter, CounterModel>('Counter', schema);
  await C.init();
  await C.lockModel().init();
  Plain = conn.connection.model<Counter>('PlainCounter', new Schema<Counter>({ key: String, n: Number }), 'plaincounters');
  await Plain.init();
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

test('an insertOne without an _id through Model.collection.bulkWrite is reached by a later updateMany, as with the raw driver', async () => {
  const raw = conn.connection.getClient().db(db.name).collection('plain');
  await raw.bulkWrite([{ insertOne: { document: { key: 'c', n: 1 } } }, { updateMany: { filter: { key: 'c' }, update: { $inc: { n: 1 } } } }]);
  expect((await raw.findOne({ key: 'c' }))?.n).toBe(2);

  const inserted: { key: string; n: number; _id?: unknown } = { key: 'c', n: 1 };
  await C.collection.bulkWrite([{ insertOne: { document: inserted } }, { updateMany: { filter: { key: 'c' }, update: { $inc: { n: 1 } } } }] as never);
  expect((await C.findOne({ key: 'c' }).lean())?.n).toBe(2);
  // The driver would have set the _id on the caller's document; so does the guard.
  expect(inserted._id).toBeDefined();
});

test('an upsert that names its _id is reached by later operations of the ordered bulk, as without the plugin', async () => {
  const run = async (model: Model<Counter>) => {
    const a = new model()._id;
    const b = new model()._id;
    await model.bulkWrite([
      { updateOne: { filter: { _id: a }, update: { $set: { key: 'a', n: 1 } }, upsert: true } },
      { updateMany: { filter: { key: 'a' }, update: { $inc: { n: 1 } } } },
      { updateOne: { filter: { _id: b }, update: { $set: { key: 'b', n: 1 } }, upsert: true } },
      { deleteOne: { filter: { key: 'b' } } },
    ]);
    return { a: (await model.findOne({ key: 'a' }).lean())?.n, b: await model.countDocuments({ key: 'b' }) };
  };
  expect(await run(Plain)).toEqual({ a: 2, b: 0 });
  expect(await run(C as unknown as Model<Counter>)).toEqual({ a: 2, b: 0 });
});
