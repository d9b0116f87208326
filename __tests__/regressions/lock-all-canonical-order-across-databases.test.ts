/**
 * Ordered waiting (issue 17 item 2; docs/several-documents.md, docs/limits.md: groups waiting in
 * canonical order never wait for each other in a cycle) needs ONE total order of documents, the same
 * in every process. lock-group.ts canonicalOrder sorts by lock collection NAME, then id key. Two
 * documents of two databases (a connection's `useDb`, or two clusters) whose lock collections have
 * the same name and whose `_id`s are equal compare equal, and the sort keeps them in the order the
 * caller listed them: two `lockAll` callers listing them in opposite orders then have opposite
 * "canonical" orders, and each can hold one while it waits for the other, exactly the cycle the order
 * exists to rule out. It then ends only by the hold bound (2 s, doubling per give-up).
 *
 * Deterministic: P1 holds B.x, P2 holds A.x (A and B: one model in two databases, one `_id` x); G1
 * lockAll([[A, x], [B, x]]) and G2 lockAll([[B, x], [A, x]]) wait (ordered after 250 ms, each
 * reserving its first document). P2 lets go of A.x (G1 takes it as its prefix), then P1 of B.x. With
 * one order for both, G2 waits for A.x behind G1 and G1 takes B.x at once; each is then served within
 * milliseconds of the last release. With the tie, G2 takes B.x as ITS prefix and both wait for the
 * other until G1's hold bound. Expectation: both served within 1.5 s of the last release (well under
 * the 2 s bound), and never seen holding one each for 500 ms on end.
 */
import { Types } from 'mongoose';
import { lockAll } from '../../src';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { holders, timed } from '../support/group-waiting';
import { workItemModel, type WorkItemModel } from '../support/work-item';

jest.setTimeout(120_000);
const dbA = testDatabase('canon_tie_a');
const dbB = testDatabase('canon_tie_b');
const conns: MonitoredConnection[] = [];
const models: Array<{ A: WorkItemModel; B: WorkItemModel }> = [];

beforeAll(async () => {
  for (let i = 0; i < 4; i++) {
    const c = await connect(dbA.name);
    conns.push(c);
    const A = await workItemModel(c.connection, { ttl: 30_000, ownerStorage: 'plain' }, 'TieItem');
    const B = await workItemModel(c.connection.useDb(dbB.name), { ttl: 30_000, ownerStorage: 'plain' }, 'TieItem');
    models.push({ A, B });
  }
});

afterAll(async () => {
  await dbA.drop(conns[0]!.connection);
  await dbB.drop(conns[0]!.connection.useDb(dbB.name));
  await Promise.all(conns.map((c) => c.close()));
});

test('two lockAll callers listing one id of two databases in opposite orders do not hold one each while waiting for the other', async () => {
  const [g1, g2, p1, p2] = models as [(typeof models)[0], (typeof models)[0], (typeof models)[0], (typeof models)[0]];
  const x = new Types.ObjectId();
  await g1.A.create({ _id: x, title: 'A.x' });
  await g1.B.create({ _id: x, title: 'B.x' });
  expect(g1.A.lockModel().collection.collectionName).toBe(g1.B.lockModel().collection.collectionName);
  const holdB = await p1.B.lock(x, 'P1');
  const holdA = await p2.A.lock(x, 'P2');
  const first = timed(lockAll([[g1.A, x], [g1.B, x]], 'G1', { wait: 30_000 }).then(async (docs) => {
    const at = performance.now();
    await Promise.all(docs.map((d) => d.unlock()));
    return at;
  }));
  const second = timed(lockAll([[g2.B, x], [g2.A, x]], 'G2', { wait: 30_000 }).then(async (docs) => {
    const at = performance.now();
    await Promise.all(docs.map((d) => d.unlock()));
    return at;
  }));
  await sleep(1_000); // both past the 250 ms of release-and-retry: waiting in order, each reserving
  await holdA.unlock();
  await sleep(400); // G1 takes A.x (its first document)
  await holdB.unlock();
  const released = performance.now();
  // Watch for the cycle: G1 holding A.x while G2 holds B.x.
  let crossSince: number | undefined;
  let longestCross = 0;
  let done = false;
  const watcher = (async () => {
    while (!done) {
      const [a, b] = [await holders(g1.A, [x]), await holders(g1.B, [x])];
      const now = performance.now();
      const cross = a.get(String(x))?.owner !== undefined && b.get(String(x))?.owner !== undefined && a.get(String(x))!.owner !== b.get(String(x))!.owner;
      if (cross) {
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
  console.log(`canonical tie: G1 ${r1.ok ? 'served' : String(r1.error)}, G2 ${r2.ok ? 'served' : String(r2.error)}; served ${servedAfter.join(' / ')} ms after the last release; held one each for ${Math.round(longestCross)} ms on end`);
  expect({ g1: r1.ok, g2: r2.ok }).toEqual({ g1: true, g2: true });
  expect(longestCross).toBeLessThan(500);
  expect(Math.max(...servedAfter)).toBeLessThan(1_500);
});
