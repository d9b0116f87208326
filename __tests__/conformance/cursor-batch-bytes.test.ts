/**
 * A cursor batch holds at most 16 MiB of documents, as on mongod; the rest follows by getMore.
 *
 * Source (mongodb/mongo): FindCommon::haveSpaceForNext (src/mongo/db/query/find_common.cpp)
 * admits the first document of a batch whatever its size ("to ensure we can always make
 * progress"), then the next only while the batch stays within kMaxBytesToReturnToClientAtOnce =
 * BSONObjMaxUserSize (16 MiB); the cursor is kept while documents remain (shouldSaveCursor,
 * src/mongo/db/query/find.cpp). The emulator returned every requested document in one batch,
 * whatever the bytes, so code that relied on one batch (`singleBatch`) never saw a batch cut short.
 */
import type { Document, MongoClient } from 'mongodb';
import { openClient, uniqueDbName } from './support/server';

const dbName = uniqueDbName('conf_batch_bytes');
let client: MongoClient;

beforeAll(async () => {
  client = await openClient();
  // Three documents of 7 MiB: two fit in one 16 MiB batch, the third does not.
  const big = (c: string) => ({ _id: c, pad: c.repeat(7 * 1024 * 1024) });
  await client.db(dbName).collection<{ _id: string; pad: string }>('big').insertMany([big('a'), big('b'), big('c')]);
}, 60_000);

afterAll(async () => {
  await client.db(dbName).dropDatabase();
  await client.close();
});

test('find stops its first batch at 16 MiB of documents and getMore returns the rest', async () => {
  const db = client.db(dbName);
  const first = await db.command({ find: 'big', sort: { _id: 1 }, batchSize: 10, projection: { _id: 1, pad: 1 } });
  const firstBatch = (first.cursor as { firstBatch: Document[] }).firstBatch;
  expect(firstBatch.map((d) => d._id)).toEqual(['a', 'b']);
  const id = (first.cursor as { id: unknown }).id;
  expect(String(id)).not.toBe('0');
  const more = await db.command({ getMore: id, collection: 'big', batchSize: 10 });
  const nextBatch = (more.cursor as { nextBatch: Document[] }).nextBatch;
  expect(nextBatch.map((d) => d._id)).toEqual(['c']);
  expect(String((more.cursor as { id: unknown }).id)).toBe('0');
}, 60_000);

test('singleBatch closes the cursor after a batch cut at 16 MiB (the third document is not returned)', async () => {
  const reply = await client.db(dbName).command({ find: 'big', sort: { _id: 1 }, batchSize: 10, singleBatch: true });
  expect((reply.cursor as { firstBatch: Document[] }).firstBatch.map((d) => d._id)).toEqual(['a', 'b']);
  expect(String((reply.cursor as { id: unknown }).id)).toBe('0');
}, 60_000);
