/**
 * The planner's index scans answer exactly what a collection scan answers (planner.ts,
 * index-bounds.ts, query.ts): random documents of every BSON type the bounds bracket (numbers of
 * four types, NaN and infinities, strings with surrogates, ObjectIds, dates, booleans, null,
 * missing fields, arrays, empty arrays, documents), random queries of the planned shapes
 * (equality, `$in` with null / regular expressions / arrays, ranges, compound prefixes, `$and`,
 * `$expr` residuals, sorts with skip and limit), compared with the same command forced to a
 * collection scan by `hint: { $natural: 1 }` (QueryPlanner::plan). Also writes (updateMany,
 * deleteMany, findOneAndUpdate with a sort) on twin collections, reads inside transactions while
 * other clients commit (the transaction's snapshot plus its own writes), and snapshot reads at a
 * past cluster time.
 *
 * A failure prints the seed and the command; MPL_PLANNER_SEED replays one seed, MPL_PLANNER_RUNS=n
 * tries n times as many.
 */
import { Binary, Decimal128, Double, EJSON, Int32, Long, ObjectId, Timestamp, type Document } from 'bson';
import { MongoClient, MongoServerError, type Collection, type Db } from 'mongodb';
import { startEmulator, type RunningEmulator } from '../../test-backend/emulator';
import { compareValues } from '../../test-backend/emulator/bson-order';
import { getPath } from '../../test-backend/emulator/values';

let emu: RunningEmulator;
let client: MongoClient;
let other: MongoClient;

beforeAll(async () => {
  emu = await startEmulator();
  // Wrapper types kept as stored (Int32, Double, Long), so comparisons see exactly what the server holds.
  client = new MongoClient(emu.uri, { promoteValues: false, promoteLongs: false, serverSelectionTimeoutMS: 5_000 });
  other = new MongoClient(emu.uri, { serverSelectionTimeoutMS: 5_000 });
  await client.connect();
  await other.connect();
});

afterAll(async () => {
  await client?.close();
  await other?.close();
  await emu?.stop();
});

/** mulberry32: a small seeded PRNG, so a failing case can be replayed. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

type R = () => number;
const pick = <T>(r: R, list: readonly T[]): T => list[Math.floor(r() * list.length)];
const chance = (r: R, p: number) => r() < p;

const OIDS = Array.from({ length: 6 }, (_, i) => new ObjectId(`65a0000000000000000000${(i * 17).toString(16).padStart(2, '0')}`));
const DATES = [new Date(0), new Date(1_000), new Date(-5_000), new Date(1_700_000_000_000), new Date(1_700_000_000_001)];
const STRINGS = ['', 'a', 'ab', 'b', 'B', 'é', '\u{1F600}', '\uFFFD', 'a\u0000b', 'owner-1', 'owner-2'];
const NUMBERS: unknown[] = [
  0, 1, 2, 3, -1, -3, 1.5, -0.5, 2.5, NaN, Infinity, -Infinity,
  new Double(2), new Int32(2), Long.fromNumber(2), Long.fromString('9007199254740993'), Long.fromString('9007199254740992'),
  Decimal128.fromString('2'), Decimal128.fromString('2.5'), Decimal128.fromString('NaN'), Decimal128.fromString('-Infinity'),
];
const BINARIES = [new Binary(Buffer.from('ab')), new Binary(Buffer.from('b')), new Binary(Buffer.from('ab'), 4), new Binary(Buffer.alloc(0))];
const TIMESTAMPS = [new Timestamp({ t: 1, i: 2 }), new Timestamp({ t: 1, i: 3 }), new Timestamp({ t: 7, i: 0 })];
const SCALARS: unknown[] = [...NUMBERS, ...STRINGS, ...OIDS, ...DATES, ...BINARIES, ...TIMESTAMPS, true, false, null];
const ODD: unknown[] = [{ x: 1 }, { x: 1, y: 2 }, /x/];

/** A field value: mostly scalars, some arrays (multikey), empty arrays, documents. */
function value(r: R, arrays: boolean): unknown {
  const x = r();
  if (arrays && x < 0.12) return Array.from({ length: 1 + Math.floor(r() * 3) }, () => pick(r, SCALARS));
  if (arrays && x < 0.15) return [];
  if (x < 0.19) return pick(r, ODD);
  return pick(r, SCALARS);
}

