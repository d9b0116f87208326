/**
 * Where mongod accepts a request whose behaviour the emulator lacks, the emulator answers
 * NotImplemented (238) naming the feature, never mongod's refusal codes and never a silent ignore
 * (test-backend/emulator/FIDELITY.md). These are the boundaries of the refusal rules added with the
 * conformance tests __tests__/conformance/refusals-*.test.ts.
 */
import { Binary, Long, MongoClient, MongoServerError, type Document } from 'mongodb';
import { startEmulator, type RunningEmulator } from '../../test-backend/emulator';

let emu: RunningEmulator;
let client: MongoClient;

beforeAll(async () => {
  emu = await startEmulator();
  client = await new MongoClient(emu.uri).connect();
  await client.db('b').collection('c').insertOne({ _id: 1, s: 'a' } as Document);
});

afterAll(async () => {
  await client.close();
  await emu.stop();
});

async function notImplemented(p: Promise<unknown>, feature: RegExp): Promise<void> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(MongoServerError);
  expect({ code: (e as MongoServerError).code, codeName: (e as MongoServerError).codeName }).toEqual({ code: 238, codeName: 'NotImplemented' });
  expect((e as MongoServerError).message).toMatch(feature);
}

test('fields mongod accepts but the emulator does not implement', async () => {
  const db = client.db('b');
  await notImplemented(db.command({ find: 'c', collectionUUID: new Binary(Buffer.alloc(16), 4) }), /FindCommandRequest field 'collectionUUID'/);
  await notImplemented(db.command({ insert: 'c', documents: [{ _id: 2 }], stmtIds: [0] }), /insert field 'stmtIds'/);
  await notImplemented(db.command({ update: 'c', updates: [{ q: {}, u: [{ $set: { a: 1 } }], upsertSupplied: true }] }), /update.updates field 'upsertSupplied'/);
  await notImplemented(db.command({ find: 'c', help: true }), /generic argument 'help'/);
  expect(await db.collection('c').countDocuments()).toBe(1);
});

test('constants (c) in a pipeline update: mongod binds them, the emulator does not', async () => {
  const reply = await client.db('b').command({ update: 'c', updates: [{ q: { _id: 1 }, u: [{ $set: { v: '$$k' } }], c: { k: 1 } }] });
  expect((reply.writeErrors as Document[]).map((e) => [e.code, e.codeName])).toEqual([[238, 'NotImplemented']]);
  expect(await client.db('b').collection('c').findOne({ _id: 1 as never })).toEqual({ _id: 1, s: 'a' });
});

test("the regex option 'x' (valid on mongod, no JavaScript equivalent)", async () => {
  await notImplemented(client.db('b').command({ find: 'c', filter: { s: { $regex: 'a', $options: 'x' } } }), /regex option 'x'/);
});

test('session fields whose mongod answer is not sourced here', async () => {
  const session = client.startSession();
  try {
    await notImplemented(client.db('admin').command({ ping: 1, txnNumber: Long.fromNumber(1) }, { session }), /txnNumber or autocommit on 'ping'/);
    await notImplemented(client.db('b').command({ insert: 'c', documents: [{ _id: 3 }], txnNumber: Long.fromNumber(1), txnRetryCounter: 0 }, { session }), /txnRetryCounter/);
  } finally {
    await session.endSession();
  }
});

test('a multi-update failing on a later document after earlier ones changed (mongod keeps those writes)', async () => {
  const c = client.db('b').collection('multi');
  await c.insertMany([{ _id: 1, a: {} }, { _id: 2, a: 1 }] as Document[]);
  const reply = await client.db('b').command({ update: 'multi', updates: [{ q: {}, u: { $set: { 'a.b': 1 } }, multi: true }] });
  expect((reply.writeErrors as Document[]).map((e) => [e.code, e.codeName])).toEqual([[238, 'NotImplemented']]);
  expect(await c.find().sort({ _id: 1 }).toArray()).toEqual([{ _id: 1, a: {} }, { _id: 2, a: 1 }]);
});

test('a wildcard index (a valid key pattern on mongod) is not implemented', async () => {
  await notImplemented(client.db('b').command({ createIndexes: 'c', indexes: [{ key: { '$**': 1 }, name: 'w' }] }), /wildcard index on '\$\*\*'/);
  await notImplemented(client.db('b').command({ createIndexes: 'c', indexes: [{ key: { 'a.$**': 1 }, name: 'aw' }] }), /wildcard index on 'a\.\$\*\*'/);
  expect((await client.db('b').collection('c').listIndexes().toArray()).map((i) => i.name)).toEqual(['_id_']);
});
