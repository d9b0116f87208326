/**
 * Crash (issue 5, PRODUCT.md property 3): a child process holding locks is killed with SIGKILL,
 * so it never releases anything. Its locks stay exclusive until their TTL, and from then on
 * others acquire them at once: judged by the server's clock, without waiting for the TTL monitor
 * (whose index only deletes records a day after they expired).
 */
import type { Types } from 'mongoose';
import { DEFAULT_PURGE_AFTER_MS } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';
import { killAll, spawnWorker } from './support/children';
import type { HolderConfig, HolderReport } from './workers/holder';

const TTL_MS = 3_000;
/** Allowed delay between the lock's expiry (server time) and a waiter's acquisition. */
const MARGIN_MS = 1_500;
const DOCUMENTS = 3;

const db = testDatabase('crash');
let conn: MonitoredConnection;
let WorkItem: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  WorkItem = await workItemModel(conn.connection, { ttl: TTL_MS }, 'CrashItem');
});

afterAll(async () => {
  await killAll();
  await db.drop(conn.connection).catch(() => undefined);
  await conn.close();
});

test('locks of a SIGKILLed holder stay exclusive until their ttl, then others acquire them within ttl + margin', async () => {
  const ids: Types.ObjectId[] = [];
  for (let d = 0; d < DOCUMENTS; d++) ids.push((await WorkItem.create({ title: `held by a doomed process ${d}` }))._id);
  const config: HolderConfig = {
    uri: process.env.MONGODB_URI!,
    dbName: db.name,
    modelName: 'CrashItem',
    ids: ids.map((id) => id.toHexString()),
    ttl: TTL_MS,
    owner: 'doomed-process',
  };
  const holder = spawnWorker('holder.ts', { MPL_HOLDER: JSON.stringify(config) }, 60_000);
  const report = JSON.parse(await holder.nextLine(45_000)) as HolderReport;
  expect(report.locks.map((l) => l.id)).toEqual(config.ids);

  holder.process.kill('SIGKILL');
  const killedAt = performance.now();
  expect(await holder.exited).toBe('SIGKILL');

  // The crash freed nothing early: the locks are still held, by nobody we could name.
  for (const id of ids) {
    expect(await WorkItem.tryLock(id, 'survivor')).toBeNull();
    expect(await WorkItem.isLocked(id)).toBe(true);
  }

  // Others wait for the lock and get it as soon as the server's clock passes its expiry.
  const acquired = await Promise.all(
    ids.map(async (id, d) => {
      const doc = await WorkItem.lock(id, `survivor-${d}`, { wait: TTL_MS + 10_000 });
      return { doc, clientMs: performance.now() - killedAt };
    }),
  );
  acquired.forEach(({ doc, clientMs }, d) => {
    const theirs = report.locks[d];
    const mine = doc.heldLock()!;
    const expiredAt = new Date(theirs.expiresAt).getTime();
    expect(new Date(theirs.expiresAt).getTime() - new Date(theirs.acquiredAt).getTime()).toBe(TTL_MS);
    // Never before the crashed holder's lock expired (server clock) ...
    expect(mine.acquiredAt.getTime()).toBeGreaterThanOrEqual(expiredAt);
    // ... and promptly after it: within the margin, and within ttl + margin of the kill.
    expect(mine.acquiredAt.getTime() - expiredAt).toBeLessThanOrEqual(MARGIN_MS);
    expect(clientMs).toBeLessThanOrEqual(TTL_MS + MARGIN_MS);
    expect(mine.fence).toBeGreaterThan(theirs.fence);
  });

  // The TTL monitor played no part: its index deletes records only `purgeAfter` (a day) after they expired.
  const indexes = await WorkItem.lockModel().collection.indexes();
  const ttlIndex = indexes.find((index) => index.key.expiresAt === 1);
  expect(ttlIndex?.expireAfterSeconds).toBe(DEFAULT_PURGE_AFTER_MS / 1000);

  await Promise.all(acquired.map(({ doc }) => doc.unlock()));
}, 90_000);
