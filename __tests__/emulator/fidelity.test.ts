/**
 * Emulator fidelity limits and safety nets: numbers keep their BSON type and
 * operators that would lose it fail loudly (numeric-expressions.ts), fast-path updates give
 * mingo's results, and non-transactional writes never clash with a running
 * transaction's uncommitted unique keys (they wait, then see E11000).
 */
import { Decimal128, Double, Long, MongoClient, MongoServerError, type Collection, type Document } from 'mongodb';
import { startEmulator, type RunningEmulator } from '../../test-backend/emulator';
import { serverError } from './support/errors';

let emu: RunningEmulator;
let client: MongoClient;

beforeAll(async () => {
  emu = await startEmulator();
  client = new MongoClient(emu.uri, { serverSelectionTimeoutMS: 5_000 });
  await client.connect();
});

afterAll(async () => {
  await client.close();
  await emu.stop();
});

test('numbers keep their BSON type, so $type on a numeric type answers; operators that would lose the type refuse', async () => {
  const c = client.db('fid').collection<{ _id: number } & Document>('types');
  await c.insertOne({ _id: 1, a: 1, d: new Double(1), l: Long.fromNumber(1), s: 'x' });
  expect(await c.countDocuments({ a: { $type: 'int' } })).toBe(1);
  expect(await c.countDocuments({ d: { $type: 'double' } })).toBe(1);
  expect(await c.countDocuments({ l: { $type: 18 } })).toBe(1);
  expect(await c.countDocuments({ $or: [{ a: { $type: ['long', 'string'] } }] })).toBe(0);
  expect(await c.countDocuments({ s: { $type: 'string' } })).toBe(1);
  expect(await c.countDocuments({ a: { $type: 'number' } })).toBe(1);
  const [types] = await c.aggregate([{ $project: { _id: 0, a: { $type: '$a' }, d: { $type: '$d' }, l: { $type: '$l' } } }]).toArray();
  expect(types).toEqual({ a: 'int', d: 'double', l: 'long' });
  // A mingo operator that would treat the Long as an opaque object is refused, never answered.
  const e = await serverError(c.aggregate([{ $project: { u: { $setUnion: [['$l'], [1]] } } }]).toArray());
  expect(e.codeName).toBe('NotImplemented');
});

test('simple $set/$inc and constant pipeline updates give the same documents as the general path', async () => {
  const c: Collection<{ _id: number } & Document> = client.db('fid').collection('upd');
  await c.insertOne({ _id: 1, a: 1, nested: { x: 1 }, list: [1, 2] });
  await c.updateOne({ _id: 1 }, { $set: { b: 'new', a: 2 }, $inc: { n: 3 } });
  await c.updateOne({ _id: 1 }, { $inc: { n: 2.5, a: -1 } });
  expect(await c.findOne({ _id: 1 })).toEqual({ _id: 1, a: 1, nested: { x: 1 }, list: [1, 2], b: 'new', n: 5.5 });
  // Same modifier through the general path (a dotted field forces it): identical shape and order.
  await c.insertOne({ _id: 2, a: 1, nested: { x: 1 }, list: [1, 2] });
  await c.updateOne({ _id: 2 }, { $set: { b: 'new', a: 2, 'nested.x': 1 }, $inc: { n: 3 } });
  await c.updateOne({ _id: 2 }, { $inc: { n: 2.5, a: -1 } });
  const two = await c.findOne({ _id: 2 });
  expect(Object.keys(two!)).toEqual(['_id', 'a', 'nested', 'list', 'b', 'n']);
  expect(two).toEqual({ _id: 2, a: 1, nested: { x: 1 }, list: [1, 2], b: 'new', n: 5.5 });
  // $inc on a non-number still fails as mongod does (general path).
  const e = await serverError(c.updateOne({ _id: 1 }, { $inc: { b: 1 } }));
  expect(e.message).toMatch(/non-numeric|numeric/i);
  const at = new Date('2030-01-01T00:00:00Z');
  const r = await c.updateOne({ _id: 1 }, [{ $set: { at, k: { $literal: '$notAPath' } } }]);
  expect(r.modifiedCount).toBe(1);
  expect(await c.findOne({ _id: 1 }, { projection: { at: 1, k: 1 } })).toEqual({ _id: 1, at, k: '$notAPath' });
  const same = await c.updateOne({ _id: 1 }, { $set: { a: 1 } });
  expect(same.modifiedCount).toBe(0);
});

test('a non-transactional insert waits for a transaction holding the same unique key, then fails with E11000', async () => {
  const db = client.db('fid');
  const c = db.collection<{ _id: number; email: string }>('uniq');
  await c.createIndex({ email: 1 }, { unique: true });
  const session = client.startSession();
  try {
    session.startTransaction();
    await c.insertOne({ _id: 1, email: 'x@y.io' }, { session });
    let settled = false;
    const outside = c.insertOne({ _id: 2, email: 'x@y.io' }).then(
      () => {
        settled = true;
        return undefined;
      },
      (err: unknown) => {
        settled = true;
        return err;
      },
    );
    await new Promise((r) => setTimeout(r, 200));
    expect(settled).toBe(false); // blocked behind the transaction, like mongod
    await session.commitTransaction();
    const err = await outside;
    expect(err).toBeInstanceOf(MongoServerError);
    expect((err as MongoServerError).code).toBe(11000);
    expect(await c.find().toArray()).toEqual([{ _id: 1, email: 'x@y.io' }]);
  } finally {
    await session.endSession();
  }
});

