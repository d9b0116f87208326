/**
 * Issue 11, items 3 and 4: how the plugin is registered.
 *  - `mongoose.plugin(lockPlugin)` (global registration) crashed with "Maximum call stack size
 *    exceeded": the sibling lock schema received the plugin too (`*.locks.locks.…`). It must work,
 *    never apply to the lock model, and leave embedded schemas alone.
 *  - `schema.plugin(lockPlugin)` after `model()` left `Model.lock` undefined while the types say it
 *    exists: now a LockConfigurationError naming the fix.
 *  - `{ ttl: 30 }` (seconds by mistake) made 30 ms locks silently: now a process warning.
 * Each test uses its own Mongoose instance, so global plugins never leak into other tests.
 */
import mongoose, { Schema, type Connection } from 'mongoose';
import * as os from 'node:os';
import { LOCK_MODEL_PREFIX, LockConfigurationError, LockedError, TTL_WARNING_CODE, lockPlugin, type LockableModel, type LockMethods } from '../../src';
import { testUri, uniqueDbName } from '../../test-backend/test-env';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemSchema, type WorkItem, type WorkItemModel } from '../support/work-item';

interface Ticket {
  title: string;
  comments: { text: string }[];
  address?: { city: string };
}

/** A fresh Mongoose instance connected to the test backend (driver workaround as in support/db). */
async function isolatedMongoose(): Promise<{ instance: mongoose.Mongoose; connection: Connection; dbName: string }> {
  const instance = new mongoose.Mongoose();
  const dbName = uniqueDbName('registration');
  const extra = Number(mongoose.version.split('.')[0]) >= 9 ? { runtimeAdapters: { os } } : {};
  const connection = await instance.createConnection(testUri(), { dbName, monitorCommands: true, ...extra } as mongoose.ConnectOptions).asPromise();
  return { instance, connection, dbName };
}

describe('global registration: mongoose.plugin(lockPlugin)', () => {
  test('works, locks documents, never applies to the lock model, and leaves embedded documents alone', async () => {
    const { instance, connection } = await isolatedMongoose();
    try {
      instance.plugin(lockPlugin, { ttl: 5_000 });
      const Comment = new instance.Schema({ text: String }, { _id: false }); // no _id: must not be refused
      const Address = new instance.Schema({ city: String }); // embedded, with an _id
      const schema = new instance.Schema<Ticket, LockableModel<Ticket>, LockMethods>({ title: String, comments: [Comment], address: Address });
      const Ticket = connection.model<Ticket, LockableModel<Ticket>>('Ticket', schema);
      await Ticket.init();

      const lockModel = Ticket.lockModel();
      expect(lockModel.modelName).toBe(`${LOCK_MODEL_PREFIX}${Ticket.collection.collectionName}.locks`);
      expect(typeof (lockModel as unknown as { lock?: unknown }).lock).toBe('undefined');
      expect(Object.keys(connection.models).filter((name) => name.startsWith(LOCK_MODEL_PREFIX))).toEqual([lockModel.modelName]);

      const { _id: id } = await Ticket.create({ title: 'global', comments: [{ text: 'first' }], address: { city: 'Basel' } });
      const item = await Ticket.lock(id, 'alice');
      item.comments.push({ text: 'second' });
      item.address!.city = 'Bern';
      await expect(Ticket.lock(id, 'bob')).rejects.toBeInstanceOf(LockedError);
      await item.saveAndUnlock(); // embedded documents are saved with their parent, not guarded on their own
      const stored = await Ticket.findById(id).orFail();
      expect(stored.comments.map((c) => c.text)).toEqual(['first', 'second']);
      expect(stored.address!.city).toBe('Bern');
      expect(await Ticket.isLocked(id)).toBe(false);
    } finally {
      await connection.dropDatabase().catch(() => undefined);
      await connection.close();
    }
  });

  test('an explicitly plugged schema is not plugged twice: one save guard, one check per save', async () => {
    const { instance, connection } = await isolatedMongoose();
    try {
      instance.plugin(lockPlugin);
      const schema = new instance.Schema({ title: String });
      schema.plugin(lockPlugin, { transactions: 'never' });
      const Model = connection.model<{ title: string }, LockableModel<{ title: string }>>('Once', schema);
      await Model.init();
      const { _id: id } = await Model.create({ title: 'x' });
      const item = await Model.lock(id, 'alice');
      const commands: string[] = [];
      connection.getClient().on('commandStarted', (event) => commands.push(event.commandName));
      item.title = 'y';
      await item.save();
      expect(commands.filter((name) => name === 'find')).toHaveLength(1); // the guard's one check
      await item.unlock();
    } finally {
      await connection.dropDatabase().catch(() => undefined);
      await connection.close();
    }
  });

  test("Mongoose's own registration options (deduplicate, tags) are accepted; a schema's own options win", async () => {
    const { instance, connection } = await isolatedMongoose();
    try {
      instance.plugin(lockPlugin, { deduplicate: true, ttl: 60_000 });
      const own = new instance.Schema({ title: String });
      own.plugin(lockPlugin, { ttl: 7_000 }); // explicit, before model(): it is the one that applies
      const Own = connection.model<{ title: string }, LockableModel<{ title: string }>>('Own', own);
      await Own.init();
      const { _id: id } = await Own.create({ title: 'x' });
      const held = (await Own.lock(id, 'alice')).heldLock()!;
      expect(held.ttl).toBe(7_000);
      await Own.releaseAllFor('alice');

      instance.plugin(lockPlugin, { tags: ['locked'] });
      const tagged = new instance.Schema({ title: String }, { pluginTags: ['locked'] });
      const Tagged = connection.model<{ title: string }, LockableModel<{ title: string }>>('Tagged', tagged);
      await Tagged.init();
      expect(typeof Tagged.lock).toBe('function');
    } finally {
      await connection.dropDatabase().catch(() => undefined);
      await connection.close();
    }
  });
});

