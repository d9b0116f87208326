/**
 * A holder that SHORTENS its lease (`extendLock(ttl)` with a ttl below what is left) brings the
 * moment its lock expires forward; a caller waiting for the document (`lock(..., { wait })`, or a
 * waiting group) must be served soon after that new expiry, not only when the expiry it read
 * before comes (or its 5 s safety poll). On main (a483dfc) the extension's change event wakes the
 * waiters, which read the new expiry. Branch fair4retry (LockWatch: "a change event that moves only
 * a lock's `expiresAt` (a renewal) no longer wakes the document's waiters") skips that event: the
 * waiter sleeps on. The holder takes the lock with a 30 s ttl, the waiters line up, then the holder
 * shortens it to 1 s and goes away without releasing. Bound: served within 3 s of the shortening
 * (the new expiry plus a generous margin); printed.
 *
 * On main 68d06ab (replica set) both cases FAIL: lock served 4007 ms, lockMany 4273 ms after the
 * shortening (standalone: 1009 / 1014 ms, polling). The skip is commented in lock-waiter.ts (pump)
 * but not in CHANGELOG / docs/limits.md.
 * Fixed (LockWatch, lock-waiter.ts expiresSoon): an expiry-only event whose new expiry is less than
 * the 5 s safety poll after the event wakes the waiters (docs/limits.md, Leases).
 */
import { performance } from 'node:perf_hooks';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { timed } from '../support/group-waiting';
import { workItemModel, type WorkItemModel } from '../support/work-item';

jest.setTimeout(120_000);
const db = testDatabase('holder_shortens');
let hConn: MonitoredConnection;
let wConn: MonitoredConnection;
let H: WorkItemModel;
let W: WorkItemModel;
const BOUND_MS = 3_000;

beforeAll(async () => {
  [hConn, wConn] = [await connect(db.name), await connect(db.name)];
  H = await workItemModel(hConn.connection, { ttl: 30_000, ownerStorage: 'plain' }, 'ShortenItem');
  W = await workItemModel(wConn.connection, { ttl: 30_000, ownerStorage: 'plain' }, 'ShortenItem');
  // Warm up: the waiters' change stream is open before the cases (a stream that opens during a
  // wait makes the waiter read the record again, which would hide what is measured).
  const [x] = (await H.insertMany([{ title: 'warm' }])).map((d) => d._id);
  const held = await H.lock(x!, 'H');
  const waiting = W.lock(x!, 'W', { wait: 10_000 });
  await sleep(1_500);
  await held.unlock();
  await (await waiting).unlock();
});

afterAll(async () => {
  await db.drop(hConn.connection);
  await Promise.all([hConn.close(), wConn.close()]);
});

test.each(['lock', 'lockMany'] as const)('a %s waiter is served soon after the holder shortens its lease to 1 s', async (kind) => {
  const [d, e] = (await H.insertMany([{ title: 'd' }, { title: 'e' }])).map((x) => x._id);
  const held = await H.lock(d!, 'H');
  const call = kind === 'lock' ? timed(W.lock(d!, 'W', { wait: 20_000 }).then((doc) => [doc])) : timed(W.lockMany([d!, e!], 'W', { wait: 20_000 }));
  // The waiter has read the 30 s expiry and waits (woken by the stream on a replica set).
  await sleep(1_000);
  const shortened = performance.now();
  await held.extendLock(1_000);
  const outcome = await call;
  const ms = Math.round(performance.now() - shortened);
  console.log(`${kind} waiter after the holder shortened its lease to 1 s: ${outcome.ok ? 'served' : 'refused'} ${ms} ms after the shortening`);
  expect(outcome.ok).toBe(true);
  expect(ms).toBeLessThan(BOUND_MS);
  if (outcome.ok) await W.unlockMany(outcome.value);
});
