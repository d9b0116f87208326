/**
 * Issue 16, item 2, on `bulkWrite`: an upsert operation whose filter names its `_id`s
 * (`{ _id: { $in: [A, B] } }`, two or more values, or none) does not seed the inserted document's
 * `_id` (only a one-value `$in` becomes an equality: R21 of docs/mongodb-compatibility.md;
 * `UpdateDriver::populateDocumentWithQueryFields`, src/mongo/db/update/update_driver.cpp, collects
 * equalities only). The `_id` the upsert inserts is then the one its `$setOnInsert` / `$set` or its
 * replacement names. The single-statement paths (`updateOne`, `updateMany`, `replaceOne`, ...) check
 * that `_id` (write-guard.ts `single()` / `multi()`: `named` ∪ `call.insertable`), but `bulk()` adds
 * a named operation's ids to the targets and `continue`s BEFORE it calls `insertableIds`, so the
 * `_id` a named bulk upsert inserts is never checked: B locks X, deletes the document and keeps the
 * lock; anyone's `bulkWrite` upsert with a filter naming two absent `_id`s and
 * `$setOnInsert: { _id: X }` re-creates X under B's lock (PRODUCT.md property 6; README, Write
 * paths: "an upsert that would insert an `_id` someone else holds ... is refused like a write of
 * it"). Ordered and unordered, `transactions: 'auto'` and `'never'`.
 *
 * Status when committed (attack on 8078351): every case below FAILS (X is re-created, the bulk
 * reports `upsertedCount: 1`).
 */
import { mongo } from 'mongoose';
import { LockedError } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';
import { outcome, rawCollection } from '../plugin/guard/support';

const db = testDatabase('bulknamedupsertid');
let conn: MonitoredConnection;
let Auto: WorkItemModel;
let Never: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  Auto = await workItemModel(conn.connection, { ttl: 60_000 }, 'BulkNamedUpsertAuto');
  Never = await workItemModel(conn.connection, { ttl: 60_000, transactions: 'never' }, 'BulkNamedUpsertNever');
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

/** Mongoose's collection under the model (the guard lives there), with the driver's signatures. */
const coll = (M: WorkItemModel) => M.collection as unknown as mongo.Collection;
/** A filter naming two `_id`s no document has: it seeds no `_id`, so the upsert inserts the one its update names. */
const twoAbsent = () => ({ _id: { $in: [new mongo.ObjectId(), new mongo.ObjectId()] } });

type Write = (M: WorkItemModel, x: mongo.ObjectId) => Promise<unknown>;
const writes: [string, Write][] = [
  ['Model.bulkWrite updateOne $setOnInsert, ordered', (M, x) => M.bulkWrite([{ updateOne: { filter: twoAbsent(), update: { $setOnInsert: { _id: x, title: 'by A' } }, upsert: true } }])],
  ['Model.bulkWrite updateOne $setOnInsert, unordered', (M, x) => M.bulkWrite([{ updateOne: { filter: twoAbsent(), update: { $setOnInsert: { _id: x, title: 'by A' } }, upsert: true } }], { ordered: false })],
  ['Model.collection.bulkWrite updateMany $set of _id', (M, x) => coll(M).bulkWrite([{ updateMany: { filter: twoAbsent(), update: { $set: { _id: x, title: 'by A' } }, upsert: true } }])],
  ['Model.collection.bulkWrite replaceOne with _id in the replacement', (M, x) => coll(M).bulkWrite([{ replaceOne: { filter: twoAbsent(), replacement: { _id: x, title: 'by A', status: 'open', edits: 0 }, upsert: true } }])],
];

describe.each([
  ["transactions: 'auto'", () => Auto],
  ["transactions: 'never' (check mode)", () => Never],
])('%s', (_mode, model) => {
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

  test.each(writes)('%s, filter naming two absent _ids, by a non-holder: refused with LockedError, X not re-created', async (_name, write) => {
    const M = model();
    const x = await lockedAndDeleted(M);
    const result = await outcome(write(M, x));
    expect({
      refused: !result.ok && result.error instanceof LockedError,
      recreated: (await rawCollection(M).findOne({ _id: x }))?.title ?? null,
    }).toEqual({ refused: true, recreated: null });
    expect(await M.isLocked(x)).toBe(true);
  });

  test("the same bulk upsert by the holder's owner re-creates X (the check must not refuse the holder)", async () => {
    const M = model();
    const x = await lockedAndDeleted(M);
    await M.bulkWrite([{ updateOne: { filter: twoAbsent(), update: { $setOnInsert: { _id: x, title: 'again' } }, upsert: true } }], { lockOwner: 'holder-b' } as never);
    expect((await rawCollection(M).findOne({ _id: x }))?.title).toBe('again');
  });
});
