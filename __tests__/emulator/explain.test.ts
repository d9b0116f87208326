/**
 * explain reports the access path the emulator really takes (the same
 * chooseAccessPath decision View.candidates executes) and never writes.
 */
import { MongoClient, type Collection, type Document } from 'mongodb';
import { startEmulator, type RunningEmulator } from '../../test-backend/emulator';
import { serverError } from './support/errors';

let emu: RunningEmulator;
let client: MongoClient;
type Lock = { _id: string } & Document;
let locks: Collection<Lock>;

const LOCK_FILTER = { _id: 'doc-1', $or: [{ owner: 'me' }, { $expr: { $lte: ['$expiresAt', '$$NOW'] } }] };

beforeAll(async () => {
  emu = await startEmulator();
  client = new MongoClient(emu.uri, { serverSelectionTimeoutMS: 5_000 });
  await client.connect();
  locks = client.db('explain').collection<Lock>('locks');
  await locks.createIndex({ owner: 1 }, { name: 'owner_idx' });
  await locks.insertMany([
    { _id: 'doc-1', owner: 'me', expiresAt: new Date(Date.now() + 60_000), n: 1 },
    { _id: 'doc-2', owner: 'you', expiresAt: new Date(Date.now() - 60_000), n: 2 },
    { _id: 'doc-3', owner: 'you', expiresAt: new Date(Date.now() + 60_000), n: 3 },
  ]);
});

afterAll(async () => {
  await client.close();
  await emu.stop();
});

async function explainCmd(inner: Document, verbosity = 'queryPlanner'): Promise<Document> {
  return client.db('explain').command({ explain: inner, verbosity });
}

test('the reply has mongod explain shape', async () => {
  const r = await explainCmd({ find: 'locks', filter: { _id: 'doc-1' } });
  expect(r.ok).toBe(1);
  expect(r.explainVersion).toBe('1');
  expect(r.queryPlanner).toEqual({ namespace: 'explain.locks', parsedQuery: { _id: 'doc-1' }, winningPlan: { stage: 'IDHACK' }, rejectedPlans: [] });
  expect(r.command).toMatchObject({ find: 'locks', filter: { _id: 'doc-1' }, $db: 'explain' });
  expect(r.serverInfo).toMatchObject({ version: expect.any(String), host: expect.any(String), port: expect.any(Number) });
});

test('_id equality alone is IDHACK through the driver (default verbosity runs the read)', async () => {
  const r = await locks.find({ _id: 'doc-2' }).explain();
  expect(r.queryPlanner.winningPlan).toEqual({ stage: 'IDHACK' });
  expect(r.executionStats).toMatchObject({ executionSuccess: true, nReturned: 1, totalDocsExamined: 1, totalKeysExamined: 1 });
  const q = await locks.find({ _id: 'doc-2' }).explain('queryPlanner');
  expect(q.executionStats).toBeUndefined();
});

/** The IXSCAN stage mongod writes (plan_explainer_impl.cpp statsToBSON) for a non-multikey index. */
function ixscan(indexName: string, keyPattern: Document, indexBounds: Document, extra: Document = {}): Document {
  return {
    stage: 'IXSCAN',
    keyPattern,
    indexName,
    isMultiKey: false,
    multiKeyPaths: Object.fromEntries(Object.keys(keyPattern).map((f) => [f, []])),
    isUnique: indexName === '_id_',
    isSparse: false,
    isPartial: false,
    indexVersion: 2,
    direction: 'forward',
    indexBounds,
    ...extra,
  };
}

test('_id equality with other predicates is FETCH over the _id index, not IDHACK (isSimpleIdQuery)', async () => {
  // query_utils.cpp isSimpleIdQuery: IDHACK only when the filter is `_id` equality alone.
  const r = await explainCmd({ findAndModify: 'locks', query: LOCK_FILTER, update: { $set: { owner: 'me' } }, upsert: true, new: true });
  expect(r.queryPlanner.parsedQuery).toEqual(LOCK_FILTER);
  const fetch = { stage: 'FETCH', filter: { $or: LOCK_FILTER.$or }, inputStage: ixscan('_id_', { _id: 1 }, { _id: ['["doc-1", "doc-1"]'] }) };
  expect(r.queryPlanner.winningPlan).toEqual({ stage: 'UPDATE', inputStage: fetch });
  const f = await locks.find(LOCK_FILTER).explain('executionStats');
  expect(f.queryPlanner.winningPlan).toEqual(fetch);
  expect(f.executionStats).toMatchObject({ nReturned: 1, totalDocsExamined: 1, totalKeysExamined: 1 });
});

test('equality on a single-field indexed field is FETCH over IXSCAN, the equality answered by the bounds', async () => {
  const r = await locks.find({ owner: 'you' }).explain();
  // The point bounds answer `owner` exactly: no FETCH filter is left (index_bounds_builder.cpp: EXACT).
  expect(r.queryPlanner.winningPlan).toEqual({ stage: 'FETCH', inputStage: ixscan('owner_idx', { owner: 1 }, { owner: ['["you", "you"]'] }) });
  // Only the two index entries are examined, not the whole collection.
  expect(r.executionStats).toMatchObject({ nReturned: 2, totalDocsExamined: 2, totalKeysExamined: 2 });
});

