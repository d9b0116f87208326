/**
 * The holder of a lock writes through every document write path whatever the `_id` type the
 * README lists (ObjectId, string, number, Date, Buffer, UUID) and Decimal128, and everyone else is
 * refused (PRODUCT.md properties 6 and 10; property 7: messages name the id readably).
 *
 * The guard recognises a locked instance's own write by comparing the write's filter `_id` with
 * the locked `_id`. It compared their canonical Extended JSON, in which a MongooseBuffer (the
 * instance's `_id`) and the BSON Binary that Mongoose casts a query's `_id` to differ: the holder's
 * `doc.updateOne()`, `doc.replaceOne()` and `doc.deleteOne()` on a Buffer `_id` were refused by
 * its own lock ("Document \t is locked", the id's raw bytes in the message). On Mongoose 8 (whose
 * UUID getter returns a string while the filter carries a Binary of subtype 4) even `save()` was.
 * Ids are now keyed by what mongod compares (src/id-key.ts: BSON encoding, numbers by value) and
 * matched on the value Mongoose sends (`_doc._id`, no getters); `describeId` prints bytes as hex.
 * (Found by the attack run, `__tests__/attack/holder-id-types.test.ts`.)
 */
import { Schema, Types, type SchemaDefinitionProperty } from 'mongoose';
import { LockedError, lockPlugin, type LockableModel, type LockMethods } from '../../src';
import { describeId } from '../../src/errors';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { outcome } from '../plugin/guard/support';

const db = testDatabase('holderidtypes');
let conn: MonitoredConnection;

beforeAll(async () => {
  conn = await connect(db.name);
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

let counter = 0;
const types: [string, SchemaDefinitionProperty, () => unknown][] = [
  ['ObjectId', Schema.Types.ObjectId, () => new Types.ObjectId()],
  ['String', String, () => `id-${++counter}`],
  ['Number', Number, () => 1000 + ++counter],
  ['Date', Date, () => new Date(Date.UTC(2020, 0, 1) + ++counter)],
  ['Buffer', Buffer, () => Buffer.from([1, 2, 3, ++counter])],
  ['UUID', 'UUID' as never, () => new Types.UUID()],
  ['Decimal128', Schema.Types.Decimal128, () => Types.Decimal128.fromString(`${++counter}.5`)],
];

describe.each([["transactions: 'auto'", 'auto'], ["transactions: 'never'", 'never']] as const)('%s', (_label, transactions) => {
  describe.each(types)('_id: %s', (typeName, type, make) => {
    type Item = { _id: unknown; title: string };
    let M: LockableModel<Item>;
    beforeAll(async () => {
      const schema = new Schema<Item, LockableModel<Item>, LockMethods>({ _id: type, title: String } as never);
      schema.plugin(lockPlugin, { ttl: 30_000, transactions });
      M = conn.connection.model<Item, LockableModel<Item>>(`IdType_${typeName}_${transactions}`, schema);
      await M.init();
      await M.lockModel().init();
    });

    test('the holder saves, updates, replaces, saves-and-unlocks and deletes; others are refused', async () => {
      const id = make() as never;
      await M.create({ _id: id, title: 'original' });
      const results: Record<string, string> = {};
      const settle = async (name: string, run: () => Promise<unknown>) => {
        const r = await outcome(run());
        results[name] = r.ok ? 'ok' : String((r as { error: unknown }).error).slice(0, 60);
      };
      const held = await M.lock(id, 'holder');
      const other = await M.findById(id).orFail();
      other.title = 'by another';
      const refused = await outcome(other.save());
      results['another owner'] = !refused.ok && (refused as { error: unknown }).error instanceof LockedError ? 'refused' : 'NOT refused';

      held.title = 'save';
      await settle('save()', () => held.save());
      await settle('doc.updateOne()', () => held.updateOne({ $set: { title: 'doc.updateOne' } }).exec());
      await settle('doc.replaceOne()', () => held.replaceOne({ title: 'doc.replaceOne' }).exec());
      held.title = 'saveAndUnlock';
      await settle('saveAndUnlock()', () => held.saveAndUnlock());
      const again = await M.lock(id, 'holder');
      await settle('doc.deleteOne()', () => again.deleteOne());
      expect(results).toEqual({
        'another owner': 'refused',
        'save()': 'ok',
        'doc.updateOne()': 'ok',
        'doc.replaceOne()': 'ok',
        'saveAndUnlock()': 'ok',
        'doc.deleteOne()': 'ok',
      });
    });
  });
});

test('a refusal names a Buffer or UUID id readably (hex, UUID form), not as raw bytes', async () => {
  const schema = new Schema({ _id: Buffer, title: String });
  schema.plugin(lockPlugin, { ttl: 30_000 });
  const B = conn.connection.model('IdType_message', schema) as unknown as LockableModel<{ title: string }>;
  await B.init();
  await B.lockModel().init();
  const id = Buffer.from([9, 10, 0, 255]);
  await B.create({ _id: id, title: 'x' } as never);
  await B.lock(id as never, 'holder');
  const result = await outcome(B.updateOne({ _id: id }, { $set: { title: 'y' } }).exec());
  expect((result as { error: unknown }).error).toBeInstanceOf(LockedError);
  expect(String((result as { error: Error }).error.message)).toContain('Binary(0, 090a00ff)');
  const uuid = new Types.UUID('0123456789abcdef0123456789abcdef');
  expect(describeId(uuid)).toBe('UUID("01234567-89ab-cdef-0123-456789abcdef")');
});