/** A random document; `undefined` fields are left out (missing). */
function randomDoc(r: R, id: unknown): Document {
  const doc: Document = { _id: id } as Document;
  const set = (k: string, v: unknown) => {
    if (v !== undefined) doc[k] = v;
  };
  set('a', chance(r, 0.1) ? undefined : value(r, chance(r, 0.3)));
  set('b', chance(r, 0.25) ? undefined : value(r, false));
  set('s', chance(r, 0.1) ? undefined : pick(r, [...STRINGS, ...STRINGS, 5, null]));
  set('owner', chance(r, 0.2) ? null : pick(r, ['owner-1', 'owner-2', 'owner-3']));
  set('m', chance(r, 0.2) ? undefined : value(r, true));
  if (chance(r, 0.8)) doc.d = chance(r, 0.1) ? pick(r, [5, 'x', null]) : { e: value(r, false) };
  set('p', chance(r, 0.5) ? undefined : pick(r, NUMBERS));
  set('k', Math.floor(r() * 10));
  set('t', pick(r, DATES));
  return doc;
}

const INDEXES: Array<{ key: Document; name: string; [k: string]: unknown }> = [
  { key: { a: 1 }, name: 'a_1' },
  { key: { a: 1, b: -1 }, name: 'a_1_b_-1' },
  { key: { b: 1 }, name: 'b_1_sparse', sparse: true },
  { key: { s: -1 }, name: 's_-1' },
  { key: { owner: 1, _id: 1 }, name: 'owner_1__id_1' },
  { key: { 'd.e': 1 }, name: 'd.e_1' },
  { key: { m: 1 }, name: 'm_1' },
  { key: { p: 1 }, name: 'p_1_partial', partialFilterExpression: { p: { $exists: true } } },
  { key: { t: 1 }, name: 't_1' },
];
const FIELDS = ['a', 'b', 's', 'owner', 'd.e', 'm', 'p', 't', '_id', 'k'];

function operand(r: R, field: string, ids: unknown[]): unknown {
  if (field === '_id') return chance(r, 0.8) ? pick(r, ids) : pick(r, SCALARS);
  if (field === 'owner') return pick(r, ['owner-1', 'owner-2', 'owner-3', 'owner-9', null]);
  const x = r();
  if (x < 0.06) return pick(r, ODD);
  if (x < 0.1) return [pick(r, SCALARS)];
  return pick(r, SCALARS);
}

/** A condition on one field of the shapes the planner bounds (and a few it does not). */
function condition(r: R, field: string, ids: unknown[]): unknown {
  const x = r();
  if (x < 0.3) return chance(r, 0.3) ? { $eq: operand(r, field, ids) } : operand(r, field, ids);
  if (x < 0.5) return { $in: Array.from({ length: Math.floor(r() * 4) }, () => operand(r, field, ids)) };
  if (x < 0.9) {
    const ops = ['$gt', '$gte', '$lt', '$lte'];
    const c: Document = { [pick(r, ops)]: operand(r, field, ids) };
    if (chance(r, 0.5)) c[pick(r, ops)] = operand(r, field, ids);
    return c;
  }
  return pick(r, [{ $ne: operand(r, field, ids) }, { $exists: chance(r, 0.5) }, { $nin: [operand(r, field, ids)] }, { $type: 'string' }]);
}

function randomFilter(r: R, ids: unknown[]): Document {
  const filter: Document = {};
  const n = 1 + Math.floor(r() * 3);
  for (let i = 0; i < n; i++) {
    const f = pick(r, FIELDS);
    filter[f] = condition(r, f, ids);
  }
  // Fields and their conditions drawn independently above; make sure the planned shapes are common.
  const shape = r();
  if (shape < 0.15) return { owner: pick(r, ['owner-1', 'owner-2', 'owner-3']), _id: { [pick(r, ['$gt', '$gte', '$lt'])]: pick(r, ids) } };
  if (shape < 0.3) return { _id: { $in: Array.from({ length: 1 + Math.floor(r() * 5) }, () => pick(r, ids)) }, $expr: { $gt: ['$k', Math.floor(r() * 10)] } };
  if (shape < 0.4) return { a: operand(r, 'a', ids), b: condition(r, 'b', ids) };
  if (shape < 0.5) return { $and: [{ a: condition(r, 'a', ids) }, { a: condition(r, 'a', ids) }] };
  if (chance(r, 0.3)) filter.$expr = { $lt: ['$k', Math.floor(r() * 10)] };
  return filter;
}

