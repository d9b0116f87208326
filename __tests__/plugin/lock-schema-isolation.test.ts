/**
 * Issue 16, item 6: other global plugins must not reach the lock collection.
 *
 * Mongoose applies every global plugin (`mongoose.plugin(fn)`, `connection.plugin(fn)`) to every
 * schema it compiles into a model (lib/helpers/schema/applyPlugins.js, called from
 * Mongoose.prototype._model and Connection.prototype.model), the plugin's own lock schema
 * included. A common global plugin that adds a `tenant` field with a default and a unique index
 * put that index on the lock collection: every lock record lacks `tenant` (records are written by
 * the plugin's own commands), so the second record ever written was a duplicate key and locking
 * broke. Fields, hooks, timestamps and option changes from such plugins have no business in the
 * lock model either. The lock schema must stay exactly the plugin's, whatever is registered
 * globally, in Mongoose 8 and 9; the application's own models keep getting the global plugins.
 * Each test uses its own Mongoose instance, so the global plugins never leak into other tests.
 */
import mongoose, { type Connection, type Schema } from 'mongoose';
import * as os from 'node:os';
import { LockedError, lockPlugin, type LockableModel, type LockMethods } from '../../src';
import { testUri, uniqueDbName } from '../../test-backend/test-env';

interface Item {
  title: string;
}

const hookRuns: string[] = [];

/** The kind of global plugin multi-tenant applications register: a field with a default, unique. */
function tenantPlugin(schema: Schema): void {
  schema.add({ tenant: { type: String, default: 'acme' } });
  schema.index({ tenant: 1 }, { unique: true });
}

function timestampsPlugin(schema: Schema): void {
  schema.set('timestamps', true);
}

function hookPlugin(schema: Schema): void {
  schema.pre('save', function recordSave() {
    hookRuns.push('save');
  });
  schema.pre('findOneAndUpdate', function refuseEverything() {
    throw new Error('a global hook ran on a lock model query');
  });
}

function lenientPlugin(schema: Schema): void {
  schema.set('strict', false);
  schema.set('versionKey', '__v');
}

async function isolatedMongoose(): Promise<{ instance: mongoose.Mongoose; connection: Connection }> {
  const instance = new mongoose.Mongoose();
  const extra = Number(mongoose.version.split('.')[0]) >= 9 ? { runtimeAdapters: { os } } : {};
  const connection = await instance.createConnection(testUri(), { dbName: uniqueDbName('lockschema'), ...extra } as mongoose.ConnectOptions).asPromise();
  return { instance, connection };
}

async function lockCollectionIndexNames(model: LockableModel<Item>): Promise<string[]> {
  const specs = await model.lockModel().collection.listIndexes().toArray();
  return specs.map((spec) => String(spec.name)).sort();
}

describe.each([
  ['mongoose.plugin()', (instance: mongoose.Mongoose, _connection: Connection, fn: (schema: Schema) => void) => instance.plugin(fn)],
  ['connection.plugin()', (_instance: mongoose.Mongoose, connection: Connection, fn: (schema: Schema) => void) => connection.plugin(fn)],
] as const)('global plugins registered with %s', (_label, register) => {
  let instance: mongoose.Mongoose;
  let connection: Connection;
  let Items: LockableModel<Item>;

  beforeAll(async () => {
    ({ instance, connection } = await isolatedMongoose());
    for (const fn of [tenantPlugin, timestampsPlugin, hookPlugin, lenientPlugin]) register(instance, connection, fn);
    const schema = new instance.Schema<Item, LockableModel<Item>, LockMethods>({ title: String });
    schema.plugin(lockPlugin, { ttl: 10_000 });
    Items = connection.model<Item, LockableModel<Item>>('IsolatedItem', schema);
    await Items.init();
    await Items.lockModel().init();
  });

  afterAll(async () => {
    await connection.dropDatabase().catch(() => undefined);
    await connection.close();
  });

  test("the application's own model got them (they are registered and working)", () => {
    expect(Items.schema.path('tenant')).toBeDefined();
    expect(Items.schema.indexes().some(([fields]) => 'tenant' in fields)).toBe(true);
  });

  test('locking many documents works: no foreign unique index on the lock collection', async () => {
    const a = await Items.create({ title: 'a' });
    // The tenant index is unique on the application's collection: one document per tenant.
    await Items.collection.dropIndex('tenant_1');
    const b = await Items.collection.insertOne({ title: 'b' });
    const c = await Items.collection.insertOne({ title: 'c' });
    for (const id of [a._id, b.insertedId, c.insertedId]) expect((await Items.lock(id, 'alice')).heldLock()).not.toBeNull();
    await expect(Items.lock(b.insertedId, 'bob')).rejects.toBeInstanceOf(LockedError);
    expect(await Items.releaseAllFor('alice')).toBe(3);
    expect(await lockCollectionIndexNames(Items)).toEqual(['_id_', 'expiresAt_ttl', 'owner_1__id_1']);
  });

  test('the lock schema is exactly the plugin\'s: no field, option or hook from a global plugin', async () => {
    const lockModel = Items.lockModel();
    const schema = lockModel.schema;
    expect(Object.keys(schema.paths).sort()).toEqual(['_id', 'acquiredAt', 'claim', 'expiresAt', 'fence', 'label', 'lastWriteAt', 'owner', 'reservedBy', 'reservedSince', 'reservedUntil', 'token', 'ttl']);
    expect(schema.get('timestamps')).toBeFalsy();
    expect(schema.get('strict')).toBe('throw');
    expect(schema.get('versionKey')).toBe(false);
    expect(schema.indexes().map(([fields]) => Object.keys(fields).join(','))).toEqual(['expiresAt', 'owner,_id']);

    // Saved through Mongoose, a record is stored as given: no tenant, no timestamps, no hook ran.
    hookRuns.length = 0;
    const now = new Date();
    await lockModel.create({ _id: 'inspect-1', fence: 1, acquiredAt: now, expiresAt: now });
    expect(hookRuns).toEqual([]);
    const stored = await lockModel.collection.findOne({ _id: 'inspect-1' } as never);
    expect(Object.keys(stored!).sort()).toEqual(['_id', 'acquiredAt', 'expiresAt', 'fence', 'label', 'owner', 'token']);
    await expect(lockModel.findOneAndUpdate({ _id: 'inspect-1' }, { fence: 2 })).resolves.not.toBeNull();
  });
});
