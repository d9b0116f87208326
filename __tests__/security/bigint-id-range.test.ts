/**
 * A bigint id outside the signed 64-bit range is bad input (PRODUCT.md property 7), not another
 * document's id.
 *
 * isScalarId (src/arguments.ts) accepts every bigint, and a Mixed `_id` casts it unchanged. js-bson
 * writes a bigint as an int64 modulo 2^64 without complaint, so freshId (src/id-value.ts)
 * serializes `2n ** 64n + 5n` to the int64 5 and hands back `5n`: `forceUnlock(2n ** 64n + 5n)`
 * releases alice's lock on document 5, `lock(2n ** 64n + 5n)` locks and loads document 5. Mongoose's
 * own BigInt type refuses such values ("Mongoose only supports BigInts between
 * -9223372036854775808 and 9223372036854775807 because MongoDB does not support arbitrary
 * precision integers", lib/cast/bigint.js); the plugin must refuse them before sending anything.
 */
import { Schema } from 'mongoose';
import { InvalidLockArgumentError, lockPlugin, type LockableModel } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';

interface Item {
  _id: unknown;
  title: string;
}

const db = testDatabase('bigintrange');
let conn: MonitoredConnection;
let Mixed: LockableModel<Item>;

beforeAll(async () => {
  conn = await connect(db.name);
  const schema = new Schema<Item>({ _id: Schema.Types.Mixed, title: String });
  schema.plugin(lockPlugin);
  Mixed = conn.connection.model<Item, LockableModel<Item>>('BigIntRangeItem', schema);
  await Mixed.init();
  await Mixed.lockModel().init();
  await Mixed.create({ _id: 5, title: 'five' });
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

const outOfRange: [string, bigint][] = [
  ['2^64 + 5 (wraps to 5)', 2n ** 64n + 5n],
  ['2^63 (wraps to -2^63)', 2n ** 63n],
  ['-(2^63) - 1 (wraps to 2^63 - 1)', -(2n ** 63n) - 1n],
];

describe.each(outOfRange)('the bigint %s as a Mixed _id', (_label, id) => {
  test.each([
    ['lock', () => Mixed.lock(id as unknown as string, 'mallory')],
    ['isLocked', () => Mixed.isLocked(id as unknown as string)],
    ['forceUnlock', () => Mixed.forceUnlock(id as unknown as string)],
    ['unlock', () => Mixed.unlock(id as unknown as string, 'alice')],
  ] as [string, () => Promise<unknown>][])('%s refuses it before sending anything', async (_name, call) => {
    conn.resetCommands();
    const error = await call().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(InvalidLockArgumentError);
    expect(conn.commands).toEqual([]);
  });
});

test("forceUnlock(2n ** 64n + 5n) leaves alice's lock on document 5 alone", async () => {
  const doc = await Mixed.lock(5, 'alice');
  await Mixed.forceUnlock((2n ** 64n + 5n) as unknown as string).catch(() => undefined);
  // Still alice's: her release succeeds (it fails with LockNotHeldError 'released' if the
  // forceUnlock of the out-of-range id released document 5).
  await expect(doc.unlock()).resolves.toBeUndefined();
});