const SORTS: Array<Document | undefined> = [
  undefined, undefined, { _id: 1 }, { _id: -1 }, { a: 1 }, { a: -1, b: 1 }, { a: 1, b: -1 }, { owner: 1, _id: 1 }, { owner: -1, _id: -1 }, { s: 1 }, { s: -1 }, { 'd.e': 1 }, { t: -1 }, { _id: 1, k: 1 },
];

/** The sort key of a document as sortDocs (sort.ts) takes it: an array's least element ascending, greatest descending, missing as null. */
function sortKey(doc: Document, sort: Document): unknown[] {
  return Object.entries(sort).map(([path, dir]) => {
    const v = getPath(doc, path);
    if (!Array.isArray(v)) return v === undefined ? null : v;
    return v.reduce((best, x) => (compareValues(x, best) * (dir as number) < 0 ? x : best));
  });
}

function compareKeys(a: unknown[], b: unknown[], sort: Document): number {
  const dirs = Object.values(sort) as number[];
  for (let i = 0; i < a.length; i++) {
    const c = compareValues(a[i], b[i]) * dirs[i];
    if (c) return c;
  }
  return 0;
}

const canon = (d: Document) => EJSON.stringify(d, { relaxed: false });
const multiset = (docs: Document[]) => docs.map(canon).sort();

type Outcome = { docs: Document[] } | { error: string };

async function run(p: Promise<Document[]>): Promise<Outcome> {
  try {
    return { docs: await p };
  } catch (e) {
    if (e instanceof MongoServerError) return { error: `${e.codeName}: ${e.message}` };
    throw e;
  }
}

interface FindSpec {
  filter: Document;
  sort?: Document;
  skip?: number;
  limit?: number;
}

/**
 * Checks the planned read against the collection scan: the same error, or the same documents
 * (a multiset), in sort order, with the skip/limit window holding the same sort keys (ties may
 * come in another order, as on mongod).
 */
function expectSameAnswer(what: string, spec: FindSpec, planned: Outcome, full: Outcome, scanned: Outcome): void {
  const ctx = `${what}: ${EJSON.stringify(spec)}`;
  if ('error' in scanned || 'error' in planned || 'error' in full) {
    expect({ ctx, planned: 'error' in planned ? planned.error : 'ok' }).toEqual({ ctx, planned: 'error' in scanned ? scanned.error : 'ok' });
    return;
  }
  const all = scanned.docs;
  const got = planned.docs;
  const skip = spec.skip ?? 0;
  const expectedLength = Math.max(0, Math.min(spec.limit || Infinity, all.length - skip));
  expect({ ctx, length: got.length }).toEqual({ ctx, length: expectedLength });
  // Every document returned is one the collection scan returns.
  const pool = new Map<string, number>();
  for (const d of all) pool.set(canon(d), (pool.get(canon(d)) ?? 0) + 1);
  for (const d of got) {
    const n = pool.get(canon(d)) ?? 0;
    expect({ ctx, unexpected: n > 0 ? null : canon(d) }).toEqual({ ctx, unexpected: null });
    pool.set(canon(d), n - 1);
  }
  // Unbounded reads: exactly the same documents.
  expect({ ctx, docs: multiset(full.docs) }).toEqual({ ctx, docs: multiset(all) });
  if (spec.sort) {
    const keys = got.map((d) => sortKey(d, spec.sort!));
    for (let i = 1; i < keys.length; i++) expect({ ctx, order: compareKeys(keys[i - 1], keys[i], spec.sort) <= 0 }).toEqual({ ctx, order: true });
    // The window holds the same sort keys (equal in BSON order: 2 and NumberDecimal('2') are one key).
    const window = all.slice(skip, skip + expectedLength).map((d) => sortKey(d, spec.sort!));
    const differs = keys.findIndex((k, i) => compareKeys(k, window[i], spec.sort!) !== 0);
    if (differs >= 0) expect({ ctx, at: differs, key: EJSON.stringify(keys[differs]) }).toEqual({ ctx, at: differs, key: EJSON.stringify(window[differs]) });
  }
}

