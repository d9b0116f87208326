/**
 * Issue 16, item 8: a lock collection dropped while the process runs.
 *
 * The soak found that locking goes on (the next acquisition's upsert creates the collection again,
 * implicitly) but `expiresAt_ttl` and `{ owner: 1, _id: 1 }` were never created again: the setup
 * ran once per process. Released records were then never purged, and releaseAllFor / listLocks
 * lost their index until a restart. Now a set-up lock collection is checked at most once per
 * interval (`setupTiming.recheckMs`, a minute by default) by one background `listIndexes`
 * started by a lock call, and missing indexes are created again. Measured here: within an
 * interval, lock calls send no setup command at all.
 *
 * And a lock whose record vanished (the collection was dropped under it) was reported as
 * `released`, which nobody did: now `reason: 'vanished'`, with a message that says so.
 */
import type { Connection } from 'mongoose';
import { LockNotHeldError } from '../../src';
import { LOCK_SETUP_WARNING_CODE, setupTiming } from '../../src/lock-collection-setup';
import { connect, operatorConnection, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('droplocks');
let conn: MonitoredConnection;
/** The operator's connection that drops the lock collection (not the plugin's: not recorded as a lock command). */
let operator: Connection;
const warnings: string[] = [];
const SETUP_COMMANDS = ['create', 'createIndexes', 'listIndexes', 'collMod', 'drop'];
const defaults = { ...setupTiming };

beforeAll(async () => {
  conn = await connect(db.name);
  operator = await operatorConnection(db.name);
  jest.spyOn(process, 'emitWarning').mockImplementation(((message: string, options?: { code?: string }) => {
    if (options?.code === LOCK_SETUP_WARNING_CODE) warnings.push(message);
  }) as typeof process.emitWarning);
});

afterAll(async () => {
  jest.restoreAllMocks();
  Object.assign(setupTiming, defaults);
  await db.drop(conn.connection);
  await conn.close();
  await operator.close();
});

async function indexNames(model: WorkItemModel): Promise<string[]> {
  const specs = await model.lockModel().collection.listIndexes().toArray().catch(() => []);
  return specs.map((spec) => String(spec.name)).sort();
}

async function dropLockCollection(model: WorkItemModel): Promise<void> {
  await operator.db!.collection(model.lockModel().collection.collectionName).drop();
}

test('within a check interval, lock calls send no setup command', async () => {
  Object.assign(setupTiming, defaults); // one check a minute
  const M = await workItemModel(conn.connection, { ttl: 10_000 });
  const { _id: id } = await M.create({ title: 'x' });
  conn.resetCommands();
  for (let i = 0; i < 30; i++) await (await M.lock(id, 'alice')).unlock();
  expect(conn.commands.filter((name) => SETUP_COMMANDS.includes(name))).toEqual([]);
});

test('after the lock collection is dropped, locking goes on and the indexes come back', async () => {
  setupTiming.recheckMs = 200;
  const M = await workItemModel(conn.connection, { ttl: 10_000 });
  const { _id: id } = await M.create({ title: 'x' });
  await (await M.lock(id, 'alice')).unlock();
  expect(await indexNames(M)).toEqual(['_id_', 'expiresAt_ttl', 'owner_1__id_1']);

  await dropLockCollection(M);
  warnings.length = 0;
  const deadline = Date.now() + 15_000;
  let names: string[] = [];
  // Keep locking as an application would; the check runs in the background of a lock call.
  while (Date.now() < deadline) {
    await (await M.lock(id, 'alice')).unlock();
    names = await indexNames(M);
    if (names.includes('expiresAt_ttl') && names.includes('owner_1__id_1')) break;
    await sleep(100);
  }
  expect(names).toEqual(['_id_', 'expiresAt_ttl', 'owner_1__id_1']);
  expect(warnings.some((w) => /were missing .*dropped.* created again/.test(w))).toBe(true);
});

test('between checks, at most one listIndexes per interval', async () => {
  setupTiming.recheckMs = 300;
  const M = await workItemModel(conn.connection, { ttl: 10_000 });
  const { _id: id } = await M.create({ title: 'x' });
  await sleep(400);
  conn.resetCommands();
  const started = Date.now();
  for (let i = 0; i < 20; i++) await (await M.lock(id, 'alice')).unlock();
  await sleep(50); // let a check started by the last call finish
  const elapsed = Date.now() - started;
  const listed = conn.commands.filter((name) => name === 'listIndexes').length;
  expect(listed).toBeGreaterThanOrEqual(1);
  expect(listed).toBeLessThanOrEqual(Math.ceil(elapsed / 300) + 1);
  expect(conn.commands.filter((name) => ['create', 'createIndexes', 'collMod'].includes(name))).toEqual([]);
});

describe('a lock whose record vanished is reported as vanished, not released', () => {
  test('unlock() and extendLock()', async () => {
    setupTiming.recheckMs = 60_000;
    const M = await workItemModel(conn.connection, { ttl: 60_000 });
    const { _id: a } = await M.create({ title: 'a' });
    const { _id: b } = await M.create({ title: 'b' });
    const docA = await M.lock(a, 'alice');
    const docB = await M.lock(b, 'alice');
    await dropLockCollection(M);

    const unlockError = await docA.unlock().catch((e: unknown) => e);
    expect(unlockError).toBeInstanceOf(LockNotHeldError);
    expect(unlockError).toMatchObject({ reason: 'vanished' });
    expect((unlockError as Error).message).toMatch(/dropped/);
    // Reported the same way when used again.
    await expect(docA.unlock()).rejects.toMatchObject({ reason: 'vanished' });

    await expect(docB.extendLock()).rejects.toMatchObject({ reason: 'vanished' });
  });

  test('a ticket whose record is gone', async () => {
    const M = await workItemModel(conn.connection, { ttl: 60_000 });
    const { _id: id } = await M.create({ title: 't' });
    const ticket = (await M.lock(id, 'alice')).heldLock()!.ticket;
    await dropLockCollection(M);
    const error = await M.lock(id, 'alice', { resume: ticket }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockNotHeldError);
    expect(error).toMatchObject({ reason: 'vanished' });
    expect((error as Error).message).toMatch(/purged.*dropped/);
  });
});
