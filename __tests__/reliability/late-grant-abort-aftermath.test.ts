/**
 * What is left after a waiting lock call is called off (or times out) while a late grant's
 * reservation is written back (plugin.ts takeLease, untilAborted, f8f6fcd): the call ends at once
 * and the write-back and release go on in the background.
 *
 * Scene as reliability/abort-during-late-grant-write-back: H holds d; O (own appName) waits with a
 * signal and reserves d; O's next findAndModify is held past the ttl (late grant); then O's
 * `update`s (write-back, release, renewals) are held 2.5 s, and the signal ends during that hold.
 *
 * docs/api.md (Waiting): a timeout "ends the same way" as `wait` running out (LockedError with the
 * TimeoutError as cause); an explicit abort rejects with the reason. Afterwards no lock record of O
 * and no reservation may remain (PRODUCT: a call that ended holds nothing).
 */
import { getEventListeners } from 'node:events';
import { performance } from 'node:perf_hooks';
import { LockError } from '../../src';
import { blockCommands, failPointOff, outcome } from '../plugin/guard/support';
import { connect, sleep, testDatabase, waitUntil, type MonitoredConnection } from '../support/db';
import { usesPrivateServer } from '../support/private-server';
import { workItemModel, type WorkItemModel } from '../support/work-item';

usesPrivateServer();
jest.setTimeout(120_000);
const db = testDatabase('late_grant_abort_after');
const TTL = 1_000;
let admin: MonitoredConnection;
let oConn: MonitoredConnection;
let H: WorkItemModel;
let O: WorkItemModel;
const O_APP = `mpl-lgaa-o-${process.pid}`;

beforeAll(async () => {
  admin = await connect(db.name);
  oConn = await connect(db.name, { appName: O_APP });
  H = await workItemModel(admin.connection, { ttl: TTL, ownerStorage: 'plain' }, 'LateGrantAbortAfterItem');
  O = await workItemModel(oConn.connection, { ttl: TTL, ownerStorage: 'plain' }, 'LateGrantAbortAfterItem');
});

afterEach(async () => {
  await failPointOff(admin.connection).catch(() => undefined);
});

afterAll(async () => {
  await db.drop(admin.connection);
  await Promise.all([admin.close(), oConn.close()]);
});

/** Runs the scene; `end` ends O's signal while the write-back is held. */
async function scene(title: string, end: (c: AbortController) => void) {
  const [d] = (await H.insertMany([{ title }])).map((x) => x._id);
  const ns = `${db.name}.${H.lockModel().collection.collectionName}`;
  const held = await H.lock(d!, 'H', { ttl: 30_000 });
  const stop = new AbortController();
  const o = outcome(O.lock(d!, 'O', { wait: 60_000, signal: stop.signal }));
  expect(await waitUntil(async () => typeof (await H.lockModel().collection.findOne({ _id: d }))?.reservedBy === 'string', 10_000, 50)).toBe(true);
  await blockCommands(admin.connection, { appName: O_APP, namespace: ns, commands: ['findAndModify'], blockTimeMS: TTL + 400, times: 1 });
  const released = performance.now();
  await held.unlock();
  await sleep(300);
  await blockCommands(admin.connection, { appName: O_APP, namespace: ns, commands: ['update'], blockTimeMS: 2_500, times: 10 });
  await sleep(Math.max(0, TTL + 400 + 500 - (performance.now() - released)));
  const endedAt = performance.now();
  end(stop);
  const result = await o;
  const settledMs = Math.round(performance.now() - endedAt);
  return { d: d!, result, settledMs, signal: stop.signal };
}

test('explicit abort during the write-back: rejects with the reason; afterwards no lock of O and no reservation is left', async () => {
  const reason = new DOMException('called off', 'AbortError');
  const { d, result, settledMs, signal } = await scene('abort-aftermath', (c) => c.abort(reason));
  if (result.ok) await result.value.unlock().catch(() => undefined);
  expect(result.ok ? undefined : result.error).toBe(reason);
  await failPointOff(admin.connection);
  // The background release and the reservation's clear land once the held updates are answered.
  const clean = await waitUntil(async () => {
    const r = await H.lockModel().collection.findOne({ _id: d });
    // The late lease may be left to expire (its release is best effort and lands after it ran out).
    return !r || (r.reservedBy === undefined && (r.owner !== 'O' || (r.expiresAt as Date).getTime() < Date.now()));
  }, 15_000, 100);
  const record = await H.lockModel().collection.findOne({ _id: d });
  console.log(`abort: rejected ${settledMs} ms after; record afterwards ${JSON.stringify(record)}`);
  expect(clean).toBe(true);
  expect(getEventListeners(signal, 'abort')).toHaveLength(0);
  // Someone else takes d without waiting.
  const other = await H.tryLock(d, 'X');
  expect(other).not.toBeNull();
  await other?.unlock();
});

test('a timeout (reason named TimeoutError) during the write-back ends as a wait that ran out: a LockError, not the raw TimeoutError', async () => {
  const reason = new DOMException('timed out', 'TimeoutError');
  const { d, result, settledMs } = await scene('timeout-aftermath', (c) => c.abort(reason));
  if (result.ok) await result.value.unlock().catch(() => undefined);
  const error = result.ok ? undefined : result.error;
  console.log(`timeout: ${result.ok ? 'RETURNED A LOCK' : `rejected with ${(error as Error).constructor.name} ${(error as Error).name}: ${(error as Error).message}`} ${settledMs} ms after`);
  // A lock from an attempt already sent would be allowed; a rejection must be the plugin's typed error.
  if (!result.ok) {
    expect(error).not.toBe(reason);
    expect(error).toBeInstanceOf(LockError);
  }
  await failPointOff(admin.connection);
  expect(await waitUntil(async () => {
    const r = await H.lockModel().collection.findOne({ _id: d });
    // The late lease may be left to expire (its release is best effort and lands after it ran out).
    return !r || (r.reservedBy === undefined && (r.owner !== 'O' || (r.expiresAt as Date).getTime() < Date.now()));
  }, 15_000, 100)).toBe(true);
});
