/**
 * PRODUCT.md properties 6 and 11 on the write guard: what the guard checks is exactly what the
 * server receives. The driver serializes a write when it sends it (js-bson calls a value's own
 * `toBSON()` and reads getters at that moment), so a value can serialize to one thing when the
 * guard's lock check is sent and to another when the write is sent. The guard now reads the parts
 * of a write it judges as they serialize, once, and sends the values decoded from those bytes
 * (src/guard/sent-values.ts; bsonRoundTrip, src/id-value.ts).
 *
 * X is held by B; each write below would reach X only through a value that changes between two
 * serializations (the first gives a free id F or a harmless filter, every later one X), or that
 * the serializer leaves out (a function). Before the change every case wrote X (or re-created it)
 * in both modes; now each leaves X as B has it.
 */
import { mongo } from 'mongoose';
import { LockedError } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';
import { outcome, rawCollection } from '../plugin/guard/support';

const db = testDatabase('guardvaluesassent');
let conn: MonitoredConnection;
let Auto: WorkItemModel;
let Never: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  Auto = await workItemModel(conn.connection, { ttl: 60_000 }, 'ValuesAsSentAuto');
  Never = await workItemModel(conn.connection, { ttl: 60_000, transactions: 'never' }, 'ValuesAsSentNever');
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

const coll = (M: WorkItemModel) => M.collection as unknown as mongo.Collection;

/** An object whose first serialization is `first` and every later one `later` (js-bson calls toBSON each time). */
function stateful(first: unknown, later: unknown): object {
  let calls = 0;
  return { toBSON: () => (calls++ === 0 ? first : later) };
}

/** The same, passing `instanceof ObjectId` (issue 16 item 5's forged id, made stateful). */
function statefulObjectId(first: unknown, later: unknown): object {
  return Object.assign(Object.create(mongo.ObjectId.prototype) as object, stateful(first, later));
}

describe.each([
  ["transactions: 'auto'", () => Auto],
  ["transactions: 'never' (check mode)", () => Never],
])('%s', (_mode, model) => {
  afterEach(async () => {
    await model().releaseAllFor('holder-b');
  });

  /** X, held by B; F, a free id no document has. */
  async function held(M: WorkItemModel) {
    await rawCollection(M).deleteMany({});
    const { _id: x } = await M.create({ title: 'held by B' });
    await M.lock(x, 'holder-b');
    return { x: x as mongo.ObjectId, f: new mongo.ObjectId() };
  }

  test('a filter _id whose first serialization is a free id and the next ones X: X is not written', async () => {
    const M = model();
    const { x, f } = await held(M);
    const result = await outcome(coll(M).updateOne({ _id: stateful(f, x) } as mongo.Filter<mongo.Document>, { $inc: { edits: 1 } }));
    expect({ ok: result.ok, matched: result.ok ? (result.value as mongo.UpdateResult).matchedCount : null, x: (await rawCollection(M).findOne({ _id: x }))?.edits }).toEqual({ ok: true, matched: 0, x: 0 });
  });

  test('a filter whose first serialization matches nothing and the next ones X: X is not written', async () => {
    const M = model();
    const { x } = await held(M);
    const result = await outcome(coll(M).updateOne(stateful({ title: 'nothing' }, { _id: x }) as mongo.Filter<mongo.Document>, { $inc: { edits: 1 } }));
    expect({ ok: result.ok, x: (await rawCollection(M).findOne({ _id: x }))?.edits }).toEqual({ ok: true, x: 0 });
  });

  test('a filter _id the serializer leaves out (a function) is no _id: the write is checked against what the rest matches (X) and refused', async () => {
    const M = model();
    const { x } = await held(M);
    const result = await outcome(coll(M).deleteMany({ _id: () => x } as unknown as mongo.Filter<mongo.Document>));
    expect({ refused: !result.ok && result.error instanceof LockedError, x: (await rawCollection(M).findOne({ _id: x }))?.title ?? 'deleted' }).toEqual({ refused: true, x: 'held by B' });
  });

  test("an upsert's $setOnInsert _id whose first serialization is a free id and the next ones X (deleted by B, who keeps the lock): X is not re-created", async () => {
    const M = model();
    const { x, f } = await held(M);
    await rawCollection(M).deleteOne({ _id: x });
    const result = await outcome(coll(M).updateOne({ title: 'absent' }, { $setOnInsert: { _id: statefulObjectId(f, x) } as never, $set: { status: 'open' } }, { upsert: true }));
    // The guard sends the value it checked: F, never X.
    expect({ ok: result.ok, recreated: await rawCollection(M).countDocuments({ _id: x }), inserted: await rawCollection(M).countDocuments({ _id: f }) }).toEqual({ ok: true, recreated: 0, inserted: 1 });
  });
});
