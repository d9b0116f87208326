/**
 * An `update` command of many pipeline upsert statements, as Model.lockMany sends it (issue 17):
 * per-statement results, one `$$NOW` for every statement, `ordered: false` going on after a
 * statement's error, and the batch-size bounds.
 *
 * Sources (MongoDB server, mongodb/mongo):
 *  - src/mongo/db/query/write_ops/write_ops_exec.cpp (@04682736), performUpdates: one
 *    `runtimeConstants` for the command ("These constants are applied to each update in the
 *    batch"), then one performSingleUpdateOpWithDupKeyRetry per statement, in order; a statement's
 *    exception goes through handleError, which records a write error with the statement's index and
 *    stops the batch only when `ordered` (interruptions fail the whole command).
 *  - performSingleUpdateOpNoRetry: a statement's result is `n` = 1 when it upserted, else the
 *    number matched; `nModified` = documents actually changed (a binary-equal result is a no-op,
 *    update_stage.cpp); the upserted `_id` with the statement's index (`upserted: [{ index, _id }]`).
 *  - src/mongo/db/query/write_ops/write_ops.cpp (@078f8f89), checkOpCountForCommand: InvalidLength
 *    (16), "Write batch sizes must be between 1 and 100000. Got <n> operations.", when a write
 *    command has no statement or more than write_ops::kMaxWriteBatchSize (100,000).
 *  - shouldRetryDuplicateKeyException (same file): a duplicate key on an index other than the one
 *    the query's equalities cover is not retried; the statement fails with 11000.
 *  - jstests/noPassthrough/update_now_clustertime_replset.js: every statement of one update
 *    command sees the same `$$NOW`.
 */
import type { Db, MongoClient } from 'mongodb';
import { expectServerError, openClient, uniqueDbName } from './support/server';

const dbName = uniqueDbName('conf_bulk_upserts');
let client: MongoClient;
let db: Db;

beforeAll(async () => {
  client = await openClient();
  db = client.db(dbName);
});

afterAll(async () => {
  await db.dropDatabase();
  await client.close();
});

/** lockMany's statement: take the record unless someone else's unexpired grant is in it. */
const take = (id: string, owner: string) => ({
  q: { _id: id },
  u: [
    {
      $set: {
        owner: { $cond: [{ $or: [{ $eq: [{ $ifNull: ['$owner', null] }, null] }, { $eq: ['$owner', { $literal: owner }] }] }, { $literal: owner }, '$owner'] },
        at: { $cond: [{ $or: [{ $eq: [{ $ifNull: ['$owner', null] }, null] }, { $eq: ['$owner', { $literal: owner }] }] }, '$$NOW', '$at'] },
      },
    },
  ],
  upsert: true,
});

test('per-statement results: inserted statements are reported with their index, a no-op counts in n but not in nModified', async () => {
  const coll = db.collection<{ _id: string; owner: string; at: Date }>('results');
  await coll.insertOne({ _id: 'held', owner: 'other', at: new Date(0) });
  await coll.insertOne({ _id: 'mine', owner: 'me', at: new Date(0) });
  const reply = await db.command({ update: 'results', ordered: false, updates: [take('new1', 'me'), take('held', 'me'), take('mine', 'me'), take('new2', 'me')] });
  expect(reply.ok).toBe(1);
  // new1 and new2 inserted (n 1 each), held matched but unchanged (n 1, nModified 0), mine changed.
  expect(reply.n).toBe(4);
  expect(reply.nModified).toBe(1);
  expect(reply.upserted).toEqual([
    { index: 0, _id: 'new1' },
    { index: 3, _id: 'new2' },
  ]);
  expect(reply.writeErrors).toBeUndefined();
  const held = await coll.findOne({ _id: 'held' });
  expect(held).toEqual({ _id: 'held', owner: 'other', at: new Date(0) });
});

test('every statement of one command sees the same $$NOW', async () => {
  const updates = Array.from({ length: 50 }, (_, i) => take(`t${i}`, 'me'));
  const reply = await db.command({ update: 'now', ordered: false, updates });
  expect(reply.upserted).toHaveLength(50);
  const times = new Set((await db.collection('now').find().toArray()).map((d) => (d.at as Date).getTime()));
  expect(times.size).toBe(1);
});

describe('a statement that fails with a duplicate key on another unique index', () => {
  beforeAll(async () => {
    await db.collection('dups').createIndex({ u: 1 }, { unique: true });
    await db.collection<{ _id: string; u: number }>('dups').insertOne({ _id: 'first', u: 1 });
  });

  const statements = () => [
    { q: { _id: 'a' }, u: [{ $set: { u: 2 } }], upsert: true },
    { q: { _id: 'b' }, u: [{ $set: { u: 1 } }], upsert: true },
    { q: { _id: 'c' }, u: [{ $set: { u: 3 } }], upsert: true },
  ];

  test('ordered: false: a write error at its index, the other statements still run', async () => {
    const reply = await db.command({ update: 'dups', ordered: false, updates: statements() });
    expect(reply.ok).toBe(1);
    expect(reply.n).toBe(2);
    expect(reply.upserted).toEqual([
      { index: 0, _id: 'a' },
      { index: 2, _id: 'c' },
    ]);
    expect(reply.writeErrors).toHaveLength(1);
    expect(reply.writeErrors[0].index).toBe(1);
    expect(reply.writeErrors[0].code).toBe(11000);
    await db.collection<{ _id: string }>('dups').deleteMany({ _id: { $in: ['a', 'c'] } });
  });

  test('ordered: true: the batch stops at the failing statement', async () => {
    const reply = await db.command({ update: 'dups', ordered: true, updates: statements() });
    expect(reply.n).toBe(1);
    expect(reply.upserted).toEqual([{ index: 0, _id: 'a' }]);
    expect(reply.writeErrors.map((e: { index: number }) => e.index)).toEqual([1]);
    expect(await db.collection<{ _id: string }>('dups').countDocuments({ _id: 'c' })).toBe(0);
  });
});

describe('batch size: 1 to 100,000 statements (checkOpCountForCommand)', () => {
  test.each([
    ['update', { update: 'bounds', updates: [] }],
    ['delete', { delete: 'bounds', deletes: [] }],
    ['insert', { insert: 'bounds', documents: [] }],
  ])('%s with no statement: InvalidLength', async (_name, command) => {
    const error = await expectServerError(db.command(command), 16);
    expect(error.codeName).toBe('InvalidLength');
    expect(error.message).toBe('Write batch sizes must be between 1 and 100000. Got 0 operations.');
  });

  test('an update of 100,001 statements: InvalidLength, nothing written', async () => {
    const updates = Array.from({ length: 100_001 }, (_, i) => ({ q: { _id: i }, u: { $set: { a: 1 } }, upsert: true }));
    const error = await expectServerError(db.command({ update: 'bounds', updates }), 16);
    expect(error.message).toBe('Write batch sizes must be between 1 and 100000. Got 100001 operations.');
    expect(await db.collection('bounds').countDocuments()).toBe(0);
  }, 60_000);
});
