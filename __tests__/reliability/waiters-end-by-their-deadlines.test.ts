/**
 * No deadlock, and no hang beyond a caller's own deadline (PRODUCT.md property 15; attack-fair4
 * brief: "no deadlock between single waiters with reservations and groups in any order (user
 * hold-and-wait included: it must end by the hold bound or the waiters' own deadlines, never hang
 * beyond them)"). For 20 s, on five documents, every caller on its own connection:
 *  - three loops of waiting groups (`lockMany`, 2-3 documents in random order, wait 3-6 s);
 *  - two loops of single waiters (`lock`, wait 2-5 s);
 *  - three loops of user hold-and-wait: `lock` one document (waiting), then `lock` another with a
 *    wait of 2-5 s while holding the first, in random order (so they form cycles with each other,
 *    with the groups and with the single waiters' reservations);
 * each holding what it got 0-300 ms. Asserted: every call ends within its own wait plus 6 s (a
 * hold bound, a pause and a loaded machine), and every loop is served at least once in the run (no
 * caller starved for 20 s). Both topologies.
 */
import { performance } from 'node:perf_hooks';
import type { Types } from 'mongoose';
import { LockedError } from '../../src';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { pick, rand } from '../support/stalled-owners';
import { workItemModel, type WorkItemModel } from '../support/work-item';

jest.setTimeout(180_000);
const db = testDatabase('waiters_deadlines');
const RUN_MS = Number(process.env.MPL_WAITERS_DEADLINES_MS ?? 20_000);
const KINDS = ['group', 'group', 'group', 'single', 'single', 'hold-wait', 'hold-wait', 'hold-wait'] as const;
const conns: MonitoredConnection[] = [];
const models: WorkItemModel[] = [];

beforeAll(async () => {
  for (let i = 0; i < KINDS.length; i++) {
    const c = await connect(db.name);
    conns.push(c);
    models.push(await workItemModel(c.connection, { ttl: 10_000, ownerStorage: 'plain' }, 'DeadlineItem'));
  }
});

afterAll(async () => {
  await db.drop(conns[0]!.connection);
  await Promise.all(conns.map((c) => c.close()));
});

test('groups, single waiters and user hold-and-wait in every order: each call ends by its own deadline, nobody starved', async () => {
  const ids: Types.ObjectId[] = (await models[0]!.insertMany(Array.from({ length: 5 }, (_, i) => ({ title: `d${i}` })))).map((d) => d._id);
  const stopAt = performance.now() + RUN_MS;
  const late: string[] = [];
  const served = KINDS.map(() => 0);
  const errors: string[] = [];
  /** Runs a waiting call, recording it if it ends later than its wait + 6 s; null when refused. */
  const bounded = async <T>(who: string, wait: number, call: Promise<T>): Promise<T | null> => {
    const started = performance.now();
    try {
      return await call;
    } catch (error) {
      if (!(error instanceof LockedError)) errors.push(`${who}: ${String(error).slice(0, 120)}`);
      return null;
    } finally {
      const ms = performance.now() - started;
      if (ms > wait + 6_000) late.push(`${who} ended after ${Math.round(ms)} ms (wait ${wait})`);
    }
  };
  const loops = KINDS.map((kind, k) =>
    (async () => {
      const model = models[k]!;
      const owner = `${kind}-${k}`;
      while (performance.now() < stopAt) {
        if (kind === 'group') {
          const set = [...ids].sort(() => Math.random() - 0.5).slice(0, rand(2, 4));
          const wait = rand(3_000, 6_000);
          const docs = await bounded(owner, wait, model.lockMany(set, owner, { wait }));
          if (docs) {
            served[k]!++;
            await sleep(rand(0, 300));
            await model.unlockMany(docs);
          }
        } else if (kind === 'single') {
          const wait = rand(2_000, 5_000);
          const doc = await bounded(owner, wait, model.lock(pick(ids), owner, { wait }));
          if (doc) {
            served[k]!++;
            await sleep(rand(0, 300));
            await doc.unlock();
          }
        } else {
          const [first, second] = [...ids].sort(() => Math.random() - 0.5);
          const wait = rand(2_000, 5_000);
          const one = await bounded(owner, wait, model.lock(first!, owner, { wait }));
          if (!one) continue;
          const two = await bounded(`${owner} (holding)`, wait, model.lock(second!, owner, { wait }));
          if (two) {
            served[k]!++;
            await sleep(rand(0, 300));
            await two.unlock();
          }
          await one.unlock();
        }
      }
    })(),
  );
  await Promise.all(loops);
  console.log(`waiters and deadlines: served per loop ${KINDS.map((kind, k) => `${kind} ${served[k]}`).join(', ')}; late ${late.length}; errors ${errors.length}`);
  expect(errors).toEqual([]);
  expect(late).toEqual([]);
  expect(served.every((n) => n > 0)).toBe(true);
});