describe('misuse gets a clear error or warning naming the fix', () => {
  let conn: MonitoredConnection;
  const db = testDatabase('misuse');
  beforeAll(async () => {
    conn = await connect(db.name);
  });
  afterAll(async () => {
    await db.drop(conn.connection);
    await conn.close();
  });

  test('schema.plugin(lockPlugin) after model(): LockConfigurationError, not "Model.lock is not a function"', () => {
    const schema = new Schema({ title: String });
    conn.connection.model('TooLate', schema);
    let error: unknown;
    try {
      schema.plugin(lockPlugin);
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(LockConfigurationError);
    expect((error as LockConfigurationError).code).toBe('CONFIGURATION');
    expect((error as Error).message).toContain('"TooLate"');
    expect((error as Error).message).toContain('before model()');
  });

  test('ttl: 30 (seconds by mistake) emits one warning naming 30000; a realistic ttl emits none', async () => {
    const warnings: { message: string; code?: string }[] = [];
    const spy = jest.spyOn(process, 'emitWarning').mockImplementation(((message: string, options?: { code?: string }) => {
      warnings.push({ message, code: options?.code });
    }) as typeof process.emitWarning);
    try {
      workItemSchema({ ttl: 30_000 });
      expect(warnings).toEqual([]);
      workItemSchema({ ttl: 30 });
      workItemSchema({ ttl: 30 });
      expect(warnings).toHaveLength(1);
      expect(warnings[0]!.code).toBe(TTL_WARNING_CODE);
      expect(warnings[0]!.message).toContain('ttl: 30000');
      expect(warnings[0]!.message).toContain('milliseconds');
      // Per call too.
      const model = conn.connection.model<WorkItem, WorkItemModel>('PerCallTtl', workItemSchema({ ttl: 30_000 }));
      const { _id: id } = await model.create({ title: 't' });
      await model.lock(id, 'alice', { ttl: 450 });
      expect(warnings.map((w) => w.message).some((m) => m.includes('ttl: 450000'))).toBe(true);
    } finally {
      spy.mockRestore();
    }
  });
});