async function comparedFind(what: string, coll: Collection<Document>, spec: FindSpec, options: Document = {}): Promise<void> {
  const cursor = (hint?: Document, windowed = true) => {
    let c = coll.find(spec.filter, { ...options, ...(hint ? { hint } : {}) });
    if (spec.sort) c = c.sort(spec.sort);
    if (windowed && spec.skip) c = c.skip(spec.skip);
    if (windowed && spec.limit) c = c.limit(spec.limit);
    return c.toArray();
  };
  const scanned = await run(cursor({ $natural: 1 }, false));
  const planned = await run(cursor());
  const full = await run(cursor(undefined, false));
  expectSameAnswer(what, spec, planned, full, scanned);
}

/** Sorts that never fail (no empty arrays in their fields): an error would abort a transaction. */
const SAFE_SORTS = SORTS.filter((s) => !s || !('a' in s || 'm' in s));

function randomSpec(r: R, ids: unknown[], sorts = SORTS): FindSpec {
  const spec: FindSpec = { filter: randomFilter(r, ids) };
  const sort = pick(r, sorts);
  if (sort) spec.sort = sort;
  if (chance(r, 0.4)) spec.limit = 1 + Math.floor(r() * 5);
  if (chance(r, 0.2)) spec.skip = Math.floor(r() * 3);
  return spec;
}

async function freshCollection(db: Db, name: string, docs: Document[]): Promise<Collection<Document>> {
  const coll = db.collection<Document>(name);
  await coll.drop().catch(() => undefined);
  await db.command({ createIndexes: name, indexes: INDEXES });
  if (docs.length) await coll.insertMany(docs);
  return coll;
}

/** MPL_PLANNER_SEED replays one seed; MPL_PLANNER_RUNS multiplies the seeds tried (a longer soak). */
const seeds = (base: number, n: number): number[] =>
  process.env.MPL_PLANNER_SEED ? [Number(process.env.MPL_PLANNER_SEED)] : Array.from({ length: n * Number(process.env.MPL_PLANNER_RUNS ?? 1) }, (_, i) => base + i * 1_000);

describe('index scans answer what the collection scan answers', () => {
  test.each(seeds(1, 4))('random documents and queries (seed %i)', async (seed) => {
    const r = rng(seed);
    const db = client.db(`planner_diff_${seed}`);
    // _ids of several types: strings, ObjectIds, numbers, BinData, documents (IDHACK looks those up by value too).
    const ids = Array.from({ length: 150 }, (_, i) =>
      i % 5 === 4 ? { x: i % 7, y: i } : i % 7 === 6 ? new Binary(Buffer.from([i, i % 3])) : i % 3 === 0 ? OIDS[i % OIDS.length].toHexString() + i : i % 3 === 1 ? new ObjectId() : i,
    );
    const coll = await freshCollection(db, 'c', ids.map((id) => randomDoc(r, id)));
    // Ids that exist, and some that do not.
    const probe = [...ids, 'nope', new ObjectId(), 10_000];
    const leaves = new Map<string, number>();
    for (let q = 0; q < 150; q++) {
      const spec = randomSpec(r, probe);
      await comparedFind(`seed ${seed} query ${q}`, coll, spec);
      const plan = JSON.stringify((await coll.find(spec.filter, spec.sort ? { sort: spec.sort } : {}).explain('queryPlanner')).queryPlanner.winningPlan);
      const leaf = ['IDHACK', 'IXSCAN', 'COLLSCAN', 'EOF'].find((s) => plan.includes(`"${s}"`)) ?? plan;
      leaves.set(leaf, (leaves.get(leaf) ?? 0) + 1);
    }
    // The comparison is not vacuous: most of the queries run through an index scan.
    expect({ seed, ixscans: (leaves.get('IXSCAN') ?? 0) > 75 }).toEqual({ seed, ixscans: true });
    // count and distinct through the same plans.
    for (let q = 0; q < 20; q++) {
      const filter = randomFilter(r, probe);
      const a = await run(coll.countDocuments(filter).then((n) => [{ n }]));
      const b = await run(coll.countDocuments(filter, { hint: { $natural: 1 } }).then((n) => [{ n }]));
      expect({ filter: EJSON.stringify(filter), a }).toEqual({ filter: EJSON.stringify(filter), a: b });
    }
  });

  test('an index whose documents hold nested arrays stops being planned, and answers stay right', async () => {
    const db = client.db('planner_diff_nested');
    const coll = await freshCollection(db, 'c', [
      { _id: 1, a: [[1, 2]], m: [1] },
      { _id: 2, a: 1, m: [[1]] },
      { _id: 3, a: [1, [2]] },
    ]);
    for (const filter of [{ a: 1 }, { a: [1, 2] }, { a: { $gte: 1 } }, { m: 1 }, { m: [1] }, { a: { $in: [2, [1, 2]] } }]) {
      await comparedFind('nested arrays', coll, { filter });
      await comparedFind('nested arrays', coll, { filter, sort: { _id: -1 }, limit: 2 });
    }
    const plan = await coll.find({ a: 1 }).explain('queryPlanner');
    expect(plan.queryPlanner.winningPlan.stage).toBe('COLLSCAN');
  });
});

