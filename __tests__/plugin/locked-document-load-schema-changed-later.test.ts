/**
 * The document `Model.lock` returns is the one `findById(id).read('primary').session(null)` returns
 * (src/document-load.ts), also after the model's schema changed at run time in ways Mongoose's
 * queries honour: `schema.path(p).select(false)` (SchemaType.prototype.select, a public API) or
 * `schema.add({ p: { type, select: false } })` on the compiled model's schema. findById reads the
 * schema at each query (lib/queryHelpers.js applyPaths: `type.selected === false` becomes
 * `{ p: 0 }`; walked when `schema._hasSelectedPaths !== false`, which `schema.add` of a select path
 * sets), so after such an `add` it stops returning the path at once; `select: false` is what
 * applications use to keep password hashes and secrets out of loaded documents. (`path(p).select(false)`
 * alone does not reach findById on Mongoose 9, which cached `_hasSelectedPaths` when compiling, so
 * there the two agree; on Mongoose 8 findById leaves the path out at once and the lock does not.)
 *
 * document-load.ts caches the model's static problems (cachedModelProblem: "select: false paths"
 * among them) per model, invalidated only by a change in the number of discriminators. A model
 * locked once before the change keeps the direct load, which sends no projection: the locked
 * document carries the field findById hides.
 */
import mongoose, { Schema } from 'mongoose';
import { lockPlugin, type LockMethods } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';

const db = testDatabase('docloadlater');
let conn: MonitoredConnection;
let counter = 0;

interface Account {
  name: string;
  passwordHash?: string;
  apiSecret?: string;
}
type Lockable = mongoose.Model<Account> & { lock(id: unknown, owner: string): Promise<mongoose.HydratedDocument<Account> & LockMethods> };

beforeAll(async () => {
  conn = await connect(db.name);
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

async function accounts(): Promise<Lockable> {
  const model = conn.connection.model(`LaterAccount${++counter}`, new Schema<Account>({ name: String, passwordHash: String }).plugin(lockPlugin)) as unknown as Lockable;
  await model.init();
  // Stored with the driver: both fields present in the document.
  await model.collection.insertOne({ name: 'first', passwordHash: 'h1', apiSecret: 's1' });
  return model;
}

/** The fields of `doc` that findById's and the lock's documents disagree on. */
async function compare(model: Lockable, id: unknown): Promise<{ findById: Record<string, unknown>; lock: Record<string, unknown> }> {
  const expected = (await model.findById(id).read('primary').session(null).exec())!;
  const locked = await model.lock(id, 'owner');
  const result = { findById: expected.toObject() as unknown as Record<string, unknown>, lock: locked.toObject() as unknown as Record<string, unknown> };
  await locked.unlock();
  return result;
}

test("schema.path(p).select(false) after the model's first lock: the locked document agrees with findById's on p", async () => {
  const model = await accounts();
  const { _id: id } = await model.create({ name: 'ada', passwordHash: 'secret-hash' });
  // A first lock, before the change.
  const before = await compare(model, id);
  expect(before.lock).toEqual(before.findById);
  expect(before.lock.passwordHash).toBe('secret-hash');

  model.schema.path('passwordHash').select(false);
  const after = await compare(model, id);
  // Mongoose 9 caches whether a schema has select paths when it compiles (schema._hasSelectedPaths,
  // lib/queryHelpers.js applyPaths), so findById may still return it; the lock must agree either way.
  expect(after.lock).toEqual(after.findById);
});

test("schema.add({ p: { select: false } }) after the model's first lock: the locked document, like findById's, leaves p out", async () => {
  const model = await accounts();
  const { _id: id } = await model.create({ name: 'grace', passwordHash: 'h' });
  await model.collection.updateOne({ _id: id }, { $set: { apiSecret: 'sk_live_123' } });
  await compare(model, id);

  model.schema.add({ apiSecret: { type: String, select: false } });
  const after = await compare(model, id);
  expect(after.findById.apiSecret).toBeUndefined(); // schema.add of a select: false path: findById leaves it out at once
  expect(after.lock).toEqual(after.findById);
});

test('control: the same schema.add before the model was ever locked, the locked document leaves p out like findById (the cache is the difference)', async () => {
  const model = await accounts();
  const { _id: id } = await model.create({ name: 'katherine', passwordHash: 'h' });
  await model.collection.updateOne({ _id: id }, { $set: { apiSecret: 'sk_live_456' } });
  model.schema.add({ apiSecret: { type: String, select: false } });
  const after = await compare(model, id);
  expect(after.findById.apiSecret).toBeUndefined();
  expect(after.lock).toEqual(after.findById);
});
