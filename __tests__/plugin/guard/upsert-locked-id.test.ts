/**
 * Issue 16, item 2: a non-holder's upsert cannot re-create a locked `_id` (PRODUCT.md property 6;
 * README, Write paths: "a new document cannot be locked").
 *
 * B locks X, deletes the document and keeps the lock. An upsert by anyone else whose filter
 * matches nothing and which would insert `_id` X (named by `$setOnInsert` / `$set`, by the
 * replacement, or seeded by a filter the server canonicalizes into `_id: X`) was accepted on every
 * path but an ordered `Model.bulkWrite`, and re-created X under B's lock. Now every path checks
 * each `_id` an upsert may insert like a target (src/guard/upsert-id.ts, idsUpsertMayInsert), and
 * refuses, before anything is sent, an upsert whose inserted `_id` it cannot know. Both in the
 * guard's own transaction (`transactions: 'auto'`, atomic on a replica set) and in check mode.
 */
import { mongo } from 'mongoose';
import { InvalidLockArgumentError, LockedError } from '../../../src';
import { connect, testDatabase, type MonitoredConnection } from '../../support/db';
import { workItemModel, type WorkItemModel } from '../../support/work-item';
import { outcome, rawCollection } from './support';

const db = testDatabase('upsertlockedid');
let conn: MonitoredConnection;
let Auto: WorkItemModel;
let Never: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  Auto = await workItemModel(conn.connection, { ttl: 60_000 }, 'UpsertIdAuto');
  Never = await workItemModel(conn.connection, { ttl: 60_000, transactions: 'never' }, 'UpsertIdNever');
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

type Write = (M: WorkItemModel, x: mongo.ObjectId) => Promise<unknown>;
/** Mongoose's collection under the model (the guard lives there): the driver's signatures. */
const coll = (M: WorkItemModel) => M.collection as unknown as mongo.Collection;
const nomatch = { title: 'nomatch' };
const replacement = (x: mongo.ObjectId) => ({ _id: x, title: 'by A', status: 'open' as const, edits: 0 });

const paths: [string, Write][] = [
  ['Model.updateOne $setOnInsert', (M, x) => M.updateOne(nomatch, { $setOnInsert: { _id: x } }, { upsert: true }).exec()],
  ['Model.findOneAndUpdate $setOnInsert', (M, x) => M.findOneAndUpdate(nomatch, { $setOnInsert: { _id: x } }, { upsert: true }).exec()],
  ['Model.updateMany $setOnInsert', (M, x) => M.updateMany(nomatch, { $setOnInsert: { _id: x } }, { upsert: true }).exec()],
  ['Model.replaceOne with _id in the replacement', (M, x) => M.replaceOne(nomatch, replacement(x), { upsert: true }).exec()],
  ['Model.findOneAndReplace with _id in the replacement', (M, x) => M.findOneAndReplace(nomatch, replacement(x), { upsert: true }).exec()],
  ['Model.collection.updateOne $set of _id', (M, x) => coll(M).updateOne(nomatch, { $set: { _id: x, title: 'by A' } }, { upsert: true })],
  ['Model.collection.updateMany $setOnInsert', (M, x) => coll(M).updateMany(nomatch, { $setOnInsert: { _id: x } }, { upsert: true })],
  ['Model.collection.findOneAndUpdate $setOnInsert', (M, x) => coll(M).findOneAndUpdate(nomatch, { $setOnInsert: { _id: x } }, { upsert: true })],
  ['Model.collection.replaceOne', (M, x) => coll(M).replaceOne(nomatch, replacement(x), { upsert: true })],
  ['Model.collection.findOneAndReplace', (M, x) => coll(M).findOneAndReplace(nomatch, replacement(x), { upsert: true })],
  // mongod canonicalizes a one-child $or into `_id: X`, which seeds the inserted document (R21).
  ['Model.updateOne with { $or: [{ _id: X }] }', (M, x) => M.updateOne({ $or: [{ _id: x }] }, { $set: { title: 'by A' } }, { upsert: true }).exec()],
  ['Model.collection.updateOne with { _id: { $all: [X] } }', (M, x) => coll(M).updateOne({ _id: { $all: [x] } }, { $set: { title: 'by A' } }, { upsert: true })],
  ['Model.bulkWrite, ordered (refused before this change too)', (M, x) => M.bulkWrite([{ updateOne: { filter: nomatch, update: { $setOnInsert: { _id: x } }, upsert: true } }])],
  ['Model.bulkWrite, unordered', (M, x) => M.bulkWrite([{ updateOne: { filter: nomatch, update: { $setOnInsert: { _id: x } }, upsert: true } }], { ordered: false })],
  ['Model.bulkWrite replaceOne, unordered', (M, x) => M.bulkWrite([{ replaceOne: { filter: nomatch, replacement: replacement(x) as never, upsert: true } }], { ordered: false })],
];

