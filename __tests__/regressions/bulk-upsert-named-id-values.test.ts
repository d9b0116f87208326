/**
 * Attack 11 on the ordered-bulkWrite upsert `_id` change (src/guard/upsert-id.ts, write-guard.ts
 * `bulk()`): an `_id` the caller names in `$set` / `$setOnInsert` of an upsert is taken as a
 * target and claimed in the lock collection exactly as written, without the validation every
 * other target gets (filter ids pass idsNamedBy/isEqualityValue: no regex, no operator object,
 * no array; searched ids are stored `_id`s).
 *
 * When the upsert MATCHES a document, mongod never applies `$setOnInsert` (nor validates its
 * `_id`: storage validation runs on the inserted document only), so the unguarded bulk succeeds.
 * The guard instead:
 *  1. (property 11, property 10) sends a regex `_id` as a query operand to the lock collection
 *     (`{ _id: { $in: [U, /^z/] } }`): it matches the lock records of unrelated documents, and
 *     a lock someone else holds on one of them refuses a bulk that never touches it.
 *  2. (property 10) inserts a claim record with an array `_id` (transactions: 'auto'), which
 *     mongod refuses: the bulk fails where the unguarded one succeeds.
 *  3. (property 10, README "Limits" says upserts naming their `_id` in `$set` are reached) an
 *     upsert whose filter has a non-equality condition on `_id` and whose `$set` names the
 *     inserted `_id` is not reached by later operations of the ordered bulk.
 */
import { Schema, type Model } from 'mongoose';
import { lockPlugin, type LockableModel, type LockMethods } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { outcome } from '../plugin/guard/support';

interface Item {
  _id: unknown;
  title: string;
  n?: number;
}
type ItemModel = LockableModel<Item>;

const db = testDatabase('attack11_named');
let conn: MonitoredConnection;
let M: ItemModel;
let N: ItemModel; // transactions: 'never' (check mode), another collection
let Plain: Model<Item>;
const lockCommands: Record<string, unknown>[] = [];

function schema(options: Record<string, unknown>): Schema<Item, ItemModel, LockMethods> {
  const s = new Schema<Item, ItemModel, LockMethods>({ _id: Schema.Types.Mixed, title: String, n: Number });
  s.plugin(lockPlugin, { ttl: 60_000, ...options });
  return s;
}

