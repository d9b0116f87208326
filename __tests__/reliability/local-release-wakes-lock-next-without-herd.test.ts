/**
 * Local wake-ups of waiting `lockNext` calls (fix5, 88aa4b5: NextFeed listed in local-wake.ts;
 * without live streams a release by this process wakes EVERY waiting lockNext call of that lock
 * collection, as a release's change event would). Cost and isolation under releases that concern
 * none of the waiting calls:
 *  - W waits with 12 lockNext calls on the model A: 6 on one filter (they share one read,
 *    lock-next.ts single-flight) and 6 on six other filters; none matches anything.
 *  - W also waits with 4 lockNext calls on the model B (another collection, another lock
 *    collection) whose filter matches nothing.
 *  - This process (another connection) then locks and unlocks an unrelated document of A, and a
 *    document of B with the SAME _id as one of A, RELEASES times each (local-wake.ts releasedHere).
 * Counted: the reads (aggregate/find) W's client sends to A's and B's collections, during an idle
 * window of the same length (the pollers' own rate) and during the releases. Asserted: a release of
 * one model's document wakes no call of the other model (same _id); at most one read per waiting
 * filter per release (the six calls on one filter share theirs). `changeStreams: 'never'`.
 * Measured (30 releases in ~1.7-2 s): a3d81e6 (before fix5) A 50 reads vs idle 49 (releases woke
 * nothing); 0461a24 replset A 288 vs idle 54, standalone A 275 vs idle 48: ~7.5 extra reads per
 * release with 7 filters waiting, i.e. one per filter (as one change event per release costs with
 * live streams), B 11-17 vs idle 12-18 (isolated). Holds; the cost grows with releases x filters.
 */
import type { mongo } from 'mongoose';
import { performance } from 'node:perf_hooks';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

jest.setTimeout(120_000);
const db = testDatabase('next_local_herd');
const RELEASES = 30;
let wConn: MonitoredConnection;
let hConn: MonitoredConnection;
let WA: WorkItemModel;
let WB: WorkItemModel;
let HA: WorkItemModel;
let HB: WorkItemModel;

beforeAll(async () => {
  wConn = await connect(db.name);
  hConn = await connect(db.name);
  const opts = { ttl: 30_000, ownerStorage: 'plain' as const, changeStreams: 'never' as const };
  WA = await workItemModel(wConn.connection, opts, 'HerdItemA');
  WB = await workItemModel(wConn.connection, opts, 'HerdItemB');
  HA = await workItemModel(hConn.connection, opts, 'HerdItemA');
  HB = await workItemModel(hConn.connection, opts, 'HerdItemB');
});

afterAll(async () => {
  await db.drop(hConn.connection);
  await Promise.all([wConn.close(), hConn.close()]);
});

/** Reads W's client sends to each model collection while `run` runs. */
async function reads(run: () => Promise<void>): Promise<{ a: number; b: number; ms: number }> {
  const count = { a: 0, b: 0 };
  const a = WA.collection.collectionName;
  const b = WB.collection.collectionName;
  const listener = (event: { commandName: string; command: mongo.Document }) => {
    if (event.commandName !== 'aggregate' && event.commandName !== 'find') return;
    const target = event.command[event.commandName];
    if (target === a) count.a++;
    if (target === b) count.b++;
  };
  const client = wConn.connection.getClient();
  client.on('commandStarted', listener);
  const began = performance.now();
  try {
    await run();
  } finally {
    client.off('commandStarted', listener);
  }
  return { ...count, ms: Math.round(performance.now() - began) };
}

test('releases by this process of documents no waiting lockNext call can take: reads per release, cross-model isolation', async () => {
  const [a1] = (await HA.insertMany([{ title: 'busy-a' }])).map((x) => x._id);
  await HB.insertMany([{ _id: a1, title: 'busy-b' }]);
  const stop = new AbortController();
  const calls: Promise<unknown>[] = [];
  for (let i = 0; i < 6; i++) calls.push(WA.lockNext({ title: 'none-shared' }, `ws${i}`, { wait: 100_000, signal: stop.signal }).catch(() => null));
  for (let i = 0; i < 6; i++) calls.push(WA.lockNext({ title: `none-${i}` }, `wo${i}`, { wait: 100_000, signal: stop.signal }).catch(() => null));
  for (let i = 0; i < 4; i++) calls.push(WB.lockNext({ title: 'none-b' }, `wb${i}`, { wait: 100_000, signal: stop.signal }).catch(() => null));
  await sleep(3_000); // past the first searches and the fast polls
  let cycleMs = 0;
  const busyA = await reads(async () => {
    const began = performance.now();
    for (let i = 0; i < RELEASES; i++) {
      const held = await HA.lock(a1!, 'H');
      await held.unlock();
      await sleep(50);
    }
    cycleMs = performance.now() - began;
  });
  const idle = await reads(() => sleep(cycleMs));
  const busyB = await reads(async () => {
    for (let i = 0; i < RELEASES; i++) {
      const held = await HB.lock(a1!, 'H');
      await held.unlock();
      await sleep(50);
    }
  });
  stop.abort();
  await Promise.all(calls);
  console.log(
    `lockNext waiters (A: 7 filters, 12 calls; B: 1 filter, 4 calls), ${RELEASES} local releases: ` +
      `idle ${idle.ms} ms: A ${idle.a} reads, B ${idle.b}; releases of A's doc (${busyA.ms} ms): A ${busyA.a}, B ${busyA.b}; releases of B's doc (${busyB.ms} ms): A ${busyB.a}, B ${busyB.b}`,
  );
  // Cross-model isolation: a release of A's document wakes none of B's calls and vice versa
  // (their reads stay at the idle polling rate, with slack for a loaded machine).
  expect(busyA.b).toBeLessThanOrEqual(idle.b * 2 + 4);
  expect(busyB.a).toBeLessThanOrEqual(idle.a * 2 + 4);
  // No herd: the six calls on one filter share their reads; at most one read per filter per release.
  expect(busyA.a).toBeLessThanOrEqual(RELEASES * 7 + idle.a * 2);
});
