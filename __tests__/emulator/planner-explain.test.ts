/**
 * explain reports the plans mongod makes for the lock collection's queries (issue 16, "The emulator
 * scans where mongod uses an index"), and the plugin's status and release calls read a number of
 * documents that does not grow with the collection.
 *
 * Plan shapes and bound strings from mongod's sources and jstests: IXSCAN fields as
 * plan_explainer_impl.cpp statsToBSON writes them; bounds as IndexBoundsBuilder::translate builds
 * them (index_bounds_builder.cpp) and Interval::toString prints them, e.g.
 * jstests/noPassthroughWithMongod/query/cbr/cbr_ascending_and_descending_index_intervals.js:
 * `{a: ["[MaxKey, MinKey]"]}` "backward" for a descending sort, `["(1.0, 2.0]"]` forward and
 * `["[2.0, 1.0)"]` backward for `{$gt: 1, $lte: 2}`, `["[2.0, 1.0)"]` forward on a `{b: -1}` index;
 * the sort-providing whole-index scan of query_planner.cpp; IDHACK only for `_id` equality alone
 * (isSimpleIdQuery).
 */
import { Double, ObjectId, type Document } from 'bson';
import { MongoClient, type Collection } from 'mongodb';
import { Schema } from 'mongoose';
import { lockPlugin, type LockableModel, type LockMethods } from '../../src';
import { startEmulator, type RunningEmulator } from '../../test-backend/emulator';
import { connectTo, type MonitoredConnection } from '../support/db';

let emu: RunningEmulator;
let client: MongoClient;
let locks: Collection<Document>;

const UNEXPIRED = { $expr: { $gt: ['$expiresAt', '$$NOW'] } };
const MAX_OID = "ObjectId('ffffffffffffffffffffffff')";
const ids = Array.from({ length: 40 }, (_, i) => new ObjectId(`65b00000000000000000${i.toString(16).padStart(4, '0')}`));
const oid = (id: ObjectId) => `ObjectId('${id.toHexString()}')`;

beforeAll(async () => {
  emu = await startEmulator();
  client = new MongoClient(emu.uri, { serverSelectionTimeoutMS: 5_000 });
  await client.connect();
  locks = client.db('planner_explain').collection('locks');
  await locks.createIndex({ owner: 1, _id: 1 }, { name: 'owner_1__id_1' });
  await locks.createIndex({ expiresAt: 1 }, { name: 'expiresAt_ttl', expireAfterSeconds: 3600 });
  const now = Date.now();
  await locks.insertMany(
    ids.map((_id, i) => ({ _id, owner: i % 4 === 0 ? null : `owner-${i % 3}`, expiresAt: new Date(i % 4 === 0 ? now - 1_000 : now + 600_000) })),
  );
});

afterAll(async () => {
  await client?.close();
  await emu?.stop();
});

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

async function plan(command: Document, db = 'planner_explain'): Promise<Document> {
  return (await client.db(db).command({ explain: command, verbosity: 'queryPlanner' })).queryPlanner.winningPlan;
}

