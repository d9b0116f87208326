/**
 * Contended waiting, measured (attack-fair4 brief, cost: "contended waiting is not slower (measure
 * main vs branch)"). Every caller has its own connection (as separate processes would). For 8 s:
 *  (a) four loops of `lock(d, { wait })` on ONE document, 20 ms sections;
 *  (b) three loops of `lockMany([d, own], { wait })` beside two loops of `lock(d, { wait })`;
 *  (c) four loops of `lockMany` over a ring of four documents (each pair overlaps two others).
 * Printed: grants per second in all, grants per loop, the longest single wait. Asserted: only that
 * every loop is served at least once in the 8 s (no caller starved), not the speed (a loaded
 * machine is slow); compare the printed figures of two builds run one after the other:
 *   npx jest __tests__/reliability/contended-waiting-throughput.test.ts
 */
import { performance } from 'node:perf_hooks';
import type { Types } from 'mongoose';
import { LockedError } from '../../src';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

jest.setTimeout(180_000);
const db = testDatabase('contended_wait');
const RUN_MS = Number(process.env.MPL_CONTENDED_WAIT_MS ?? 8_000);
const conns: MonitoredConnection[] = [];
const models: WorkItemModel[] = [];

beforeAll(async () => {
  for (let i = 0; i < 5; i++) {
    const c = await connect(db.name);
    conns.push(c);
    models.push(await workItemModel(c.connection, { ttl: 10_000, ownerStorage: 'plain' }, 'ContendedItem'));
  }
});

afterAll(async () => {
  await db.drop(conns[0]!.connection);
  await Promise.all(conns.map((c) => c.close()));
});

interface Stats {
  grants: number;
  longestWaitMs: number;
}

/** Loops `take` (resolving to a release, or null when refused) until the run ends; 20 ms sections. */
async function loop(take: () => Promise<(() => Promise<unknown>) | null>, end: number): Promise<Stats> {
  const stats: Stats = { grants: 0, longestWaitMs: 0 };
  while (performance.now() < end) {
    const asked = performance.now();
    const release = await take().catch((error: unknown) => {
      if (error instanceof LockedError) return null;
      throw error;
    });
    stats.longestWaitMs = Math.max(stats.longestWaitMs, performance.now() - asked);
    if (!release) continue;
    stats.grants++;
    await sleep(20);
    await release();
  }
  return stats;
}

const single = (k: number, id: Types.ObjectId) => async () => {
  const doc = await models[k]!.lock(id, `single-${k}`, { wait: 10_000 });
  return () => doc.unlock();
};
const group = (k: number, ids: Types.ObjectId[]) => async () => {
  const docs = await models[k]!.lockMany(ids, `group-${k}`, { wait: 10_000 });
  return () => models[k]!.unlockMany(docs);
};

function report(name: string, stats: Stats[]): void {
  const total = stats.reduce((n, s) => n + s.grants, 0);
  console.log(`${name}: ${((total * 1_000) / RUN_MS).toFixed(1)} grants/s; per loop ${stats.map((s) => s.grants).join(' / ')}; longest wait ${Math.round(Math.max(...stats.map((s) => s.longestWaitMs)))} ms`);
}

test('(a) four single waiters on one document', async () => {
  const [d] = (await models[0]!.insertMany([{ title: 'd' }])).map((x) => x._id);
  const end = performance.now() + RUN_MS;
  const stats = await Promise.all([0, 1, 2, 3].map((k) => loop(single(k, d!), end)));
  report('(a) 4 single waiters, 1 document', stats);
  expect(stats.map((s) => s.grants > 0)).toEqual([true, true, true, true]);
});

test('(b) three waiting groups [d, own] beside two single waiters on d', async () => {
  const [d, ...own] = (await models[0]!.insertMany([{ title: 'd' }, { title: 'g0' }, { title: 'g1' }, { title: 'g2' }])).map((x) => x._id);
  const end = performance.now() + RUN_MS;
  const stats = await Promise.all([...[0, 1, 2].map((k) => loop(group(k, [d!, own[k]!]), end)), ...[3, 4].map((k) => loop(single(k, d!), end))]);
  report('(b) 3 groups + 2 single waiters on d', stats);
  expect(stats.map((s) => s.grants > 0)).toEqual([true, true, true, true, true]);
});

test('(c) four waiting groups over a ring of four documents', async () => {
  const ring = (await models[0]!.insertMany([0, 1, 2, 3].map((i) => ({ title: `r${i}` })))).map((x) => x._id);
  const end = performance.now() + RUN_MS;
  const stats = await Promise.all([0, 1, 2, 3].map((k) => loop(group(k, [ring[k]!, ring[(k + 1) % 4]!]), end)));
  report('(c) 4 groups over a ring', stats);
  expect(stats.map((s) => s.grants > 0)).toEqual([true, true, true, true]);
});
