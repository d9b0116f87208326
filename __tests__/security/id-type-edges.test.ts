/**
 * The edges of what an `_id` argument may be (PRODUCT.md property 7), judged alike for every type:
 *  - a Decimal128 NaN or infinity is refused, as the number NaN and Infinity are (they were
 *    accepted: a lock record with a NaN `_id` was written);
 *  - the driver's Long, which is how an int64 beyond 2^53 comes back from the server, is accepted
 *    where the schema's `_id` casts it (BigInt, Mixed), and sent as that int64 (it was refused as
 *    "got a Long"); an unsigned Long above 2^63 - 1, which BSON would carry as a negative int64
 *    (another document), is refused;
 *  - an object whose class claims one type and whose BSON is another is refused also on a Mixed
 *    `_id`, where any scalar type would do (an ObjectId look-alike serializing to a string).
 */
import { Schema, Types, mongo } from 'mongoose';
import { InvalidLockArgumentError, lockPlugin, type LockableModel } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';

interface Item {
  _id: unknown;
  title: string;
}

const db = testDatabase('idtypeedges');
let conn: MonitoredConnection;
const models: Record<string, LockableModel<Item>> = {};

beforeAll(async () => {
  conn = await connect(db.name);
  for (const [name, type] of [
    ['Mixed', Schema.Types.Mixed],
    ['Decimal', Schema.Types.Decimal128],
    ['BigInt', BigInt],
  ] as [string, unknown][]) {
    const schema = new Schema<Item>({ _id: type as typeof String, title: String });
    schema.plugin(lockPlugin);
    models[name] = conn.connection.model<Item, LockableModel<Item>>(`IdEdge${name}`, schema);
    await models[name].init();
    await models[name].lockModel().init();
  }
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

async function refused(call: () => Promise<unknown>): Promise<InvalidLockArgumentError> {
  conn.resetCommands();
  const error = await call().then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(InvalidLockArgumentError);
  expect((error as InvalidLockArgumentError).argument).toBe('id');
  expect(conn.commands).toEqual([]);
  return error as InvalidLockArgumentError;
}

test.each([
  ['Mixed', () => mongo.Decimal128.fromString('NaN')],
  ['Mixed', () => mongo.Decimal128.fromString('Infinity')],
  ['Mixed', () => mongo.Decimal128.fromString('-Infinity')],
  ['Decimal', () => 'NaN'],
  ['Decimal', () => 'Infinity'],
  ['Decimal', () => mongo.Decimal128.fromString('-Infinity')],
] as [string, () => unknown][])('a %s _id refuses a Decimal128 that is not finite, as Number refuses NaN', async (model, id) => {
  const error = await refused(() => models[model].lock(id() as string, 'alice'));
  expect(error.message).toMatch(/not a finite number/);
  await refused(() => models[model].isLocked(id() as string));
});

test.each(['BigInt', 'Mixed'])('a %s _id accepts a Long and sends it as that int64', async (model) => {
  const M = models[model];
  const big = 2n ** 60n + 3n;
  await M.create({ _id: big, title: 'big' });
  const doc = await M.lock(mongo.Long.fromBigInt(big) as unknown as string, 'alice');
  expect(doc.heldLock()!.documentId).toBe(big);
  expect(await M.isLocked(big as unknown as string)).toBe(true);
  expect((await M.lockStatus([mongo.Long.fromBigInt(big) as unknown as string]))[0]?.documentId).toBe(big);
  await doc.unlock();
});

test('an unsigned Long above 2^63 - 1 is refused (BSON would send it as a negative int64)', async () => {
  const unsigned = mongo.Long.fromString('18446744073709551615', true); // sent as the int64 -1
  await refused(() => models.Mixed.lock(unsigned as unknown as string, 'alice'));
  await refused(() => models.BigInt.forceUnlock(unsigned as unknown as string));
});

test('on a Mixed _id, an ObjectId look-alike serializing to a string is refused (its class claims an ObjectId)', async () => {
  const disguised = Object.assign(Object.create(Types.ObjectId.prototype) as Types.ObjectId, { toBSON: () => 'abc' });
  const error = await refused(() => models.Mixed.lock(disguised as unknown as string, 'alice'));
  expect(error.message).toMatch(/ObjectId/);
});