test('an unindexed field is COLLSCAN; a range on an indexed field is an IXSCAN within its type bracket', async () => {
  const r = await locks.find({ n: 2 }).explain('queryPlanner');
  expect(r.queryPlanner.winningPlan).toEqual({ stage: 'COLLSCAN', filter: { n: 2 }, direction: 'forward' });
  // $gt on a string: from the value to the end of the strings, {} excluded (BSONObjBuilder::appendMaxForType).
  const range = await locks.find({ owner: { $gt: 'a' } }).explain('executionStats');
  expect(range.queryPlanner.winningPlan).toEqual({ stage: 'FETCH', inputStage: ixscan('owner_idx', { owner: 1 }, { owner: ['("a", {})'] }) });
  expect(range.executionStats).toMatchObject({ nReturned: 3, totalDocsExamined: 3, totalKeysExamined: 3 });
});

test('find sort/skip/limit/projection and count are wrapped like mongod', async () => {
  const r = await locks.find({ n: { $gte: 1 } }, { projection: { n: 1 } }).sort({ n: -1 }).skip(1).limit(1).explain('executionStats');
  expect(r.queryPlanner.winningPlan).toMatchObject({
    stage: 'PROJECTION_DEFAULT',
    inputStage: { stage: 'LIMIT', limitAmount: 1, inputStage: { stage: 'SKIP', skipAmount: 1, inputStage: { stage: 'SORT', sortPattern: { n: -1 }, inputStage: { stage: 'COLLSCAN' } } } },
  });
  expect(r.executionStats.nReturned).toBe(1);
  const c = await explainCmd({ count: 'locks', query: { owner: 'you' } }, 'executionStats');
  expect(c.queryPlanner.winningPlan).toMatchObject({ stage: 'COUNT', inputStage: { stage: 'FETCH', inputStage: { stage: 'IXSCAN', indexName: 'owner_idx' } } });
  expect(c.executionStats.executionStages).toMatchObject({ stage: 'COUNT', nCounted: 2 });
});

test('update, delete and findAndModify explains are wrapped and never write', async () => {
  const before = await locks.find({}).sort({ _id: 1 }).toArray();
  const u = await explainCmd({ update: 'locks', updates: [{ q: { _id: 'doc-1' }, u: { $set: { owner: 'thief' } }, upsert: true }] });
  expect(u.queryPlanner.winningPlan).toEqual({ stage: 'UPDATE', inputStage: { stage: 'IDHACK' } });
  const upsertNew = await explainCmd({ update: 'locks', updates: [{ q: { _id: 'nope' }, u: { $set: { owner: 'x' } }, upsert: true }] });
  expect(upsertNew.queryPlanner.winningPlan.stage).toBe('UPDATE');
  const d = await explainCmd({ delete: 'locks', deletes: [{ q: { owner: 'you' }, limit: 0 }] });
  expect(d.queryPlanner.winningPlan).toMatchObject({ stage: 'DELETE', inputStage: { stage: 'FETCH', inputStage: { stage: 'IXSCAN', indexName: 'owner_idx' } } });
  const fr = await explainCmd({ findAndModify: 'locks', query: { n: 3 }, remove: true, sort: { n: 1 } });
  expect(fr.queryPlanner.winningPlan).toEqual({
    stage: 'DELETE',
    inputStage: { stage: 'SORT', sortPattern: { n: 1 }, inputStage: { stage: 'COLLSCAN', filter: { n: 3 }, direction: 'forward' } },
  });
  expect(await locks.find({}).sort({ _id: 1 }).toArray()).toEqual(before);
  expect(await locks.countDocuments({ _id: 'nope' })).toBe(0);
});

test('write explains with executionStats, unknown verbosities and undescribable commands fail loudly', async () => {
  const e = await serverError(explainCmd({ update: 'locks', updates: [{ q: { _id: 'doc-1' }, u: { $set: { n: 9 } } }] }, 'executionStats'));
  expect(e.codeName).toBe('NotImplemented');
  expect(e.message).toContain("'executionStats'");
  expect((await locks.findOne({ _id: 'doc-1' }))?.n).toBe(1);
  expect((await serverError(explainCmd({ find: 'locks' }, 'verbose'))).codeName).toBe('BadValue');
  expect((await serverError(explainCmd({ distinct: 'locks', key: 'n' }))).codeName).toBe('NotImplemented');
  const two = await serverError(explainCmd({ delete: 'locks', deletes: [{ q: {}, limit: 0 }, { q: {}, limit: 0 }] }));
  expect(two.code).toBe(16);
});

test('aggregate: the leading $match is planned, later stages listed, change streams refused', async () => {
  const only = await locks.aggregate([{ $match: { _id: 'doc-3' } }]).explain('executionStats');
  expect(only.queryPlanner.winningPlan).toEqual({ stage: 'IDHACK' });
  expect(only.executionStats.nReturned).toBe(1);
  const more = await explainCmd({ aggregate: 'locks', pipeline: [{ $match: { owner: 'you' } }, { $group: { _id: null, n: { $sum: 1 } } }], cursor: {} });
  expect(more.stages[0].$cursor.queryPlanner.winningPlan).toMatchObject({ stage: 'FETCH', inputStage: { stage: 'IXSCAN', indexName: 'owner_idx' } });
  expect(more.stages[1]).toEqual({ $group: { _id: null, n: { $sum: 1 } } });
  const cs = await serverError(explainCmd({ aggregate: 'locks', pipeline: [{ $changeStream: {} }], cursor: {} }));
  expect(cs.codeName).toBe('NotImplemented');
});

test('a missing collection is EOF', async () => {
  const r = await explainCmd({ find: 'missing', filter: { a: 1 } });
  expect(r.queryPlanner.winningPlan).toEqual({ stage: 'EOF' });
});