describe('writes find their documents through the same plans', () => {
  test.each(seeds(100, 3))('updateMany, deleteMany and findOneAndUpdate on twin collections (seed %i)', async (seed) => {
    const r = rng(seed);
    const db = client.db(`planner_writes_${seed}`);
    const ids = Array.from({ length: 120 }, (_, i) => i);
    const docs = ids.map((id) => randomDoc(r, id));
    const planned = await freshCollection(db, 'planned', docs);
    const scanned = await freshCollection(db, 'scanned', docs);
    for (let step = 0; step < 60; step++) {
      const filter = randomFilter(r, ids);
      const kind = pick(r, ['updateMany', 'deleteMany', 'findOneAndUpdate', 'updateOne'] as const);
      const ctx = `seed ${seed} step ${step} ${kind} ${EJSON.stringify(filter)}`;
      const update: Document = { $inc: { k: 1 }, $set: { owner: pick(r, ['owner-1', 'owner-2', null]), a: value(r, false) } };
      const both = async (f: (c: Collection<Document>, hint?: Document) => Promise<unknown>) => {
        const a = await f(planned).then((x) => ({ ok: x }), (e: unknown) => ({ error: (e as Error).message }));
        const b = await f(scanned, { $natural: 1 }).then((x) => ({ ok: x }), (e: unknown) => ({ error: (e as Error).message }));
        expect({ ctx, result: EJSON.stringify(a) }).toEqual({ ctx, result: EJSON.stringify(b) });
      };
      if (kind === 'updateMany') await both((c, hint) => c.updateMany(filter, update, hint ? { hint } : {}).then((x) => [x.matchedCount, x.modifiedCount]));
      else if (kind === 'deleteMany') await both((c, hint) => c.deleteMany(filter, hint ? { hint } : {}).then((x) => x.deletedCount));
      // A total sort, so both pick the same document.
      else if (kind === 'findOneAndUpdate') await both((c, hint) => c.findOneAndUpdate(filter, update, { sort: { _id: -1 }, ...(hint ? { hint } : {}) }));
      // Without a sort, which document updateOne takes depends on the plan (on mongod too): compare counts only.
      else await both((c, hint) => c.updateOne(filter, { $inc: { k: 0 } } as Document, hint ? { hint } : {}).then((x) => x.matchedCount));
      expect({ ctx, docs: multiset(await planned.find({}).toArray()) }).toEqual({ ctx, docs: multiset(await scanned.find({}).toArray()) });
      if ((await planned.estimatedDocumentCount()) < 40) {
        const more = Array.from({ length: 40 }, (_, i) => randomDoc(r, 1_000 * (step + 1) + i));
        await planned.insertMany(more);
        await scanned.insertMany(more);
      }
    }
  });
});

