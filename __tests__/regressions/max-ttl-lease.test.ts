/**
 * The largest ttl (MAX_TTL_MS, one year) against the lease (src/lease.ts) and a handle's timers
 * (src/lock-handle.ts: delays beyond Node's 2^31 − 1 ms are waited for in steps).
 * Held: the lease is the ttl less 1% and 2 ms, no timer overflows (Node would warn with
 * TimeoutOverflowWarning and fire after 1 ms), the signal stays quiet, the lock stays held.
 * Runs on a replica set and on a standalone server.
 */
import { MAX_TTL_MS } from '../../src';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('maxttl');
let conn: MonitoredConnection;
let M: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  M = await workItemModel(conn.connection, { ttl: 30_000 }, 'MaxTtl');
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

test('a handle with the largest ttl: a lease of 99% of a year, no timer overflow, no renewal storm', async () => {
  const warnings: string[] = [];
  const onWarning = (warning: Error) => warnings.push(warning.name);
  process.on('warning', onWarning);
  try {
    const { _id: id } = await M.create({ title: 'a year' });
    const handle = await M.acquireLock(id, 'alice', { ttl: MAX_TTL_MS });
    expect(handle.msLeft()).toBeGreaterThan(MAX_TTL_MS * 0.989);
    expect(handle.msLeft()).toBeLessThanOrEqual(MAX_TTL_MS * 0.99);
    conn.resetCommands();
    await sleep(500);
    expect(conn.commands.filter((name) => name === 'findAndModify')).toEqual([]);
    expect(handle.signal.aborted).toBe(false);
    await handle.extend(MAX_TTL_MS);
    expect(handle.msLeft()).toBeGreaterThan(MAX_TTL_MS * 0.989);
    await handle.release();
    expect(warnings).not.toContain('TimeoutOverflowWarning');
  } finally {
    process.off('warning', onWarning);
  }
});
