/**
 * PRODUCT.md property 15 / README "Several documents": `lockMany` resolves to every document or
 * throws `LockTargetNotFoundError` "for one that does not exist". lock-group.ts `loadMembers` keys
 * the loaded documents by `idKey(doc._id)`, and `doc._id` runs the schema's getters; the member is
 * keyed by the cast id (no getter). With a getter on `_id` (here the common "expose the ObjectId
 * as a string" getter) nothing matches: lockMany refuses with LockTargetNotFoundError a document
 * that exists, that `Model.lock` (which loads with findById, src/plugin.ts loadLocked) locks, and
 * that the write guard already reads without getters (`_doc._id`, src/guard/install.ts storedId).
 */
import { Schema, Types } from 'mongoose';
import { lockAll, lockPlugin, type LockableModel, type LockMethods } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';

jest.setTimeout(60_000);
const db = testDatabase('lockmany_id_getter');
let conn: MonitoredConnection;

beforeAll(async () => {
  conn = await connect(db.name);
});
afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

interface Account {
  _id: Types.ObjectId;
  balance: number;
}

async function accounts(name: string) {
  const schema = new Schema<Account, LockableModel<Account>, LockMethods>({
    _id: { type: Schema.Types.ObjectId, default: () => new Types.ObjectId(), get: (v: unknown) => (v == null ? v : String(v)) } as never,
    balance: { type: Number, default: 0 },
  });
  schema.plugin(lockPlugin, { ttl: 30_000 });
  const Model = conn.connection.model<Account, LockableModel<Account>>(name, schema);
  await Model.init();
  await Model.lockModel().init();
  return Model;
}

test('lockMany locks existing documents of a model whose _id has a getter (as Model.lock does)', async () => {
  const Account = await accounts('GetterAccount');
  const [a, b] = await Account.create([{ balance: 10 }, { balance: 20 }]);
  const ids = [a.get('_id', null, { getters: false }) as Types.ObjectId, b.get('_id', null, { getters: false }) as Types.ObjectId];

  const single = await Account.lock(ids[0], 'owner');
  await single.unlock();

  const docs = await Account.lockMany(ids, 'owner');
  expect(docs.map((d) => d.balance)).toEqual([10, 20]);
  await Account.unlockMany(docs);
});

test('lockAll locks a document of a model whose _id has a getter', async () => {
  const Account = await accounts('GetterAccount2');
  const [a] = await Account.create([{ balance: 5 }]);
  const [doc] = await lockAll([[Account, a.get('_id', null, { getters: false }) as Types.ObjectId]], 'owner');
  expect(doc.balance).toBe(5);
});