describe('reads in a transaction and at a past cluster time see their own view through the index', () => {
  test.each(seeds(200, 3))('a transaction reads its snapshot and its own writes while others commit (seed %i)', async (seed) => {
    const r = rng(seed);
    const dbName = `planner_txn_${seed}`;
    const db = client.db(dbName);
    const ids = Array.from({ length: 90 }, (_, i) => i);
    const coll = await freshCollection(db, 'c', ids.map((id) => randomDoc(r, id)));
    const outside = other.db(dbName).collection<Document>('c');
    for (let round = 0; round < 4; round++) {
      const session = client.startSession();
      try {
        session.startTransaction({ readConcern: { level: 'snapshot' }, writeConcern: { w: 'majority' } });
        // The first read fixes the snapshot.
        await coll.find({ _id: -1 } as Document, { session }).toArray();
        // Others commit: documents 0..44 change indexed fields, some are deleted, new ones arrive.
        for (let i = 0; i < 15; i++) {
          const id = pick(r, ids.slice(0, 45));
          const op = r();
          if (op < 0.6) await outside.updateOne({ _id: id } as Document, { $set: { a: value(r, false), owner: pick(r, ['owner-1', 'owner-2', null]), s: pick(r, STRINGS) } });
          else if (op < 0.8) await outside.deleteOne({ _id: id } as Document);
          else await outside.insertOne(randomDoc(r, 100_000 + 1_000 * round + i));
        }
        // The transaction writes documents 45..89 (nobody else touches them).
        for (let i = 0; i < 12; i++) {
          const id = pick(r, ids.slice(45));
          const op = r();
          if (op < 0.6) await coll.updateOne({ _id: id } as Document, { $set: { a: value(r, chance(r, 0.2)), owner: pick(r, ['owner-1', 'owner-3', null]), b: value(r, false) } }, { session });
          else if (op < 0.8) await coll.deleteOne({ _id: id } as Document, { session });
          else await coll.insertOne(randomDoc(r, 200_000 + 1_000 * round + i), { session });
        }
        const probe = [...ids, 100_000 + 1_000 * round, 200_000 + 1_000 * round];
        for (let q = 0; q < 40; q++) await comparedFind(`seed ${seed} round ${round} query ${q} (transaction)`, coll, randomSpec(r, probe, SAFE_SORTS), { session });
        // The transaction's view is not the committed one: it does not see what others committed.
        const inTxn = multiset(await coll.find({}, { session, hint: { $natural: 1 } }).toArray());
        const committed = multiset(await coll.find({}, { hint: { $natural: 1 } }).toArray());
        expect(inTxn).not.toEqual(committed);
        if (chance(r, 0.5)) await session.commitTransaction();
        else await session.abortTransaction();
      } finally {
        await session.endSession();
      }
      for (let q = 0; q < 20; q++) await comparedFind(`seed ${seed} round ${round} query ${q} (after)`, coll, randomSpec(r, [...ids, 100_000 + 1_000 * round]));
    }
  });

  test('a snapshot read at a past cluster time reads the documents of that time through the index', async () => {
    const r = rng(300);
    const dbName = 'planner_snapshot';
    const db = client.db(dbName);
    const ids = Array.from({ length: 80 }, (_, i) => i);
    const coll = await freshCollection(db, 'c', ids.map((id) => randomDoc(r, id)));
    // A first snapshot read starts the history the emulator keeps for snapshot reads.
    const first = await db.command({ find: 'c', filter: {}, readConcern: { level: 'snapshot' } });
    const at = first.cursor.atClusterTime;
    const outside = other.db(dbName).collection<Document>('c');
    for (let i = 0; i < 30; i++) {
      const id = pick(r, ids);
      if (chance(r, 0.7)) await outside.updateOne({ _id: id } as Document, { $set: { a: value(r, false), owner: pick(r, ['owner-1', 'owner-2']) } });
      else await outside.deleteOne({ _id: id } as Document);
    }
    for (let q = 0; q < 60; q++) {
      const spec = randomSpec(r, ids);
      const cmd = (hint?: Document, windowed = true): Document => ({
        find: 'c',
        filter: spec.filter,
        ...(spec.sort ? { sort: spec.sort } : {}),
        ...(windowed && spec.skip ? { skip: spec.skip } : {}),
        ...(windowed && spec.limit ? { limit: spec.limit } : {}),
        ...(hint ? { hint } : {}),
        batchSize: 1_000,
        readConcern: { level: 'snapshot', atClusterTime: at },
      });
      const get = (c: Document) => run(db.command(c).then((x) => x.cursor.firstBatch as Document[]));
      expectSameAnswer(`snapshot query ${q}`, spec, await get(cmd()), await get(cmd(undefined, false)), await get(cmd({ $natural: 1 }, false)));
    }
    void coll;
  });
});