describe.each([
  ["transactions: 'auto'", () => Auto],
  ["transactions: 'never' (check mode)", () => Never],
])('%s', (_mode, model) => {
  // Each test starts from an empty collection: a document an earlier test re-created (title
  // 'nomatch') would otherwise be matched, and refused for its own lock.
  beforeEach(async () => {
    await rawCollection(model()).deleteMany({});
  });

  /** X, locked by B, whose document B deleted (B keeps the lock). */
  async function lockedAndDeleted(M: WorkItemModel): Promise<mongo.ObjectId> {
    const { _id: x } = await M.create({ title: 'held by B' });
    const held = await M.lock(x, 'holder-b');
    await held.deleteOne();
    expect({ gone: await rawCollection(M).findOne({ _id: x }), locked: await M.isLocked(x) }).toEqual({ gone: null, locked: true });
    return x as mongo.ObjectId;
  }

  test.each(paths)('%s by a non-holder is refused with LockedError; X is not re-created', async (_name, write) => {
    const M = model();
    const x = await lockedAndDeleted(M);
    const result = await outcome(write(M, x));
    expect({ refused: !result.ok && result.error instanceof LockedError, recreated: await rawCollection(M).findOne({ _id: x }) }).toEqual({ refused: true, recreated: null });
    expect(await M.isLocked(x)).toBe(true);
  });

  test("the holder's owner may re-create its own _id", async () => {
    const M = model();
    const x = await lockedAndDeleted(M);
    await M.updateOne(nomatch, { $setOnInsert: { _id: x, title: 'again' } }, { upsert: true, lockOwner: 'holder-b' } as never).exec();
    expect((await rawCollection(M).findOne({ _id: x }))?.title).toBe('again');
  });

  test('an upsert naming a free _id inserts it, as without the plugin', async () => {
    const M = model();
    const free = new mongo.ObjectId();
    const result = await M.updateOne({ title: 'free' }, { $setOnInsert: { _id: free } }, { upsert: true }).exec();
    expect(String(result.upsertedId)).toBe(String(free));
    const pipeline = await coll(M).updateOne({ title: 'pipeline' }, [{ $set: { edits: 5 } }], { upsert: true });
    expect((await rawCollection(M).findOne({ _id: pipeline.upsertedId! }))?.edits).toBe(5);
  });

  test.each([
    ['$inc of _id', { $inc: { _id: 1 } }],
    ['$max of _id', { $max: { _id: 'z' } }],
    ['a pipeline that sets _id', [{ $set: { _id: 'z' } }]],
    ['a pipeline that replaces the document', [{ $replaceWith: { _id: 'z', title: 'r' } }]],
  ])('an upsert whose inserted _id cannot be known before it is sent (%s) is refused with InvalidLockArgumentError, nothing sent', async (_name, update) => {
    const M = model();
    const before = await rawCollection(M).countDocuments();
    const single = await outcome(coll(M).updateOne({ title: 'unknown' }, update as mongo.UpdateFilter<mongo.Document>, { upsert: true }));
    const bulk = await outcome(coll(M).bulkWrite([{ updateOne: { filter: { title: 'unknown' }, update: update as never, upsert: true } }]));
    expect([single, bulk].map((r) => !r.ok && r.error instanceof InvalidLockArgumentError)).toEqual([true, true]);
    expect(await rawCollection(M).countDocuments()).toBe(before);
    // Without upsert the same update is not refused by the guard (it cannot insert).
    const plain = await outcome(coll(M).updateOne({ title: 'unknown' }, update as mongo.UpdateFilter<mongo.Document>));
    expect(plain.ok && plain.value.matchedCount).toBe(0);
  });
});