describe("the lock collection's queries plan as on mongod", () => {
  test('lockStatus: `_id: {$in}` is one point per id in the _id index, the $expr left in the FETCH filter', async () => {
    const asked = [ids[7], ids[2], new ObjectId('65b000000000000000000fff'), ids[2]];
    expect(await plan({ find: 'locks', filter: { _id: { $in: asked }, ...UNEXPIRED }, projection: { expiresAt: 1, now: '$$NOW' } })).toEqual({
      stage: 'PROJECTION_DEFAULT',
      transformBy: { expiresAt: 1, now: '$$NOW' },
      // The points in index order, duplicates merged (IndexBoundsBuilder's $in: sorted, unionized).
      inputStage: { stage: 'FETCH', filter: UNEXPIRED, inputStage: ixscan('_id_', { _id: 1 }, { _id: [ids[2], ids[7], new ObjectId('65b000000000000000000fff')].map((i) => `[${oid(i)}, ${oid(i)}]`) }) },
    });
  });

  test('listLocks: a page after a cursor is a range of the _id index providing the sort, the limit on top, no SORT', async () => {
    expect(await plan({ find: 'locks', filter: { ...UNEXPIRED, _id: { $gt: ids[10] } }, sort: { _id: 1 }, limit: 3 })).toEqual({
      stage: 'LIMIT',
      limitAmount: 3,
      inputStage: { stage: 'FETCH', filter: UNEXPIRED, inputStage: ixscan('_id_', { _id: 1 }, { _id: [`(${oid(ids[10])}, ${MAX_OID}]`] }) },
    });
    // The first page: no predicate on an index, the sort alone picks the _id index, scanned whole.
    expect(await plan({ find: 'locks', filter: UNEXPIRED, sort: { _id: 1 }, limit: 3 })).toEqual({
      stage: 'LIMIT',
      limitAmount: 3,
      inputStage: { stage: 'FETCH', filter: UNEXPIRED, inputStage: ixscan('_id_', { _id: 1 }, { _id: ['[MinKey, MaxKey]'] }) },
    });
  });

  test('listLocks({ owner }): equality on the first field of { owner: 1, _id: 1 }, the range and the sort on the second', async () => {
    expect(await plan({ find: 'locks', filter: { ...UNEXPIRED, owner: 'owner-1', _id: { $gt: ids[3] } }, sort: { _id: 1 }, limit: 51 })).toEqual({
      stage: 'LIMIT',
      limitAmount: 51,
      inputStage: {
        stage: 'FETCH',
        filter: UNEXPIRED,
        inputStage: ixscan('owner_1__id_1', { owner: 1, _id: 1 }, { owner: ['["owner-1", "owner-1"]'], _id: [`(${oid(ids[3])}, ${MAX_OID}]`] }),
      },
    });
  });

  test('releaseAllFor: the updateMany reads through the owner index', async () => {
    expect(await plan({ update: 'locks', updates: [{ q: { owner: 'owner-2', ...UNEXPIRED }, u: [{ $set: { owner: null } }], multi: true }] })).toEqual({
      stage: 'UPDATE',
      inputStage: { stage: 'FETCH', filter: UNEXPIRED, inputStage: ixscan('owner_1__id_1', { owner: 1, _id: 1 }, { owner: ['["owner-2", "owner-2"]'], _id: ['[MinKey, MaxKey]'] }) },
    });
  });

  test('an equality on _id wins over the compound index (stripUnneededAssignments), with no IDHACK beside other predicates', async () => {
    expect(await plan({ update: 'locks', updates: [{ q: { _id: ids[5], owner: 'owner-2', ...UNEXPIRED }, u: { $set: { label: 'x' } } }] })).toEqual({
      stage: 'UPDATE',
      inputStage: { stage: 'FETCH', filter: { $and: [{ owner: { $eq: 'owner-2' } }, UNEXPIRED] }, inputStage: ixscan('_id_', { _id: 1 }, { _id: [`[${oid(ids[5])}, ${oid(ids[5])}]`] }) },
    });
    expect(await plan({ findAndModify: 'locks', query: { _id: ids[5] }, update: { $set: { label: 'x' } }, upsert: true })).toEqual({ stage: 'UPDATE', inputStage: { stage: 'IDHACK' } });
    // jstests/core/idhack.js: "ID hack cannot be used with hint()", "... with skip()".
    const idScan = { stage: 'FETCH', inputStage: ixscan('_id_', { _id: 1 }, { _id: [`[${oid(ids[5])}, ${oid(ids[5])}]`] }) };
    expect(await plan({ find: 'locks', filter: { _id: ids[5] }, hint: { _id: 1 } })).toEqual(idScan);
    expect(await plan({ find: 'locks', filter: { _id: ids[5] }, skip: 1 })).toEqual({ stage: 'SKIP', skipAmount: 1, inputStage: idScan });
  });

  test('a descending sort scans backward with reversed bounds; a descending key field scans forward (cbr_ascending_and_descending_index_intervals.js)', async () => {
    expect(await plan({ find: 'locks', filter: UNEXPIRED, sort: { _id: -1 }, limit: 2 })).toEqual({
      stage: 'LIMIT',
      limitAmount: 2,
      inputStage: { stage: 'FETCH', filter: UNEXPIRED, inputStage: ixscan('_id_', { _id: 1 }, { _id: ['[MaxKey, MinKey]'] }, { direction: 'backward' }) },
    });
    expect(await plan({ find: 'locks', filter: { owner: 'owner-1', _id: { $lt: ids[30] } }, sort: { _id: -1 } })).toEqual({
      stage: 'FETCH',
      inputStage: ixscan(
        'owner_1__id_1',
        { owner: 1, _id: 1 },
        { owner: ['["owner-1", "owner-1"]'], _id: [`(${oid(ids[30])}, ObjectId('000000000000000000000000')]`] },
        { direction: 'backward' },
      ),
    });
    const nums = client.db('planner_explain').collection('nums');
    await nums.createIndex({ a: 1 });
    await nums.createIndex({ b: -1 });
    await nums.insertMany([{ a: 1, b: 1 }, { a: 2, b: 2 }, { a: 2, b: 1 }, { a: 1, b: 2 }, { a: 20, b: 20 }].map((d) => ({ a: new Double(d.a), b: new Double(d.b) })));
    const range = { $gt: new Double(1), $lte: new Double(2) };
    expect((await plan({ find: 'nums', filter: { a: range }, sort: { a: 1 } })).inputStage).toEqual(ixscan('a_1', { a: 1 }, { a: ['(1.0, 2.0]'] }));
    expect((await plan({ find: 'nums', filter: { a: range }, sort: { a: -1 } })).inputStage).toEqual(ixscan('a_1', { a: 1 }, { a: ['[2.0, 1.0)'] }, { direction: 'backward' }));
    expect((await plan({ find: 'nums', filter: { b: range } })).inputStage).toEqual(ixscan('b_-1', { b: -1 }, { b: ['[2.0, 1.0)'] }));
    expect((await plan({ find: 'nums', filter: { a: { $gt: new Double(1) } }, sort: { a: -1 } })).inputStage).toEqual(ixscan('a_1', { a: 1 }, { a: ['[inf.0, 1.0)'] }, { direction: 'backward' }));
    expect((await plan({ find: 'nums', filter: {}, sort: { b: -1 } })).inputStage).toEqual(ixscan('b_-1', { b: -1 }, { b: ['[MaxKey, MinKey]'] }));
  });

  test('null equality keeps its filter and bounds undefined and null (7.0); dates bracket to Date_t::min/max', async () => {
    expect(await plan({ find: 'locks', filter: { owner: null } })).toEqual({
      stage: 'FETCH',
      filter: { owner: { $eq: null } },
      inputStage: ixscan('owner_1__id_1', { owner: 1, _id: 1 }, { owner: ['[undefined, undefined]', '[null, null]'], _id: ['[MinKey, MaxKey]'] }),
    });
    const at = new Date(1_700_000_000_000);
    expect((await plan({ find: 'locks', filter: { expiresAt: { $lte: at } } })).inputStage).toEqual(
      ixscan('expiresAt_ttl', { expiresAt: 1 }, { expiresAt: [`[new Date(-9223372036854775808), new Date(${at.getTime()})]`] }),
    );
  });

  test('a multikey index says so, bounds one of two ranges on its field, keeps both in the filter and does not provide a sort', async () => {
    const tags = client.db('planner_explain').collection('tags');
    await tags.createIndex({ t: 1 });
    await tags.insertMany([{ t: [1, 10] }, { t: 5 }, { t: [] }]);
    const filter = { t: { $gt: 5, $lt: 3 } };
    expect(await plan({ find: 'tags', filter, sort: { t: 1 } })).toEqual({
      stage: 'SORT',
      sortPattern: { t: 1 },
      inputStage: { stage: 'FETCH', filter: { t: { $gt: 5, $lt: 3 } }, inputStage: ixscan('t_1', { t: 1 }, { t: ['(5, inf.0]'] }, { isMultiKey: true, multiKeyPaths: { t: ['t'] } }) },
    });
    // {t: [1, 10]} matches: 10 > 5 and 1 < 3 (an array matches by any element, each condition alone).
    expect(await tags.find(filter, { projection: { _id: 0 } }).toArray()).toEqual([{ t: [1, 10] }]);
  });

  test('hints: $natural is a collection scan; an index without usable predicates is scanned whole', async () => {
    expect(await plan({ find: 'locks', filter: { _id: ids[1] }, hint: { $natural: 1 } })).toEqual({ stage: 'COLLSCAN', filter: { _id: ids[1] }, direction: 'forward' });
    expect(await plan({ find: 'locks', filter: { label: 'x' }, hint: 'owner_1__id_1' })).toEqual({
      stage: 'FETCH',
      filter: { label: { $eq: 'x' } },
      inputStage: ixscan('owner_1__id_1', { owner: 1, _id: 1 }, { owner: ['[MinKey, MaxKey]'], _id: ['[MinKey, MaxKey]'] }),
    });
  });

  test('sparse indexes are not used for null, partial and hidden indexes not at all', async () => {
    const c = client.db('planner_explain').collection('special');
    await client.db('planner_explain').command({
      createIndexes: 'special',
      indexes: [
        { key: { s: 1 }, name: 's_sparse', sparse: true },
        { key: { p: 1 }, name: 'p_partial', partialFilterExpression: { p: { $gt: 0 } } },
        { key: { h: 1 }, name: 'h_hidden', hidden: true },
      ],
    });
    await c.insertMany([{ s: 1, p: 1, h: 1 }, { s: null }, {}]);
    expect((await plan({ find: 'special', filter: { s: null } })).stage).toBe('COLLSCAN');
    expect((await plan({ find: 'special', filter: { s: 1 } })).inputStage.indexName).toBe('s_sparse');
    expect((await plan({ find: 'special', filter: { p: 1 } })).stage).toBe('COLLSCAN');
    expect((await plan({ find: 'special', filter: { h: 1 } })).stage).toBe('COLLSCAN');
    expect(await c.countDocuments({ s: null })).toBe(2);
  });
});

