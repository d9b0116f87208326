/**
 * Defect 7 of issue 10 (timers and options; the aborted saveAndUnlock is in
 * caller-transaction.test.ts): a forgotten handle does not keep the process alive, a ttl longer
 * than Node's largest timer (2^31 - 1 ms, about 24.8 days) does not turn renewal into a busy loop,
 * and a lock collection may not be the model's own collection.
 */
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { Schema } from 'mongoose';
import { InvalidLockOptionError, lockPlugin } from '../../../src';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../../support/db';
import { workItemModel, type WorkItemModel } from '../../support/work-item';

const db = testDatabase('leftovers');
let conn: MonitoredConnection;
let WorkItem: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  WorkItem = await workItemModel(conn.connection, { ttl: 10_000 });
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

test('a forgotten acquireLock handle does not keep the process alive after the connection is closed', async () => {
  const child = spawn(process.execPath, ['--import', 'tsx', join(__dirname, 'workers', 'forgotten-handle.ts')], {
    env: { ...process.env, MPL_URI: process.env.MONGODB_URI!, MPL_DB: db.name },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (stderr += chunk));
  let closedAt = 0;
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    if (chunk.includes('closed')) closedAt = Date.now();
  });
  const killer = setTimeout(() => child.kill('SIGKILL'), 50_000);
  const code = await new Promise<number | string>((resolve) => child.on('exit', (c, signal) => resolve(c ?? signal ?? 'unknown')));
  clearTimeout(killer);
  expect(stderr).toBe('');
  expect(code).toBe(0);
  expect(closedAt).toBeGreaterThan(0);
  // Without unref'd timers the child lives on until the renewal (40 s) and the loss timer (60 s).
  expect(Date.now() - closedAt).toBeLessThan(5_000);
}, 70_000);

test('a ttl of 40 days (beyond setTimeout\'s 24.8-day limit) renews nothing for now: no findAndModify storm', async () => {
  const { _id: id } = await WorkItem.create({ title: 'long' });
  const ttl = 40 * 24 * 60 * 60 * 1000;
  const handle = await WorkItem.acquireLock(id, 'patient', { ttl });
  conn.resetCommands();
  await sleep(1_000);
  expect(conn.commands.filter((c) => c === 'findAndModify')).toEqual([]);
  expect(handle.signal.aborted).toBe(false);
  expect(handle.expiresAt.getTime()).toBeGreaterThan(Date.now() + ttl - 60_000);
  await handle.release();
});

test('the collection option may not name the model\'s own collection: refused when the model is compiled', () => {
  const schema = new Schema({ title: String }, { collection: 'own_items' });
  schema.plugin(lockPlugin, { collection: 'own_items' });
  let error: unknown;
  try {
    conn.connection.model('OwnItems', schema);
  } catch (e) {
    error = e;
  }
  expect(error).toBeInstanceOf(InvalidLockOptionError);
  expect((error as InvalidLockOptionError).option).toBe('collection');
  expect((error as Error).message).toContain('own_items');
});
