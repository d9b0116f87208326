/**
 * Issue 16, corrections to the lock collection's setup (src/lock-collection-setup.ts).
 *
 *  - mongod also answers IndexOptionsConflict (85) when `{ expiresAt: 1 }` exists under another
 *    name ("Index already exists with a different name", or "... with a different name and
 *    options": IndexCatalogImpl::_doesSpecConflictWithExisting,
 *    src/mongo/db/catalog/index_catalog_impl.cpp). The setup then `collMod`ed `expiresAt_ttl`,
 *    which does not exist, and warned that "purgeAfter changed". It must find the index by its key
 *    and change that one, or keep it, and say what is true.
 *  - Setup failures taxed every lock call: after a failed setup (a `readWrite` user after a
 *    `purgeAfter` change: `collMod` is not in `readWrite`, manual "Built-In Roles"), each lock call
 *    sent create, createIndexes and collMod again. Now retried in the background with backoff, and
 *    warned once.
 *  - Mongoose's `autoIndex` / `autoCreate: false` (connection or schema options) are respected
 *    (the lock model forced `autoCreate: true`), and `Model.createLockIndexes()` sets the indexes up
 *    on demand, for deploy scripts.
 * The refusals are injected with failCommand on this file's own appName.
 */
import mongoose, { type Connection } from 'mongoose';
import { LockConfigurationError, LockDatabaseError } from '../../src';
import { LOCK_SETUP_WARNING_CODE, setupTiming } from '../../src/lock-collection-setup';
import { connect, operatorConnection, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { usesPrivateServer } from '../support/private-server';
import { workItemSchema, type WorkItem, type WorkItemModel } from '../support/work-item';

// This file configures failCommand: on a server of its own where it can (support/private-server.ts).
usesPrivateServer();

const db = testDatabase('lock_setup');
const APP = `mpl-lock-setup-${process.pid}`;
/** The plugin's connection (its own appName, so fail points hit only it). */
let conn: MonitoredConnection;
/** The operator's connection: prepares indexes and reads them back (not the plugin's commands). */
let operator: Connection;
const warnings: string[] = [];
const SETUP_COMMANDS = ['create', 'createIndexes', 'listIndexes', 'collMod'];
const defaults = { ...setupTiming };
let counter = 0;

beforeAll(async () => {
  conn = await connect(db.name, { appName: APP });
  operator = await operatorConnection(db.name);
  jest.spyOn(process, 'emitWarning').mockImplementation(((message: string, options?: { code?: string }) => {
    if (options?.code === LOCK_SETUP_WARNING_CODE) warnings.push(message);
  }) as typeof process.emitWarning);
});

beforeEach(() => {
  Object.assign(setupTiming, defaults);
  warnings.length = 0;
});

afterAll(async () => {
  jest.restoreAllMocks();
  Object.assign(setupTiming, defaults);
  await failCollMod('off');
  await operator.dropDatabase();
  await operator.close();
  await conn.close();
});

async function failCollMod(mode: 'alwaysOn' | 'off'): Promise<void> {
  await operator.getClient().db('admin').command({
    configureFailPoint: 'failCommand',
    mode,
    data: { appName: APP, failCommands: ['collMod'], errorCode: 13 }, // Unauthorized
  });
}

/** A fresh lock collection name, with indexes prepared by the operator beforehand. */
async function lockCollectionWith(indexes: { key: Record<string, 1>; name: string; expireAfterSeconds?: number }[]): Promise<string> {
  const name = `setup_${++counter}_locks`;
  if (indexes.length > 0) await operator.db!.collection(name).createIndexes(indexes);
  return name;
}

async function indexes(collection: string): Promise<Record<string, { key: string; ttl?: number }>> {
  const specs = await operator.db!.collection(collection).listIndexes().toArray().catch(() => []);
  return Object.fromEntries(specs.map((s) => [s.name as string, { key: Object.keys(s.key as object).join(','), ...(s.expireAfterSeconds === undefined ? {} : { ttl: Number(s.expireAfterSeconds) }) }]));
}

function compile(connection: Connection, collection: string, schemaOptions: Record<string, unknown> = {}, purgeAfter?: number): WorkItemModel {
  const schema = workItemSchema({ ttl: 10_000, collection, ...(purgeAfter === undefined ? {} : { purgeAfter }) });
  for (const [key, value] of Object.entries(schemaOptions)) schema.set(key as 'autoIndex', value as boolean);
  return connection.model<WorkItem, WorkItemModel>(`SetupItem${counter}`, schema);
}

async function lockAndUnlockTimes(M: WorkItemModel, times: number): Promise<void> {
  const { _id: id } = await M.create({ title: 'x' });
  for (let i = 0; i < times; i++) await (await M.lock(id, 'alice')).unlock();
}

const DAY = 86_400;

describe('an index on { expiresAt: 1 } under another name', () => {
  test('with another expiry: that index is changed with collMod by its own name, and the warning says so', async () => {
    const name = await lockCollectionWith([{ key: { expiresAt: 1 }, name: 'expiresAt_1', expireAfterSeconds: 999 }]);
    const M = compile(conn.connection, name);
    await lockAndUnlockTimes(M, 1);
    expect(await indexes(name)).toEqual({
      _id_: { key: '_id' },
      expiresAt_1: { key: 'expiresAt', ttl: DAY },
      owner_1__id_1: { key: 'owner,_id' },
    });
    expect(warnings).toEqual([expect.stringMatching(/TTL index expiresAt_1 kept released lock records 999 s and now keeps them 86400 s \(it keeps its name expiresAt_1/)]);
    conn.resetCommands();
    await lockAndUnlockTimes(M, 5);
    expect(conn.commands.filter((c) => SETUP_COMMANDS.includes(c))).toEqual([]);
  });

  test('with the same expiry: it is kept as it is, without collMod or warning', async () => {
    const name = await lockCollectionWith([{ key: { expiresAt: 1 }, name: 'my_ttl', expireAfterSeconds: DAY }]);
    const M = compile(conn.connection, name);
    conn.resetCommands();
    await lockAndUnlockTimes(M, 1);
    expect(await indexes(name)).toEqual({ _id_: { key: '_id' }, my_ttl: { key: 'expiresAt', ttl: DAY }, owner_1__id_1: { key: 'owner,_id' } });
    expect(conn.commands).not.toContain('collMod');
    expect(warnings).toEqual([]);
  });
});

test('the name expiresAt_ttl held by another key: the owner index is still created, and the warning names the conflict', async () => {
  const name = await lockCollectionWith([{ key: { acquiredAt: 1 } as Record<string, 1>, name: 'expiresAt_ttl' }]);
  const M = compile(conn.connection, name);
  await lockAndUnlockTimes(M, 1);
  expect(Object.keys(await indexes(name)).sort()).toEqual(['_id_', 'expiresAt_ttl', 'owner_1__id_1']);
  expect(warnings).toEqual([expect.stringMatching(/expiresAt_ttl is the name of an index on \{"acquiredAt":1\}.*Drop that index/)]);
  await expect(M.createLockIndexes()).rejects.toBeInstanceOf(LockConfigurationError);
});

describe('collMod refused (a readWrite user after a purgeAfter change)', () => {
  afterEach(() => failCollMod('off'));

  test('lock calls send no setup command between retries, one warning says why, and a later retry succeeds', async () => {
    const name = await lockCollectionWith([{ key: { expiresAt: 1 }, name: 'expiresAt_ttl', expireAfterSeconds: 999 }]);
    await failCollMod('alwaysOn');
    setupTiming.firstRetryMs = 60_000;
    const M = compile(conn.connection, name);
    await lockAndUnlockTimes(M, 1); // waits for the first attempt, which fails at collMod
    conn.resetCommands();
    await lockAndUnlockTimes(M, 20);
    expect(conn.commands.filter((c) => SETUP_COMMANDS.includes(c))).toEqual([]);
    expect(warnings).toEqual([expect.stringMatching(/keeps them 999 s, and changing it with collMod failed .*collMod privilege/)]);
    expect(await indexes(name)).toMatchObject({ expiresAt_ttl: { ttl: 999 }, owner_1__id_1: { key: 'owner,_id' } });

    // The privilege is granted; the next retry (due at once now) changes the TTL.
    await failCollMod('off');
    setupTiming.firstRetryMs = 0;
    const deadline = Date.now() + 10_000;
    while ((await indexes(name)).expiresAt_ttl?.ttl !== DAY && Date.now() < deadline) {
      await lockAndUnlockTimes(M, 1);
      await sleep(50);
    }
    expect((await indexes(name)).expiresAt_ttl).toEqual({ key: 'expiresAt', ttl: DAY });
    expect(warnings[warnings.length - 1]).toMatch(/TTL index expiresAt_ttl kept released lock records 999 s and now keeps them 86400 s\.$/);
  });

  test('Model.createLockIndexes() rejects with LockDatabaseError saying why, then succeeds once allowed', async () => {
    const name = await lockCollectionWith([{ key: { expiresAt: 1 }, name: 'expiresAt_ttl', expireAfterSeconds: 999 }]);
    const quiet = await connect(db.name, { appName: APP, autoIndex: false, autoCreate: false } as mongoose.ConnectOptions);
    try {
      const M = compile(quiet.connection, name);
      await failCollMod('alwaysOn');
      const error = await M.createLockIndexes().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LockDatabaseError);
      expect(error).toMatchObject({ operation: 'createLockIndexes', retryable: false });
      expect((error as Error).message).toMatch(/collMod privilege/);
      expect(await indexes(name)).toMatchObject({ expiresAt_ttl: { ttl: 999 }, owner_1__id_1: { key: 'owner,_id' } });
      await failCollMod('off');
      await M.createLockIndexes();
      expect((await indexes(name)).expiresAt_ttl).toEqual({ key: 'expiresAt', ttl: DAY });
    } finally {
      await quiet.close();
    }
  });
});

describe("Mongoose's autoIndex / autoCreate: false", () => {
  test('on the connection: nothing is created, locking works, and Model.createLockIndexes() creates the indexes', async () => {
    const quiet = await connect(db.name, { autoIndex: false, autoCreate: false } as mongoose.ConnectOptions);
    try {
      const name = await lockCollectionWith([]);
      setupTiming.recheckMs = 0; // would check at every call if checks were on
      const M = compile(quiet.connection, name);
      quiet.resetCommands();
      await M.init();
      await lockAndUnlockTimes(M, 5);
      expect(quiet.commands.filter((c) => SETUP_COMMANDS.includes(c))).toEqual([]);
      expect(await indexes(name)).toEqual({ _id_: { key: '_id' } }); // created by the first upsert
      await M.createLockIndexes();
      expect(Object.keys(await indexes(name)).sort()).toEqual(['_id_', 'expiresAt_ttl', 'owner_1__id_1']);
      quiet.resetCommands();
      await lockAndUnlockTimes(M, 3);
      expect(quiet.commands.filter((c) => SETUP_COMMANDS.includes(c))).toEqual([]);
    } finally {
      await quiet.close();
    }
  });

  test("in the application schema: its lock collection follows it", async () => {
    const name = await lockCollectionWith([]);
    const M = compile(conn.connection, name, { autoIndex: false, autoCreate: false });
    conn.resetCommands();
    await lockAndUnlockTimes(M, 2);
    expect(conn.commands.filter((c) => SETUP_COMMANDS.includes(c))).toEqual([]);
    expect(await indexes(name)).toEqual({ _id_: { key: '_id' } });
    await M.createLockIndexes();
    expect(Object.keys(await indexes(name)).sort()).toEqual(['_id_', 'expiresAt_ttl', 'owner_1__id_1']);
  });
});
