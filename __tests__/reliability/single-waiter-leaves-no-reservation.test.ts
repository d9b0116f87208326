/**
 * A single-document waiter that stops waiting leaves nothing behind (attack-fair4 brief: "nothing
 * half-written after an abort or timeout at each new command (reserve, takeover, renewal)"). In a
 * design where a waiting `lock` reserves the document it waits for after 250 ms of refusals
 * (renewed each second, lapsing 3 s after the last renewal), the call's end (an explicit abort, its
 * `wait` running out, a timed-out signal) must clear the reservation, not leave it to lapse: once
 * the holder lets go, a caller that does not wait gets the document within 1.5 s of the waiter's
 * end. A reservation left to lapse would refuse it for at least 2 s (3 s after a renewal made at
 * most 1 s before the end).
 *
 * And with the reserve itself held by the server (failCommand blockConnection on the waiter's
 * `update`s, 2 s) when the call ends: once the held command answers, the same 1.5 s.
 * On main (a483dfc) single waiters never reserve: every case passes at once.
 */
import { performance } from 'node:perf_hooks';
import type { Types } from 'mongoose';
import { deploymentFacts } from '../conformance/support/server';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { usesPrivateServer } from '../support/private-server';
import { appConnections, failPointOff, retryUntil, timed } from '../support/group-waiting';
import { workItemModel, type WorkItemModel } from '../support/work-item';

usesPrivateServer();
jest.setTimeout(180_000);
const db = testDatabase('single_no_reservation');
let admin: MonitoredConnection;
let wConn: MonitoredConnection & { app: string };
let W: WorkItemModel;
let X: WorkItemModel;
const CLEARED_MS = 1_500;

beforeAll(async () => {
  admin = await connect(db.name);
  [wConn] = await appConnections(db.name, 'mpl-single-noresv', 1);
  W = await workItemModel(wConn.connection, { ttl: 30_000, ownerStorage: 'plain' }, 'NoReservationItem');
  X = await workItemModel(admin.connection, { ttl: 30_000, ownerStorage: 'plain' }, 'NoReservationItem');
});

afterAll(async () => {
  await failPointOff(admin.connection);
  await db.drop(admin.connection);
  await Promise.all([admin.close(), wConn.close()]);
});

const withFailPoints = deploymentFacts().failPoints ? test : test.skip;

async function heldDoc(): Promise<{ d: Types.ObjectId; release(): Promise<void> }> {
  const [d] = (await X.insertMany([{ title: 'd' }])).map((x) => x._id);
  const held = await X.lock(d!, 'H');
  return { d: d!, release: () => held.unlock() };
}

test.each(['abort', 'wait runs out', 'signal times out'] as const)('a single waiter that ends by %s leaves no reservation: a tryLock gets the document within 1.5 s', async (how) => {
  const { d, release } = await heldDoc();
  const controller = new AbortController();
  const options = how === 'abort' ? { wait: 30_000, signal: controller.signal } : how === 'wait runs out' ? { wait: 2_200 } : { signal: AbortSignal.timeout(2_200) };
  const call = timed(W.lock(d, 'W', options));
  await sleep(2_000);
  if (how === 'abort') controller.abort(new Error('caller gave up'));
  const outcome = await call;
  expect(outcome.ok).toBe(false);
  const ended = performance.now();
  await release();
  const got = await retryUntil(() => X.tryLock(d, 'X'), 6_000, 50);
  const afterEnd = Math.round(performance.now() - ended);
  console.log(`single waiter ended by ${how} (${(outcome as { error: Error }).error?.constructor.name}): tryLock got d ${afterEnd} ms after the end (${got.tries} tries)`);
  expect(got.value).not.toBeNull();
  expect(afterEnd).toBeLessThan(CLEARED_MS);
  await got.value?.unlock();
});

withFailPoints('a single waiter aborted while its reservation command is held by the server: cleared once that command answers', async () => {
  const { d, release } = await heldDoc();
  const controller = new AbortController();
  // Every `update` of the waiter on the lock collection (a reserve, a renewal, a clear) is held 2 s, the next two of them.
  await admin.connection.getClient().db('admin').command({
    configureFailPoint: 'failCommand',
    mode: { times: 2 },
    data: { failCommands: ['update'], appName: wConn.app, namespace: `${db.name}.${W.lockModel().collection.collectionName}`, blockConnection: true, blockTimeMS: 2_000 },
  });
  const call = timed(W.lock(d, 'W', { wait: 30_000, signal: controller.signal }));
  await sleep(800);
  controller.abort(new Error('caller gave up'));
  const outcome = await call;
  expect(outcome.ok).toBe(false);
  await release();
  // The held commands (a reserve at ~250 ms, then the clear queued behind it) answer by about
  // 250 + 2 x 2,000 ms from the call; then the clear is applied.
  await sleep(4_500);
  const from = performance.now();
  const got = await retryUntil(() => X.tryLock(d, 'X'), 6_000, 50);
  const ms = Math.round(performance.now() - from);
  await failPointOff(admin.connection);
  console.log(`single waiter aborted with its reservation commands held: tryLock got d ${ms} ms after the held commands answered (${got.tries} tries)`);
  expect(got.value).not.toBeNull();
  expect(ms).toBeLessThan(CLEARED_MS);
  await got.value?.unlock();
});
