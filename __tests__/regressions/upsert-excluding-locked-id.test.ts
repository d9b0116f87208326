/**
 * Issue 16, item 2 over-refuses (PRODUCT.md property 10: the guard refuses writes only because of
 * someone else's lock; writes to documents nobody has locked succeed as without the plugin).
 *
 * `idsUpsertMayInsert` (src/guard/upsert-id.ts) lists the operands of `$ne` and `$nin` on `_id`,
 * and of `$not` / `$nor` over an `_id` equality, as `_id`s the upsert may insert, and the guard
 * then refuses the upsert with LockedError when someone holds one of them. But a condition that
 * EXCLUDES X can never give the inserted document the `_id` X, nor match X: the inserted document's
 * `_id` comes from the equalities the query implies (`UpdateDriver::populateDocumentWithQueryFields`,
 * src/mongo/db/update/update_driver.cpp; `pathsupport::extractFullEqualityMatches`,
 * src/mongo/db/update/path_support.cpp, collects EQ nodes under ANDs), and a query that implies
 * `_id != X` cannot imply `_id == X` (it would match nothing; and `$ne` is parsed as NOT(EQ), never
 * as EQ). Only under an even number of negations (`{ $not: { $ne: X } }`, `{ $nor: [{ _id: { $ne: X } }] }`)
 * can such an operand become the equality, which is what the README's "MongoDB may rewrite such
 * conditions into the equality" covers; a single negation cannot.
 *
 * The natural write this refuses: "update any open item except the one someone holds, or create
 * one", `updateOne({ status: 'open', _id: { $ne: held } }, update, { upsert: true })`. Without
 * the plugin it updates Y (a free open item); the same write without `upsert` is accepted by the
 * guard and updates Y; with `upsert` the guard refuses it because of the lock on the very
 * document it excludes.
 *
 * Status when committed (attack on 8078351): the four single-negation cases FAIL (LockedError) in
 * both modes; the double-negation controls pass (they must keep refusing after a fix).
 */
import { mongo } from 'mongoose';
import { LockedError } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';
import { outcome, rawCollection } from '../plugin/guard/support';

const db = testDatabase('upsertexcludinglocked');
let conn: MonitoredConnection;
let Auto: WorkItemModel;
let Never: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  Auto = await workItemModel(conn.connection, { ttl: 60_000 }, 'UpsertExcludingAuto');
  Never = await workItemModel(conn.connection, { ttl: 60_000, transactions: 'never' }, 'UpsertExcludingNever');
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

/** Mongoose's collection under the model (the guard lives there), with the driver's signatures. */
const coll = (M: WorkItemModel) => M.collection as unknown as mongo.Collection;

type Write = (M: WorkItemModel, x: mongo.ObjectId) => Promise<unknown>;
const excluding: [string, Write][] = [
  ['{ _id: { $ne: X } }', (M, x) => M.updateOne({ status: 'open', _id: { $ne: x } }, { $inc: { edits: 1 } }, { upsert: true }).exec()],
  ['{ _id: { $nin: [X] } }', (M, x) => M.updateOne({ status: 'open', _id: { $nin: [x] } }, { $inc: { edits: 1 } }, { upsert: true }).exec()],
  ['{ _id: { $not: { $eq: X } } }', (M, x) => coll(M).updateOne({ status: 'open', _id: { $not: { $eq: x } } }, { $inc: { edits: 1 } }, { upsert: true })],
  ['{ $nor: [{ _id: X }] }', (M, x) => coll(M).updateOne({ status: 'open', $nor: [{ _id: x }] }, { $inc: { edits: 1 } }, { upsert: true })],
];

describe.each([
  ["transactions: 'auto'", () => Auto],
  ["transactions: 'never' (check mode)", () => Never],
])('%s', (_mode, model) => {
  /** X (held by B) and Y (free), both open; afterwards the caller releases X. */
  async function seeded(M: WorkItemModel) {
    await rawCollection(M).deleteMany({});
    const x = new mongo.ObjectId();
    const y = new mongo.ObjectId();
    await rawCollection(M).insertMany([
      { _id: x, title: 'held by B', status: 'open', edits: 0 },
      { _id: y, title: 'free', status: 'open', edits: 0 },
    ]);
    await M.lock(x, 'holder-b');
    return { x, y };
  }

  afterEach(async () => {
    await model().releaseAllFor('holder-b');
  });

  test.each(excluding)('an upsert whose filter excludes the locked X with %s updates the free Y, as without the plugin', async (_name, write) => {
    const M = model();
    const { x, y } = await seeded(M);
    const result = await outcome(write(M, x));
    const counts = result.ok ? { matchedCount: (result.value as mongo.UpdateResult).matchedCount, upsertedCount: (result.value as mongo.UpdateResult).upsertedCount } : String(result.error);
    const stored = (await rawCollection(M).find({}).sort({ _id: 1 }).toArray()).map((d) => [String(d._id) === String(x) ? 'X' : String(d._id) === String(y) ? 'Y' : 'new', d.edits]);
    expect({ counts, stored }).toEqual({ counts: { matchedCount: 1, upsertedCount: 0 }, stored: [['X', 0], ['Y', 1]] });
  });

  test('control: the same write without upsert is accepted today (it updates Y)', async () => {
    const M = model();
    const { x } = await seeded(M);
    const result = await M.updateOne({ status: 'open', _id: { $ne: x } }, { $inc: { edits: 1 } }).exec();
    expect(result.matchedCount).toBe(1);
  });

  test.each<[string, Write]>([
    ['{ _id: { $not: { $ne: X } } }', (M, x) => coll(M).updateOne({ title: 'nomatch', _id: { $not: { $ne: x } } }, { $inc: { edits: 1 } }, { upsert: true })],
    ['{ $nor: [{ _id: { $ne: X } }] }', (M, x) => coll(M).updateOne({ title: 'nomatch', $nor: [{ _id: { $ne: x } }] }, { $inc: { edits: 1 } }, { upsert: true })],
  ])('control (must keep holding after a fix): a double negation %s may become the equality _id: X, so it is still refused', async (_name, write) => {
    const M = model();
    const { x } = await seeded(M);
    const result = await outcome(write(M, x));
    expect(!result.ok && result.error instanceof LockedError).toBe(true);
  });
});
