/**
 * Liveness of single-document waiters beside a heavier stream of waiting groups than
 * single-waiter-beside-waiting-groups (attack-fair4 brief: "a polling single waiter on a STANDALONE
 * beside looping waiting groups is served"), on both topologies: four loops of
 * `lockMany([d, own], { wait })` with 50 ms sections keep d busy; two single waiters ask for d with
 * a 12 s wait, one second apart, after the groups have run for 1.5 s (past their 250 ms of
 * release-and-retry: they wait in order and reserve d). Each must be served within its wait, and the
 * older first (printed: when each was served).
 *
 * On main 68d06ab: replica set passes; standalone failed 1 run of 4 (older served at 1874 ms,
 * younger at 1444 ms from the older's ask; the other runs: 544 / 4406, 573 / 3339, 1380 / 1474):
 * once the reservation an older waiting group took over is cleared (it was served), the older and
 * the younger single waiter both ask every 100 ms, and whichever asks first is served.
 */
import type { Types } from 'mongoose';
import { LockedError } from '../../src';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { timed } from '../support/group-waiting';
import { onReplicaSet } from '../support/topology';
import { workItemModel, type WorkItemModel } from '../support/work-item';

jest.setTimeout(180_000);
const db = testDatabase('singles_beside_streams');
const conns: MonitoredConnection[] = [];
const models: WorkItemModel[] = [];

beforeAll(async () => {
  for (let i = 0; i < 6; i++) {
    const c = await connect(db.name);
    conns.push(c);
    models.push(await workItemModel(c.connection, { ttl: 30_000, ownerStorage: 'plain' }, 'SinglesStreamItem'));
  }
});

afterAll(async () => {
  await db.drop(conns[0]!.connection);
  await Promise.all(conns.map((c) => c.close()));
});

test('two single waiters, one second apart, beside four looping waiting groups: both served within their 12 s wait, the older first', async () => {
  const [d, ...own] = (await models[0]!.insertMany([{ title: 'd' }, { title: 'g0' }, { title: 'g1' }, { title: 'g2' }, { title: 'g3' }])).map((x) => x._id as Types.ObjectId);
  let done = false;
  const sections = [0, 0, 0, 0];
  const loops = own.map((mine, k) =>
    (async () => {
      while (!done) {
        const got = await models[k + 2]!.lockMany([d!, mine], `group-${k}`, { wait: 10_000 }).catch((error: unknown) => {
          if (error instanceof LockedError) return null;
          throw error;
        });
        if (!got) continue;
        sections[k]!++;
        await sleep(50);
        await models[k + 2]!.unlockMany(got);
      }
    })(),
  );
  await sleep(1_500);
  const servedAt: Record<string, number> = {};
  const t0 = performance.now();
  const waiter = async (k: number, name: string) => {
    const outcome = await timed(models[k]!.lock(d!, name, { wait: 12_000 }));
    servedAt[name] = Math.round(performance.now() - t0);
    if (outcome.ok) {
      await sleep(50);
      await outcome.value.unlock();
    }
    return outcome;
  };
  const older = waiter(0, 'older');
  await sleep(1_000);
  const younger = waiter(1, 'younger');
  const [o, y] = await Promise.all([older, younger]);
  done = true;
  await Promise.all(loops);
  console.log(`single waiters beside four group loops: older ${o.ok ? 'served' : 'refused'} at ${servedAt.older} ms, younger ${y.ok ? 'served' : 'refused'} at ${servedAt.younger} ms (from the older's ask); group sections ${sections.join(' / ')}`);
  // Promised everywhere (docs/limits.md, oldest waiter first): both served within their wait
  // (without reservations a polling single waiter was refused for its whole wait beside the groups).
  expect({ older: o.ok, younger: y.ok }).toEqual({ older: true, younger: true });
  // The older first: promised where a change stream tells the reservation's holder of the release
  // at once. On a standalone, after a handover (the reservation's holder served, its reservation
  // cleared) the next reservation is the first waiter's to renew, and an older waiter takes it over
  // only at its next renewal (within 1 s): a younger waiter may be served in between (docs/limits.md).
  if (onReplicaSet()) expect(servedAt.older).toBeLessThan(servedAt.younger!);
  else console.log(`standalone: the older-first order after a handover is not promised (older at ${servedAt.older} ms, younger at ${servedAt.younger} ms)`);
});