beforeAll(async () => {
  conn = await connect(db.name);
  M = conn.connection.model<Item, ItemModel>('NamedItem', schema({}));
  N = conn.connection.model<Item, ItemModel>('NamedItemNever', schema({ transactions: 'never' }));
  for (const model of [M, N]) {
    await model.init();
    await model.lockModel().init();
  }
  Plain = conn.connection.model<Item>('PlainNamedItem', new Schema<Item>({ _id: Schema.Types.Mixed, title: String, n: Number }), 'plainnameditems');
  await Plain.init();
  conn.connection.getClient().on('commandStarted', (event) => {
    const c = event.command as Record<string, unknown>;
    const target = c[event.commandName];
    if (typeof target === 'string' && target.endsWith('.locks')) lockCommands.push(c);
  });
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

beforeEach(async () => {
  for (const model of [M, N]) {
    await model.collection.deleteMany({}, { skipLockCheck: true } as never);
  }
  await Plain.collection.deleteMany({});
  lockCommands.length = 0;
});

/** Runs the same bulk through the raw collection of an unguarded model and through a guarded one. */
async function both(model: ItemModel, ops: () => unknown[]) {
  await Plain.collection.insertOne({ _id: 'u1', title: 'matched' } as never);
  const plain = await outcome(Plain.collection.bulkWrite(ops() as never));
  const guarded = await outcome(model.collection.bulkWrite(ops() as never));
  const summary = (o: Awaited<ReturnType<typeof outcome>>) =>
    o.ok ? { ok: true, matched: (o.value as { matchedCount: number }).matchedCount, upserted: (o.value as { upsertedCount: number }).upsertedCount } : { ok: false, error: String((o.error as Error)?.name) };
  return { plain: summary(plain), guarded: summary(guarded) };
}

describe.each([
  ["transactions: 'auto'", () => M],
  ["transactions: 'never'", () => N],
])('%s: a regex named as the upsert _id is evaluated as a query on the lock collection', (_mode, model) => {
  test('a lock B holds on an unrelated document "zzz" refuses a bulk that only touches "u1" (unguarded: succeeds)', async () => {
    const m = model();
    await m.create({ _id: 'u1', title: 'matched' });
    await m.create({ _id: 'zzz', title: 'held by B, never written by this bulk' });
    await m.lock('zzz', 'holder-b');
    // The upsert matches u1: $setOnInsert (and its _id) is never applied, as without the plugin.
    const ops = () => [{ updateOne: { filter: { title: 'matched' }, update: { $set: { n: 1 }, $setOnInsert: { _id: /^z/ } }, upsert: true } }];
    const result = await both(m, ops);
    // No lock-collection command may carry the caller's regex (property 11: never a query).
    const regexSent = lockCommands.some((c) => JSON.stringify(c, (_k, v: unknown) => (v instanceof RegExp ? `REGEX:${v.source}` : v)).includes('REGEX:'));
    expect({ ...result, regexSentToLocks: regexSent }).toEqual({
      plain: { ok: true, matched: 1, upserted: 0 },
      guarded: { ok: true, matched: 1, upserted: 0 },
      regexSentToLocks: false,
    });
    expect((await m.collection.findOne({ _id: 'zzz' } as never))?.title).toBe('held by B, never written by this bulk');
  });
});

test("transactions: 'auto': an array named as a matched upsert's _id makes the guard insert an invalid claim record (unguarded: succeeds)", async () => {
  await M.create({ _id: 'u1', title: 'matched' });
  const ops = () => [{ updateOne: { filter: { title: 'matched' }, update: { $set: { n: 1 }, $setOnInsert: { _id: ['a', 'b'] } }, upsert: true } }];
  const result = await both(M, ops);
  expect(result).toEqual({ plain: { ok: true, matched: 1, upserted: 0 }, guarded: { ok: true, matched: 1, upserted: 0 } });
  expect((await M.findById('u1').lean())?.n).toBe(1);
});

test('an upsert whose filter has a range on _id and whose $set names the _id is reached by a later operation, as without the plugin', async () => {
  const run = async (model: Model<Item>) => {
    await model.collection.bulkWrite([
      { updateOne: { filter: { _id: { $gt: 5 }, title: 'g' }, update: { $set: { _id: 7, n: 1 } }, upsert: true } },
      { updateMany: { filter: { title: 'g' }, update: { $inc: { n: 10 } } } },
    ] as never);
    return (await model.collection.find({ title: 'g' }).toArray()).map((d) => d.n as number);
  };
  expect({ plain: await run(Plain), guarded: await run(M as unknown as Model<Item>) }).toEqual({ plain: [11], guarded: [11] });
});

describe('held (coverage)', () => {
  test('numeric aliases: a $setOnInsert _id Long-equal to a document B holds (stored as 1.0) refuses the bulk', async () => {
    const { mongo } = await import('mongoose');
    await M.create({ _id: 'u1', title: 'matched' });
    await M.collection.insertOne({ _id: 1.0, title: 'held' } as never, {} as never);
    await M.lock(1.0, 'holder-b');
    const r = await outcome(
      M.collection.bulkWrite([
        { updateOne: { filter: { title: 'matched' }, update: { $setOnInsert: { _id: mongo.Long.fromNumber(1) } }, upsert: true } },
        { updateMany: { filter: { title: 'nothing' }, update: { $set: { title: 'x' } } } },
      ] as never),
    );
    expect(r.ok).toBe(false);
    expect((await M.collection.findOne({ _id: 1 } as never))?.title).toBe('held');
  });

  test("the owner's own lock on the named _id does not refuse its bulk (lockOwner)", async () => {
    await M.create({ _id: 'u1', title: 'matched' });
    await M.create({ _id: 'mine', title: 'held by alice' });
    await M.lock('mine', 'alice');
    const r = await outcome(
      M.bulkWrite([{ updateOne: { filter: { title: 'matched' }, update: { $set: { n: 2 }, $setOnInsert: { _id: 'mine' } }, upsert: true } }], { lockOwner: 'alice' } as never),
    );
    expect(r.ok).toBe(true);
    expect((await M.findById('u1').lean())?.n).toBe(2);
  });
});
