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
import { mongo, Schema, type Model } from 'mongoose';
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

describe('an upsert that does not name its _id (the guard gives it one, upsert-id.ts)', () => {
  const runBoth = async (ops: (model: Model<Counter>) => Parameters<Model<Counter>['bulkWrite']>[0], key: string) => {
    const out: Record<string, unknown> = {};
    for (const [name, model] of [
      ['plain', Plain],
      ['guarded', C as unknown as Model<Counter>],
    ] as const) {
      await model.bulkWrite(ops(model));
      const docs = await model.find({ key }).lean();
      out[name] = docs.map((d) => d.n);
    }
    return out;
  };

  test('updateOne with upsert, then updateMany on what it inserted: reached, as without the plugin', async () => {
    const result = await runBoth(
      () => [
        { updateOne: { filter: { key: 'u1' }, update: { $set: { n: 1 } }, upsert: true } },
        { updateMany: { filter: { key: 'u1' }, update: { $inc: { n: 1 } } } },
      ],
      'u1',
    );
    expect(result).toEqual({ plain: [2], guarded: [2] });
  });

  test('updateMany with upsert, then deleteOne of what it inserted: reached', async () => {
    const result = await runBoth(
      () => [
        { updateMany: { filter: { key: 'u2' }, update: { $set: { n: 1 } }, upsert: true } },
        { deleteOne: { filter: { key: 'u2' } } },
      ],
      'u2',
    );
    expect(result).toEqual({ plain: [], guarded: [] });
  });

  test("the update's own $setOnInsert of _id, and a replacement's _id, are the ids later operations reach", async () => {
    const result = await runBoth(
      (model) => [
        { updateOne: { filter: { key: 'u3' }, update: { $setOnInsert: { _id: new model()._id, n: 1 } }, upsert: true } },
        { updateOne: { filter: { key: 'u3' }, update: { $inc: { n: 10 } } } },
        { replaceOne: { filter: { key: 'u3r' }, replacement: { _id: new model()._id, key: 'u3', n: 5 }, upsert: true } },
        { updateMany: { filter: { key: 'u3' }, update: { $inc: { n: 100 } } } },
      ],
      'u3',
    );
    expect(result).toEqual({ plain: [111, 105], guarded: [111, 105] });
  });

  test('an upsert that matches an existing document keeps its _id ($setOnInsert is not applied), and the caller\'s update object is not changed', async () => {
    const existing = await C.create({ key: 'u4', n: 1 });
    const update = { $inc: { n: 1 } };
    const res = await C.bulkWrite([
      { updateOne: { filter: { key: 'u4' }, update, upsert: true } },
      { updateOne: { filter: { key: 'u4' }, update: { $inc: { n: 1 } } } },
    ]);
    expect(res.upsertedCount).toBe(0);
    expect(update).toEqual({ $inc: { n: 1 } });
    expect(await C.find({ key: 'u4' }).lean()).toEqual([expect.objectContaining({ _id: existing._id, n: 3 })]);
  });

  test('the inserted document gets the ObjectId reported in upsertedIds', async () => {
    const res = await C.bulkWrite([{ updateOne: { filter: { key: 'u5' }, update: { $set: { n: 1 } }, upsert: true } }]);
    const id = res.upsertedIds[0];
    expect(id).toBeInstanceOf(mongo.ObjectId);
    expect((await C.findOne({ key: 'u5' }).lean())?._id).toEqual(id);
  });
});
