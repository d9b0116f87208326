/**
 * The emulator's loud refusals around $out / $merge (test-backend/emulator/aggregate-write.ts):
 * what mongod does there was not sourced, so the emulator answers NotImplemented (238) and writes
 * nothing. mongod's own behaviour is covered by __tests__/conformance/aggregate-out-merge.test.ts.
 */
import { MongoClient, type Db } from 'mongodb';
import { startEmulator, type RunningEmulator } from '../../test-backend/emulator';
import { serverError } from './support/errors';

let emu: RunningEmulator;
let client: MongoClient;
let db: Db;

beforeAll(async () => {
  emu = await startEmulator();
  client = new MongoClient(emu.uri, { serverSelectionTimeoutMS: 5_000 });
  await client.connect();
  db = client.db('aggwrite');
  await db.collection<{ _id: number }>('src').insertMany([{ _id: 1 }, { _id: 2 }]);
});

afterAll(async () => {
  await client.close();
  await emu.stop();
});

async function notImplemented(p: Promise<unknown>, what: RegExp): Promise<void> {
  const e = await serverError(p);
  expect(e.code).toBe(238);
  expect(e.message).toMatch(what);
}

test('$out / $merge inside a sub-pipeline are refused, nothing is written', async () => {
  await notImplemented(db.command({ aggregate: 'src', pipeline: [{ $facet: { a: [{ $out: 'nested' }] } }], cursor: {} }), /\$out inside a sub-pipeline/);
  await notImplemented(db.command({ aggregate: 'src', pipeline: [{ $lookup: { from: 'src', pipeline: [{ $merge: 'nested' }], as: 'x' } }], cursor: {} }), /\$merge inside a sub-pipeline/);
  expect(await db.listCollections({ name: 'nested' }).toArray()).toEqual([]);
});

test('explain of a pipeline with $out / $merge is refused', async () => {
  await notImplemented(db.command({ explain: { aggregate: 'src', pipeline: [{ $out: 'x' }], cursor: {} } }), /explain of an aggregation with \$out/);
  await notImplemented(db.command({ explain: { aggregate: 'src', pipeline: [{ $merge: 'x' }], cursor: {} } }), /explain of an aggregation with \$merge/);
});

test('$out into a database a change stream watches is refused; $merge writes and the stream sees its events', async () => {
  const stream = db.collection('watched').watch();
  try {
    await stream.tryNext(); // opens the server-side stream
    await notImplemented(db.command({ aggregate: 'src', pipeline: [{ $out: 'watched' }], cursor: {} }), /\$out into database 'aggwrite' while a change stream watches it/);
    expect(await db.listCollections({ name: 'watched' }).toArray()).toEqual([]);
    await db.command({ aggregate: 'src', pipeline: [{ $merge: 'watched' }], cursor: {} });
    const first = await stream.next();
    expect(first.operationType).toBe('insert');
  } finally {
    await stream.close();
  }
  // With the stream closed, $out runs.
  await db.command({ aggregate: 'src', pipeline: [{ $out: 'watched' }], cursor: {} });
  expect(await db.collection('watched').countDocuments()).toBe(2);
});

test('unsourced $merge shapes are refused: a non-update stage in whenMatched, an aggregate let with a whenMatched pipeline', async () => {
  await notImplemented(db.command({ aggregate: 'src', pipeline: [{ $merge: { into: 't', whenMatched: [{ $match: {} }] } }], cursor: {} }), /whenMatched pipeline stage/);
  await notImplemented(db.command({ aggregate: 'src', pipeline: [{ $merge: { into: 't', whenMatched: [{ $set: { a: 1 } }] } }], cursor: {}, let: { v: 1 } }), /aggregate 'let' together with a \$merge whenMatched pipeline/);
  expect(await db.listCollections({ name: 't' }).toArray()).toEqual([]);
});
