/**
 * The canonical order of ordered group waiting (lock-group.ts canonicalOrder) must be total: the
 * same database, lock collection name and `_id` on two DEPLOYMENTS are two documents, and two
 * `lockAll` callers listing them in opposite orders must still take them in one order. Before the
 * fix the order stopped at the id key (and, first, at the lock collection NAME: see
 * lock-all-canonical-order-across-databases.test.ts, the attack test this one follows), so the two
 * documents compared equal, each caller kept its own listed order, and each could hold one while it
 * waited for the other until the hold bound (2 s). The tie-break is the deployment's seed list
 * (deployment-key.ts deploymentSeedName), which every process reads alike.
 *
 * P1 holds There.x, P2 holds Here.x; G1 lockAll([[Here, x], [There, x]]) and G2 lockAll([[There,
 * x], [Here, x]]) wait (ordered after 250 ms). P2 lets go of Here.x, then P1 of There.x. With one
 * order, G2 waits behind G1 for whichever document comes first and both are served within
 * milliseconds of the last release; with the tie, one holds each for up to the hold bound.
 * Needs a second server (skipped with a printed reason where none can be started).
 */
import { Types } from 'mongoose';
import { lockAll } from '../../src';
import { sleep, testDatabase } from '../support/db';
import { holders, timed } from '../support/group-waiting';
import { twoDeployments } from '../support/two-deployments';

jest.setTimeout(120_000);
const db = testDatabase('canon_tie_deployments');
const deployments = twoDeployments(db, 'TieDeploymentItem', { ttl: 30_000, what: 'canonical order across two deployments' });

test('two lockAll callers listing one namespace and id on two deployments in opposite orders do not hold one each while waiting for the other', async () => {
  if (deployments.skipped) return;
  const { Here, There } = deployments;
  const x = new Types.ObjectId();
  await Here.create({ _id: x, title: 'here' });
  await There.create({ _id: x, title: 'there' });
  expect([Here.db.name, Here.lockModel().collection.collectionName]).toEqual([There.db.name, There.lockModel().collection.collectionName]);
  const holdThere = await There.lock(x, 'P1');
  const holdHere = await Here.lock(x, 'P2');
  const first = timed(
    lockAll([[Here, x], [There, x]], 'G1', { wait: 30_000 }).then(async (docs) => {
      const at = performance.now();
      await Promise.all(docs.map((d) => d.unlock()));
      return at;
    }),
  );
  const second = timed(
    lockAll([[There, x], [Here, x]], 'G2', { wait: 30_000 }).then(async (docs) => {
      const at = performance.now();
      await Promise.all(docs.map((d) => d.unlock()));
      return at;
    }),
  );
  await sleep(1_000); // both past the 250 ms of release-and-retry: waiting in order
  await holdHere.unlock();
  await sleep(400);
  await holdThere.unlock();
  const released = performance.now();
  let crossSince: number | undefined;
  let longestCross = 0;
  let done = false;
  const watcher = (async () => {
    while (!done) {
      const [a, b] = [(await holders(Here, [x])).get(String(x))?.owner, (await holders(There, [x])).get(String(x))?.owner];
      const now = performance.now();
      if (a !== undefined && b !== undefined && a !== b) {
        crossSince ??= now;
        longestCross = Math.max(longestCross, now - crossSince);
      } else crossSince = undefined;
      await sleep(50);
    }
  })();
  const [r1, r2] = await Promise.all([first, second]);
  done = true;
  await watcher;
  const servedAfter = [r1, r2].map((r) => (r.ok ? Math.round(r.value - released) : -1));
  console.log(`canonical order across deployments: served ${servedAfter.join(' / ')} ms after the last release; held one each for ${Math.round(longestCross)} ms on end`);
  expect({ g1: r1.ok, g2: r2.ok }).toEqual({ g1: true, g2: true });
  // The hold bound is 2 s: a cross-hold that ends only by it lasts well over 500 ms.
  expect(longestCross).toBeLessThan(500);
  expect(Math.max(...servedAfter)).toBeLessThan(1_500);
});
