/**
 * Issue 16, item 2 asked to "make the README's 'a new document cannot be locked' true". The change
 * made every UPSERT path check the `_id`s it may insert; an INSERT naming its `_id` is still not
 * guarded (GUARDED_METHODS in write-guard.ts has no insertOne / insertMany, and `bulkWrite`'s
 * `insertOne` adds no target). So after B locks X, deletes the document and keeps the lock (the
 * scenario of item 2), anyone re-creates X with `Model.create({ _id: X })`, `insertMany`, the
 * collection's `insertOne`, or a `bulkWrite` `insertOne`: a document someone else holds is written by
 * a non-holder (PRODUCT.md property 6), and the README's Write paths row for inserts ("nothing to
 * guard: a new document cannot be locked") is false for it: X is new and locked.
 *
 * Either the insert paths check an `_id` the caller names (as the upserts now do), or the README
 * says that an insert naming a held `_id` of a deleted document is not refused. This file pins the
 * first; the lead decides.
 *
 * Status when committed (attack on 8078351): every case FAILS (X re-created), in both modes.
 */
import { mongo } from 'mongoose';
import { LockedError } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';
import { outcome, rawCollection } from '../plugin/guard/support';

const db = testDatabase('insertlockedid');
let conn: MonitoredConnection;
let Auto: WorkItemModel;
let Never: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  Auto = await workItemModel(conn.connection, { ttl: 60_000 }, 'InsertLockedIdAuto');
  Never = await workItemModel(conn.connection, { ttl: 60_000, transactions: 'never' }, 'InsertLockedIdNever');
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

const coll = (M: WorkItemModel) => M.collection as unknown as mongo.Collection;
type Write = (M: WorkItemModel, x: mongo.ObjectId) => Promise<unknown>;
const inserts: [string, Write][] = [
  ['Model.create', (M, x) => M.create({ _id: x, title: 'by A' })],
  ['Model.insertMany', (M, x) => M.insertMany([{ _id: x, title: 'by A' }])],
  ['new Model().save()', (M, x) => new M({ _id: x, title: 'by A' }).save()],
  ['Model.collection.insertOne', (M, x) => coll(M).insertOne({ _id: x, title: 'by A' })],
  ['Model.bulkWrite insertOne', (M, x) => M.bulkWrite([{ insertOne: { document: { _id: x, title: 'by A' } as never } }])],
];

describe.each([
  ["transactions: 'auto'", () => Auto],
  ["transactions: 'never' (check mode)", () => Never],
])('%s', (_mode, model) => {
  beforeEach(async () => {
    await rawCollection(model()).deleteMany({});
  });

  test.each(inserts)('%s of X, locked by B who deleted the document, by a non-holder: refused with LockedError, X not re-created', async (_name, write) => {
    const M = model();
    const { _id: x } = await M.create({ title: 'held by B' });
    const held = await M.lock(x, 'holder-b');
    await held.deleteOne();
    expect(await M.isLocked(x)).toBe(true);
    const result = await outcome(write(M, x as mongo.ObjectId));
    expect({
      refused: !result.ok && result.error instanceof LockedError,
      recreated: (await rawCollection(M).findOne({ _id: x }))?.title ?? null,
    }).toEqual({ refused: true, recreated: null });
  });
});