describe('a read through an index stops where mongod stops', () => {
  test('a limited page examines its limit of keys, an owner equality only its own keys, whatever the collection holds', async () => {
    const many = client.db('planner_explain').collection('many');
    await many.createIndex({ owner: 1, _id: 1 });
    const stats = async (filter: Document, options: Document = {}) => (await many.find(filter, options).explain('executionStats')).executionStats;
    const probe = async () => ({
      page: await stats(UNEXPIRED, { sort: { _id: 1 }, limit: 5 }),
      owner: await stats({ owner: 'mine', ...UNEXPIRED }, { sort: { _id: 1 }, limit: 51 }),
      status: await stats({ _id: { $in: ids.slice(0, 10) }, ...UNEXPIRED }),
    });
    const fill = async (n: number) => {
      const now = Date.now();
      await many.insertMany(Array.from({ length: n }, (_, i) => ({ owner: `o${i % 50}`, expiresAt: new Date(now + 600_000) })));
    };
    await many.insertMany(ids.slice(0, 10).map((_id) => ({ _id, owner: 'mine', expiresAt: new Date(Date.now() + 600_000) })));
    await fill(500);
    const small = await probe();
    await fill(5_000);
    const large = await probe();
    for (const s of [small, large]) {
      expect(s.page).toMatchObject({ nReturned: 5, totalKeysExamined: 5, totalDocsExamined: 5 });
      expect(s.owner).toMatchObject({ nReturned: 10, totalKeysExamined: 10, totalDocsExamined: 10 });
      expect(s.status).toMatchObject({ nReturned: 10, totalKeysExamined: 10, totalDocsExamined: 10 });
    }
  });

  test("the plugin's lockStatus, listLocks and releaseAllFor send reads that examine only their own records", async () => {
    let monitored: MonitoredConnection | undefined;
    try {
      monitored = await connectTo(emu.uri, 'planner_plugin');
      const connection = monitored.connection;
      const schema = new Schema<{ title: string }, LockableModel<{ title: string }>, LockMethods>({ title: String });
      schema.plugin(lockPlugin, { ttl: 600_000 });
      const Item = connection.model<{ title: string }, LockableModel<{ title: string }>>('PlannedItem', schema);
      await Item.init();
      await Item.lockModel().init();
      const docs = await Item.insertMany(Array.from({ length: 6 }, (_, i) => ({ title: `t${i}` })));
      for (const d of docs.slice(0, 3)) await Item.lock(d._id, 'alice');
      // Others' records around them (written by a client of the test's own, not by the plugin).
      const now = Date.now();
      await client.db('planner_plugin').collection(Item.lockModel().collection.collectionName).insertMany(
        Array.from({ length: 3_000 }, (_, i) => ({ _id: new ObjectId(), owner: `other-${i % 300}`, token: `t${i}`, fence: 1, acquiredAt: new Date(now), expiresAt: new Date(now + 600_000), label: null })),
      );
      const sent: Document[] = [];
      const listener = (e: { commandName: string; command: Document }) => {
        if (e.commandName === 'find' || e.commandName === 'update') sent.push(e.command);
      };
      connection.getClient().on('commandStarted', listener);
      await Item.lockStatus(docs.map((d) => d._id));
      await Item.listLocks({ owner: 'alice' });
      const first = await Item.listLocks({ limit: 2 });
      await Item.listLocks({ limit: 2, after: first.next! });
      expect(await Item.releaseAllFor('alice')).toBe(3);
      connection.getClient().off('commandStarted', listener);
      expect(sent.map((c) => Object.keys(c)[0])).toEqual(['find', 'find', 'find', 'find', 'update']);
      const db = connection.getClient().db('planner_plugin');
      for (const command of sent) {
        const { lsid: _l, $clusterTime: _c, $db: _d, txnNumber: _t, $readPreference: _r, ...rest } = command;
        // A write's reads are explained through the find with its filter (write explains run no executionStats here).
        const read = 'update' in rest ? { find: rest.update, filter: (rest.updates as Document[])[0].q } : rest;
        const r = await db.command({ explain: read, verbosity: 'executionStats' });
        expect({ command: Object.keys(read)[0], leaf: JSON.stringify(r.queryPlanner.winningPlan).includes('"IXSCAN"') }).toEqual({ command: Object.keys(read)[0], leaf: true });
        expect(JSON.stringify(r.queryPlanner.winningPlan)).not.toContain('"SORT"');
        expect(r.executionStats.totalDocsExamined).toBeLessThanOrEqual(7);
      }
    } finally {
      await monitored?.close();
    }
  });
});
