/**
 * Numeric `_id` aliases (PRODUCT.md property 10: writes to documents nobody has locked succeed as
 * they would without the plugin; property 6 for locked ones).
 *
 * mongod compares numbers by value across BSON types: `1` (int), `Long(1)`, `1.0` (double) and
 * `Decimal128('1.0')` are one value for a query and one key of the unique `_id` index
 * (src/mongo/base/compare_numbers.h; manual "Comparison/Sort Order"). The guard de-duplicated a
 * write's target ids by their canonical Extended JSON, which keeps the BSON type, so
 * `{ _id: { $in: [1, Long(1)] } }` gave two targets for one document: the claim inserted two lock
 * records with equal `_id`s inside its transaction, got a duplicate-key error of its own making,
 * took it for a concurrent writer (ClaimRaceError, TransientTransactionError) and retried it for
 * 120 s, every retry failing the same way. Ids are now keyed by numeric value (src/id-key.ts), and
 * the claim de-duplicates its ids itself. (Found by the attack run,
 * `__tests__/attack/numeric-id-aliases.test.ts`.)
 *
 * The backend must compare numbers by value across types for these to mean anything: mongod
 * does; the emulator on main may not keep numeric BSON types apart at all (branch emulator2
 * makes it round-trip them faithfully), in which case the aliases here are one value to it
 * anyway. The first three cases failed on main's emulator before the fix (the claim's own
 * duplicate key, retried for 120 s).
 */
import { Schema, Types, mongo } from 'mongoose';
import { LockedError, lockPlugin, type LockableModel, type LockMethods } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { outcome } from '../plugin/guard/support';

const db = testDatabase('numericids');
let conn: MonitoredConnection;

beforeAll(async () => {
  conn = await connect(db.name);
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

/** Settles `promise` or gives up after `ms` (the defect retried for 120 s). */
async function within<T>(promise: Promise<T>, ms: number): Promise<{ settled: boolean; value?: { ok: boolean; error?: unknown } }> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<{ settled: false }>((resolve) => {
    timer = setTimeout(() => resolve({ settled: false }), ms);
  });
  const settled = outcome(promise).then((value) => ({ settled: true, value }));
  try {
    return await Promise.race([settled, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

type N = { _id: number; n: number };
type D = { _id: Types.Decimal128; n: number };
let counter = 0;

async function numberModel(): Promise<LockableModel<N>> {
  const schema = new Schema<N, LockableModel<N>, LockMethods>({ _id: Number, n: Number });
  schema.plugin(lockPlugin, { ttl: 10_000 });
  const M = conn.connection.model<N, LockableModel<N>>(`NumericId${++counter}`, schema);
  await M.init();
  await M.lockModel().init();
  return M;
}

type RawWrites = {
  updateMany(...args: unknown[]): Promise<{ matchedCount: number }>;
  updateOne(...args: unknown[]): Promise<{ matchedCount: number }>;
};

test('Model.collection.updateMany({ _id: { $in: [1, Long(1)] } }) on an unlocked document completes at once', async () => {
  const M = await numberModel();
  await M.create({ _id: 1, n: 0 });
  const raw = M.collection as unknown as RawWrites;
  const result = await within(raw.updateMany({ _id: { $in: [1, mongo.BSON.Long.fromNumber(1)] } }, { $inc: { n: 1 } }), 8_000);
  expect(result).toMatchObject({ settled: true, value: { ok: true } });
  expect((await M.findById(1).lean())?.n).toBe(1);
  expect(await M.lockModel().countDocuments({})).toBe(0);
}, 30_000);

test('updateMany({ _id: { $in: [Decimal128 1, Decimal128 1.0] } }) on a Decimal128 _id completes at once', async () => {
  const schema = new Schema<D, LockableModel<D>, LockMethods>({ _id: Schema.Types.Decimal128, n: Number });
  schema.plugin(lockPlugin, { ttl: 10_000 });
  const M = conn.connection.model<D, LockableModel<D>>('DecimalId', schema);
  await M.init();
  await M.lockModel().init();
  await M.create({ _id: Types.Decimal128.fromString('1'), n: 0 });
  const result = await within(M.updateMany({ _id: { $in: [Types.Decimal128.fromString('1'), Types.Decimal128.fromString('1.0')] } }, { $inc: { n: 1 } }).exec(), 8_000);
  expect(result).toMatchObject({ settled: true, value: { ok: true } });
  expect(await M.lockModel().countDocuments({})).toBe(0);
}, 30_000);

test('Model.bulkWrite naming one document as 1 and as Long(1) completes at once and applies both operations', async () => {
  const M = await numberModel();
  await M.create({ _id: 7, n: 0 });
  const result = await within(
    M.bulkWrite([
      { updateOne: { filter: { _id: 7 }, update: { $inc: { n: 1 } } } },
      { updateOne: { filter: { _id: mongo.BSON.Long.fromNumber(7) as never }, update: { $inc: { n: 1 } } } },
    ]),
    8_000,
  );
  expect(result).toMatchObject({ settled: true, value: { ok: true } });
  expect((await M.findById(7).lean())?.n).toBe(2);
}, 30_000);

test('a lock on 1 refuses an anonymous write naming Long(1) and 1.0 (one document)', async () => {
  const M = await numberModel();
  await M.create({ _id: 3, n: 0 });
  await M.lock(3, 'holder');
  const raw = M.collection as unknown as RawWrites;
  const result = await within(raw.updateMany({ _id: { $in: [new mongo.Double(3), mongo.BSON.Long.fromNumber(3)] } }, { $inc: { n: 1 } }), 8_000);
  expect(result.settled).toBe(true);
  expect(result.value?.error).toBeInstanceOf(LockedError);
  expect((await M.findById(3).lean())?.n).toBe(0);
}, 30_000);