test('after an aborted transaction the waiting insert succeeds', async () => {
  const c = client.db('fid').collection<{ _id: number; email: string }>('uniq2');
  await c.createIndex({ email: 1 }, { unique: true });
  const session = client.startSession();
  try {
    session.startTransaction();
    await c.insertOne({ _id: 1, email: 'x@y.io' }, { session });
    const outside = c.insertOne({ _id: 2, email: 'x@y.io' });
    await new Promise((r) => setTimeout(r, 100));
    await session.abortTransaction();
    await outside;
    expect(await c.find().toArray()).toEqual([{ _id: 2, email: 'x@y.io' }]);
  } finally {
    await session.endSession();
  }
});

// Issue 9 item 6, "loud where unsupported": every feature the emulator does not implement answers
// NotImplemented (238) naming the feature, never a wrong answer or mongod's CommandNotFound.
test('unsupported features answer NotImplemented naming the feature', async () => {
  const db = client.db('fid');
  const c = db.collection<{ _id: number } & Document>('loud');
  await c.insertOne({ _id: 1, loc: [0, 0], s: 'x' });
  const cases: Array<[string, () => Promise<unknown>]> = [
    ['$where', () => c.find({ $where: 'this.s == "x"' } as Document).toArray()],
    ['$text', () => c.find({ $text: { $search: 'x' } } as Document).toArray()],
    ['$geoWithin', () => c.find({ loc: { $geoWithin: { $center: [[0, 0], 1] } } } as Document).toArray()],
    ['$near', () => c.find({ loc: { $near: [0, 0] } } as Document).toArray()],
    ['2dsphere', () => c.createIndex({ loc: '2dsphere' })],
    ['text search', () => c.createIndex({ s: 'text' })],
    ['collation', () => c.find({}, { collation: { locale: 'en' } }).toArray()],
    ['capped', () => db.createCollection('capped', { capped: true, size: 4096 })],
    ['timeseries', () => db.createCollection('ts', { timeseries: { timeField: 't' } })],
    ['collMod', () => db.command({ collMod: 'loud', index: { name: '_id_', hidden: true } })],
    ['renameCollection', () => client.db('admin').command({ renameCollection: 'fid.loud', to: 'other.loud2' })],
  ];
  for (const [feature, p] of cases) {
    const e = await serverError(p());
    expect({ feature, code: e.code, codeName: e.codeName, named: e.message.includes(feature) }).toEqual({ feature, code: 238, codeName: 'NotImplemented', named: true });
  }
  expect(await c.find().toArray()).toEqual([{ _id: 1, loc: [0, 0], s: 'x' }]);
});

// mongod returns the documents of a hinted index scan in index order (no sort needed).
test('a hinted index scan returns documents in index order', async () => {
  const c = client.db('fid').collection<{ _id: number } & Document>('hint_order');
  await c.insertMany([{ _id: 1, name: 'Betty' }, { _id: 2, name: 'Andrew' }, { _id: 3, name: 'Carl' }]);
  await c.createIndex({ name: 1 });
  expect((await c.find({}).hint({ name: 1 }).toArray()).map((d) => d.name)).toEqual(['Andrew', 'Betty', 'Carl']);
  expect((await c.aggregate([{ $project: { name: 1 } }], { hint: { name: 1 } }).toArray()).map((d) => d.name)).toEqual(['Andrew', 'Betty', 'Carl']);
});

// numbers.ts sumNumbers: mongod adds Decimal128 operands to Decimal128() and then the converted
// double-double total; the exponent of that zero differs between releases (0E-6176 in older
// decimal128.cpp, 0E0 in newer decimal128.h), so the digits of a decimal sum are refused, not guessed.
// numeric-expressions.ts $sum: a computed argument over doubles may be folded by mongod into a constant
// (summed plainly) or not (compensated), so it is refused.
test('decimal sums and $sum of computed double expressions refuse', async () => {
  const c = client.db('fid').collection<{ _id: number } & Document>('decsum');
  await c.insertOne({ _id: 1, g: 1, x: 1.5 });
  const cases: Array<[string, Document[]]> = [
    ['Decimal128', [{ $project: { r: { $add: [1, Decimal128.fromString('0.10')] } } }]],
    ['Decimal128', [{ $project: { r: { $sum: [Decimal128.fromString('0.10')] } } }]],
    ['$sum of a computed expression', [{ $group: { _id: '$g', r: { $sum: { $multiply: ['$x', 2] } } } }]],
  ];
  for (const [feature, pipeline] of cases) {
    const e = await serverError(c.aggregate(pipeline).toArray());
    expect({ feature, code: e.code, named: e.message.includes(feature) }).toEqual({ feature, code: 238, named: true });
  }
});
