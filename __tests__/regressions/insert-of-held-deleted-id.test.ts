/**
 * Inserts are not guarded, also an insert naming the `_id` of a document someone holds whose
 * holder deleted it and kept the lock (README, Limits, "Inserts are not checked"). Decided by the
 * lead: Mongoose gives every new document an `_id`, so a lock check on inserts would cost every
 * insert a lock-collection read (check mode) or a transaction (atomic mode). What happens instead,
 * pinned here for every insert path in both modes:
 *  - the insert succeeds, and re-creates X;
 *  - the new document is covered by the holder's lock, which is still unexpired: a non-holder's
 *    write of it is refused (LockedError), and so is a non-holder's lock call;
 *  - the holder writes it: as its owner (`lockOwner`), and through its instance from `Model.lock`,
 *    whose `save()` applies the instance's changed paths to the new document (Mongoose sends
 *    `updateOne({ _id: X }, { $set: ... })`, which matches whatever document now has that `_id`).
 *
 * (This file began as the attack on issue 16 item 2, `insert-recreates-locked-id.test.ts`, which
 * asked the inserts to be refused.)
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
  ['Model.collection.insertOne', (M, x) => coll(M).insertOne({ _id: x, title: 'by A', status: 'open', edits: 0 })],
  ['Model.bulkWrite insertOne', (M, x) => M.bulkWrite([{ insertOne: { document: { _id: x, title: 'by A' } as never } }])],
];

describe.each([
  ["transactions: 'auto'", () => Auto],
  ["transactions: 'never' (check mode)", () => Never],
])('%s', (_mode, model) => {
  beforeEach(async () => {
    await rawCollection(model()).deleteMany({});
  });

  afterEach(async () => {
    await model().releaseAllFor('holder-b');
  });

  test.each(inserts)("%s of X, held by B who deleted the document: inserted; the new X is B's to write, refused to others", async (_name, insert) => {
    const M = model();
    const { _id: x } = await M.create({ title: 'held by B' });
    const held = await M.lock(x, 'holder-b');
    await held.deleteOne();
    expect(await M.isLocked(x)).toBe(true);

    const inserted = await outcome(insert(M, x as mongo.ObjectId));
    expect({ ok: inserted.ok, stored: (await rawCollection(M).findOne({ _id: x }))?.title }).toEqual({ ok: true, stored: 'by A' });

    // Covered by B's lock: refused to others.
    const byOther = await outcome(M.updateOne({ _id: x }, { $set: { title: 'by A again' } }).exec());
    expect(!byOther.ok && byOther.error instanceof LockedError).toBe(true);
    expect(await M.tryLock(x, 'someone-else')).toBeNull();
    // B writes it, as its owner and through its instance (which applies its changed paths).
    await M.updateOne({ _id: x }, { $inc: { edits: 1 } }, { lockOwner: 'holder-b' } as never).exec();
    held.title = "B's instance";
    await held.save();
    const stored = await rawCollection(M).findOne({ _id: x });
    expect({ title: stored?.title, edits: stored?.edits }).toEqual({ title: "B's instance", edits: 1 });
    expect(await M.isLocked(x)).toBe(true);
  });
});
