/**
 * PRODUCT.md property 10 and README "Use majority write concern on replica sets":
 * guarded writes that carry a write concern (per write, or from the schema's `writeConcern`
 * option, which Mongoose applies to every write) must work as they do without the plugin, and
 * the write concern must reach the commit of the guard's transaction (an acknowledged guarded
 * write must be as durable as the caller asked). Inside a transaction only commit and abort may
 * carry a write concern (docs/mongodb-compatibility.md R12: the driver drops a statement's write
 * concern inside a transaction; the guard moves it to startTransaction, so it goes on the commit).
 * (Coverage written by the attack on the guard; it passed.)
 */
import { Schema } from 'mongoose';
import { lockPlugin, type LockableModel, type LockMethods } from '../../../src';
import { connect, testDatabase, type MonitoredConnection } from '../../support/db';
import { outcome } from './support';

interface Item {
  title: string;
  tags: string[];
}
type ItemModel = LockableModel<Item>;

const db = testDatabase('guard_wc');
let conn: MonitoredConnection;
let M: ItemModel;
let WithSchemaWc: ItemModel;
const seen: { name: string; wc: unknown; txn: boolean }[] = [];

beforeAll(async () => {
  conn = await connect(db.name);
  const plain = new Schema<Item, ItemModel, LockMethods>({ title: String, tags: [String] });
  plain.plugin(lockPlugin, { ttl: 30_000 });
  M = conn.connection.model<Item, ItemModel>('WcItem', plain);
  const withWc = new Schema<Item, ItemModel, LockMethods>({ title: String, tags: [String] }, { writeConcern: { w: 'majority', j: true } });
  withWc.plugin(lockPlugin, { ttl: 30_000 });
  WithSchemaWc = conn.connection.model<Item, ItemModel>('WcSchemaItem', withWc);
  for (const m of [M, WithSchemaWc]) {
    await m.init();
    await m.lockModel().init();
  }
  conn.connection.getClient().on('commandStarted', (event) => {
    seen.push({ name: event.commandName, wc: (event.command as { writeConcern?: unknown }).writeConcern, txn: (event.command as { autocommit?: unknown }).autocommit === false });
  });
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

test.each([
  ['updateOne with { writeConcern: { w: "majority" } }', () => M.updateOne({ title: 'a' }, { $set: { title: 'b' } }, { writeConcern: { w: 'majority' } }).exec()],
  ['updateOne with { w: 1 }', () => M.updateOne({ title: 'a' }, { $set: { title: 'b' } }, { w: 1 } as never).exec()],
  ['deleteMany with { writeConcern: { w: "majority", j: true } }', () => M.deleteMany({ title: 'a' }, { writeConcern: { w: 'majority', j: true } }).exec()],
  ['save() of a model whose schema sets writeConcern', async () => {
    const doc = await WithSchemaWc.findOne({ title: 'a' }).orFail();
    doc.title = 'b';
    return doc.save();
  }],
  ['saveAndUnlock() of a model whose schema sets writeConcern', async () => {
    const { _id } = await WithSchemaWc.findOne({ title: 'a' }).orFail();
    const doc = await WithSchemaWc.lock(_id, 'alice');
    doc.title = 'b';
    return doc.saveAndUnlock();
  }],
  ['bulkWrite with { writeConcern: { w: "majority" } }', async () => {
    const { _id } = await M.findOne({ title: 'a' }).orFail();
    return M.bulkWrite([{ updateOne: { filter: { _id }, update: { $set: { title: 'b' } } } }], { writeConcern: { w: 'majority' } });
  }],
] as [string, () => Promise<unknown>][])('%s works, and the write concern goes on the commit', async (_name, write) => {
  await M.create({ title: 'a' });
  await WithSchemaWc.create({ title: 'a' });
  seen.length = 0;
  const result = await outcome(write());
  expect(result.ok ? 'ok' : String((result as { error: unknown }).error)).toBe('ok');
  const inTxnWithWc = seen.filter((s) => s.txn && s.wc !== undefined && s.name !== 'commitTransaction' && s.name !== 'abortTransaction');
  expect(inTxnWithWc).toEqual([]);
  if (seen.some((s) => s.name === 'commitTransaction')) {
    expect(seen.filter((s) => s.name === 'commitTransaction').every((s) => s.wc !== undefined)).toBe(true);
  }
  await M.deleteMany({}, { skipLockCheck: true });
  await WithSchemaWc.deleteMany({}, { skipLockCheck: true });
});
