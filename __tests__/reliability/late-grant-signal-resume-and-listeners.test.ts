/**
 * More edges of plugin.ts takeLease's untilAborted (f8f6fcd): a resume by ticket (which takes no
 * signal, arguments.ts), a timeout that lands while a late grant is in flight
 * (before the write-back), and the abort listeners of many late grants without an abort.
 *
 * docs/api.md (Waiting): an explicit abort rejects with the signal's reason; a timeout ends as `wait`
 * running out (LockedError, the TimeoutError as cause) — never the raw TimeoutError. Lock calls
 * follow the same rule whatever path the late grant took.
 */
import { getEventListeners } from 'node:events';
import { LockError } from '../../src';
import { blockCommands, failPointOff, outcome } from '../plugin/guard/support';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { usesPrivateServer } from '../support/private-server';
import { workItemModel, type WorkItemModel } from '../support/work-item';

usesPrivateServer();
jest.setTimeout(120_000);
const db = testDatabase('late_grant_sig_resume');
const TTL = 1_000;
let admin: MonitoredConnection;
let oConn: MonitoredConnection;
let H: WorkItemModel;
let O: WorkItemModel;
const O_APP = `mpl-lgsr-o-${process.pid}`;
let ns: string;

beforeAll(async () => {
  admin = await connect(db.name);
  oConn = await connect(db.name, { appName: O_APP });
  H = await workItemModel(admin.connection, { ttl: TTL, ownerStorage: 'plain' }, 'LateGrantSigResumeItem');
  O = await workItemModel(oConn.connection, { ttl: TTL, ownerStorage: 'plain' }, 'LateGrantSigResumeItem');
  ns = `${db.name}.${H.lockModel().collection.collectionName}`;
});

afterEach(async () => {
  await failPointOff(admin.connection).catch(() => undefined);
});

afterAll(async () => {
  await db.drop(admin.connection);
  await Promise.all([admin.close(), oConn.close()]);
});

test('a resume by ticket takes no signal (it never waits): InvalidLockOptionError, nothing sent, so no late resume grant can meet an abort', async () => {
  const [d] = (await H.insertMany([{ title: 'resume-signal' }])).map((x) => x._id);
  const first = await O.lock(d!, 'O', { ttl: 30_000 });
  const ticket = first.heldLock()!.ticket;
  oConn.resetCommands();
  const result = await outcome(O.lock(d!, 'O', { resume: ticket, signal: new AbortController().signal }));
  expect(result.ok ? undefined : (result.error as Error).constructor.name).toBe('InvalidLockOptionError');
  expect(oConn.commands).toEqual([]);
  await first.unlock();
});

test('a waiting lock whose signal times out while its late grant is in flight: not the raw TimeoutError', async () => {
  const [d] = (await H.insertMany([{ title: 'inflight-timeout' }])).map((x) => x._id);
  await blockCommands(admin.connection, { appName: O_APP, namespace: ns, commands: ['findAndModify'], blockTimeMS: TTL + 800, times: 1 });
  const reason = new DOMException('timed out', 'TimeoutError');
  const stop = new AbortController();
  const o = outcome(O.lock(d!, 'O', { wait: 60_000, signal: stop.signal }));
  await sleep(TTL + 300);
  stop.abort(reason);
  const result = await o;
  if (result.ok) await result.value.unlock().catch(() => undefined);
  const error = result.ok ? undefined : result.error;
  console.log(`in-flight timeout: ${result.ok ? 'RETURNED A LOCK' : `${(error as Error).constructor.name} ${(error as Error).name}`}`);
  if (!result.ok) {
    expect(error).not.toBe(reason);
    expect(error).toBeInstanceOf(LockError);
  }
});

test('many late grants without an abort leave no abort listener on the signal', async () => {
  const [d] = (await H.insertMany([{ title: 'listeners' }])).map((x) => x._id);
  // Five late grants in a row (two takeLease rounds), then a timely one.
  await blockCommands(admin.connection, { appName: O_APP, namespace: ns, commands: ['findAndModify'], blockTimeMS: TTL + 300, times: 5 });
  const stop = new AbortController();
  let most = 0;
  const sampler = setInterval(() => (most = Math.max(most, getEventListeners(stop.signal, 'abort').length)), 5);
  const result = await outcome(O.lock(d!, 'O', { wait: 60_000, signal: stop.signal }));
  clearInterval(sampler);
  console.log(`listeners: ${result.ok ? 'locked' : (result.error as Error).name}; most abort listeners seen ${most}; after ${getEventListeners(stop.signal, 'abort').length}`);
  if (result.ok) await result.value.unlock();
  expect(result.ok).toBe(true);
  expect(getEventListeners(stop.signal, 'abort')).toHaveLength(0);
  expect(most).toBeLessThanOrEqual(2);
});
