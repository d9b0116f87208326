/**
 * The lease of a group handed out after ORDERED waiting (issue 17 item 2; PRODUCT.md properties 1
 * and 13; attack-fair4 brief). A waiting group keeps the canonical prefix it got while it waits for
 * the rest; a design may keep that prefix under a lease SHORTER than the ttl (ending near the
 * group's give-up time, so that a caller honouring Retry-After lands after it), and renew it to the
 * full ttl when it gets the whole group. Whatever the design:
 *  1. the group handed out carries, on every document, the ttl the caller asked for (the prefix's
 *     documents as much as the last one), on the server and in what the documents believe;
 *  2. a prefix that lapsed while the group was stalled (its give-up delayed by the server holding
 *     its commands) and was taken by someone else is never handed out: the group gets it back only
 *     after the other owner lets go;
 *  3. a fault, or an abort, at any command of the step that completes the group (the take, the
 *     read of the grants, the load, any renewal after it) leaves nothing half-written: the call ends
 *     with an error and holds nothing, or is handed out with leases the server grants.
 * Checked on the server (support/group-waiting.ts groupProblems / holders: owner, token, expiry by
 * the server's clock), right after each call ended.
 */
import type { Types } from 'mongoose';
import { LockedError, lockAll, unlockAll } from '../../src';
import { deploymentFacts } from '../conformance/support/server';
import type { Connection } from 'mongoose';
import { connect, operatorConnection, sleep, testDatabase, waitUntil, type MonitoredConnection } from '../support/db';
import { usesPrivateServer } from '../support/private-server';
import { appConnections, failPointOff, groupProblems, heldCount, holders, retryUntil, timed } from '../support/group-waiting';
import { workItemModel, type WorkItemModel } from '../support/work-item';

usesPrivateServer();
jest.setTimeout(400_000);

const db = testDatabase('grp_lease_ordered');
const TTL = 20_000;
let admin: MonitoredConnection;
let gConn: MonitoredConnection & { app: string };
let hConn: MonitoredConnection;
let G: WorkItemModel;
let GShort: WorkItemModel;
let H: WorkItemModel;
let X: WorkItemModel;
let XShort: WorkItemModel;
let HShort: WorkItemModel;
let operator: Connection;
let locks: string;

beforeAll(async () => {
  admin = await connect(db.name);
  [gConn] = await appConnections(db.name, 'mpl-grp-lease-ordered', 1);
  hConn = await connect(db.name);
  G = await workItemModel(gConn.connection, { ttl: TTL, ownerStorage: 'plain' }, 'OrderedLeaseItem');
  GShort = await workItemModel(gConn.connection, { ttl: 6_000, ownerStorage: 'plain' }, 'OrderedLeaseShort');
  H = await workItemModel(hConn.connection, { ttl: 60_000, ownerStorage: 'plain' }, 'OrderedLeaseItem');
  X = await workItemModel(admin.connection, { ttl: 60_000, ownerStorage: 'plain' }, 'OrderedLeaseItem');
  XShort = await workItemModel(admin.connection, { ttl: 60_000, ownerStorage: 'plain' }, 'OrderedLeaseShort');
  HShort = await workItemModel(hConn.connection, { ttl: 60_000, ownerStorage: 'plain' }, 'OrderedLeaseShort');
  // Reads of expiry minus $$NOW are the test's own, not the plugin's (not recorded as lock commands).
  operator = await operatorConnection(db.name);
  locks = G.lockModel().collection.collectionName;
});

afterAll(async () => {
  await failPointOff(admin.connection);
  await db.drop(admin.connection);
  await Promise.all([admin.close(), gConn.close(), hConn.close(), operator.close()]);
});

const withFailPoints = deploymentFacts().failPoints ? test : test.skip;

async function sorted(model: WorkItemModel, n: number): Promise<Types.ObjectId[]> {
  return (await model.insertMany(Array.from({ length: n }, (_, i) => ({ title: `d${i}` })))).map((d) => d._id).sort((x, y) => x.toHexString().localeCompare(y.toHexString()));
}

/** Server expiry minus server now, per id (ms), read in one command. */
async function serverLeft(model: WorkItemModel, ids: readonly Types.ObjectId[]): Promise<number[]> {
  const [row] = await operator
    .collection(model.lockModel().collection.collectionName)
    .aggregate<{ left: Array<{ _id: Types.ObjectId; left: number }> }>([
      { $match: { _id: { $in: [...ids] } } },
      { $project: { left: { $subtract: ['$expiresAt', '$$NOW'] } } },
      { $group: { _id: null, left: { $push: { _id: '$_id', left: '$left' } } } },
    ])
    .toArray();
  const byId = new Map((row?.left ?? []).map((r) => [String(r._id), r.left]));
  return ids.map((id) => byId.get(String(id)) ?? -1);
}

test('a group handed out after ordered waiting carries the full ttl on every document, prefix included (H lets go at 0.6, 1.2 and 1.8 s)', async () => {
  const seen: string[] = [];
  for (const releaseAt of [600, 1_200, 1_800]) {
    const ids = await sorted(G, 3);
    // H holds the LAST of the canonical order: the group keeps [d0, d1] as its prefix while it waits.
    const held = await H.lock(ids[2]!, 'H');
    const call = timed(G.lockMany([ids[2]!, ids[0]!, ids[1]!], 'G', { wait: 30_000 }));
    await sleep(releaseAt);
    await held.unlock();
    const got = await call;
    expect(got.ok).toBe(true);
    if (!got.ok) continue;
    const docs = got.value;
    const beliefs = docs.map((d) => Math.round(d.heldLock()!.msLeft()));
    const left = await serverLeft(G, [ids[2]!, ids[0]!, ids[1]!]);
    const problems = await groupProblems(G, docs, 'G');
    seen.push(`released at ${releaseAt} ms, served after ${got.ms} ms: msLeft ${beliefs.join(' / ')}, server ${left.map(Math.round).join(' / ')}`);
    expect(problems).toEqual([]);
    // The full ttl, less what the hand-out itself took (generous: 5 s on a loaded machine).
    for (const ms of [...beliefs, ...left]) expect(ms).toBeGreaterThan(TTL - 5_000);
    await G.unlockMany(docs);
  }
  console.log(`group after ordered waiting (ttl ${TTL}):\n  ${seen.join('\n  ')}`);
});

test('a group handed out after ordered waiting through acquireLocks: the handle counts on the full ttl, and so does the server', async () => {
  const ids = await sorted(G, 3);
  const held = await H.lock(ids[2]!, 'H');
  const call = timed(G.acquireLocks(ids, 'G', { wait: 30_000 }));
  await sleep(1_000);
  await held.unlock();
  const got = await call;
  expect(got.ok).toBe(true);
  if (!got.ok) return;
  const handle = got.value;
  const left = await serverLeft(G, ids);
  const problems = await groupProblems(G, handle.documents, 'G');
  console.log(`acquireLocks after ordered waiting: handle msLeft ${Math.round(handle.msLeft())}, server ${left.map(Math.round).join(' / ')}`);
  expect(problems).toEqual([]);
  expect(handle.msLeft()).toBeGreaterThan(TTL - 5_000);
  for (const ms of left) expect(ms).toBeGreaterThan(TTL - 5_000);
  await handle.release();
});

test('after ordered waiting: lockStatus, a resume by ticket and extendLock() without a ttl all see the full ttl on every document', async () => {
  const ids = await sorted(G, 3);
  const held = await H.lock(ids[2]!, 'H');
  const call = timed(G.lockMany(ids, 'G', { wait: 30_000 }));
  await sleep(1_000);
  await held.unlock();
  const got = await call;
  expect(got.ok).toBe(true);
  if (!got.ok) return;
  const docs = got.value;
  const status = await G.lockStatus(ids, { owner: 'G' });
  const resumed = await Promise.all(docs.map((d) => G.lock(d._id, 'G', { resume: d.heldLock()!.ticket })));
  const resumedLeft = resumed.map((d) => Math.round(d.heldLock()!.msLeft()));
  await sleep(500);
  const extendedTo = await Promise.all(resumed.map((d) => d.extendLock()));
  const left = await serverLeft(G, ids);
  console.log(`after ordered waiting: lockStatus remainingMs ${status.map((s) => s?.remainingMs).join(' / ')}; resumed msLeft ${resumedLeft.join(' / ')}; extendLock() to ${extendedTo.map((d) => d.getTime() - Date.now()).join(' / ')} ms from now; server ${left.map(Math.round).join(' / ')}`);
  for (const s of status) {
    expect(s?.mine).toBe(true);
    expect(s!.remainingMs).toBeGreaterThan(TTL - 5_000);
  }
  for (const ms of [...resumedLeft, ...left, ...extendedTo.map((d) => d.getTime() - Date.now())]) expect(ms).toBeGreaterThan(TTL - 5_000);
  await G.unlockMany(resumed);
});

test('lockAll over two lock collections after ordered waiting: every document, in both collections, carries the full ttl', async () => {
  const GInvoice = await workItemModel(gConn.connection, { ttl: TTL, ownerStorage: 'plain' }, 'OrderedLeaseInvoice');
  const items = await sorted(G, 2);
  const [invoice] = await sorted(GInvoice, 1);
  // Canonical order: the invoices' lock collection comes before the items' (by name): the group
  // keeps [invoice, items[0]] while H holds items[1], the last.
  const held = await H.lock(items[1]!, 'H');
  const call = timed(lockAll([[G, items[1]!], [GInvoice, invoice!], [G, items[0]!]], 'G', { wait: 30_000 }));
  await sleep(1_000);
  const prefix = [(await holders(G, [items[0]!])).get(String(items[0]))?.owner, (await holders(GInvoice, [invoice!])).get(String(invoice))?.owner];
  await held.unlock();
  const got = await call;
  expect(got.ok).toBe(true);
  if (!got.ok) return;
  const [i1, inv, i0] = got.value;
  const beliefs = [i1, inv, i0].map((d) => Math.round(d.heldLock()!.msLeft()));
  const left = [...(await serverLeft(G, [items[1]!, items[0]!])), ...(await serverLeft(GInvoice, [invoice!]))];
  const problems = [...(await groupProblems(G, [i1, i0], 'G')), ...(await groupProblems(GInvoice, [inv], 'G'))];
  console.log(`lockAll after ordered waiting (prefix held by ${prefix.join(', ')}): msLeft ${beliefs.join(' / ')}, server ${left.map(Math.round).join(' / ')}`);
  expect(problems).toEqual([]);
  for (const ms of [...beliefs, ...left]) expect(ms).toBeGreaterThan(TTL - 5_000);
  await unlockAll([i1, inv, i0]);
});

withFailPoints('a prefix that lapsed while the group was stalled, and was taken by another owner, is never handed out', async () => {
  const results: string[] = [];
  // Stalls of G's commands on the lock collection, longer than the ttl (6 s): its give-up, its
  // release, its next step are held by the server while the prefix runs out.
  for (const stall of [{ commands: ['update'], ms: 8_000 }, { commands: ['find'], ms: 8_000 }, { commands: ['update', 'find'], ms: 7_000 }]) {
    const [a, b] = await sorted(GShort, 2);
    const held = await HShort.lock(b!, 'H');
    const call = timed(GShort.lockMany([b!, a!], 'G', { wait: 12_000 }));
    // Once the group is ordered, holding a and waiting for b (the first call on a model may take a
    // second longer: its change stream opens).
    expect(await waitUntil(async () => (await holders(GShort, [a!])).get(String(a))?.owner === 'G', 10_000)).toBe(true);
    await admin.connection.getClient().db('admin').command({
      configureFailPoint: 'failCommand',
      mode: { times: 2 },
      data: { failCommands: stall.commands, appName: gConn.app, namespace: `${db.name}.${GShort.lockModel().collection.collectionName}`, blockConnection: true, blockTimeMS: stall.ms },
    });
    // X takes a as soon as it is free (the prefix lapsed or was given back), and keeps it.
    const xGot = await retryUntil(() => XShort.tryLock(a!, 'X'), 25_000, 50);
    await held.unlock();
    const g = await call;
    await failPointOff(admin.connection);
    const gProblems = g.ok ? await groupProblems(GShort, g.value, 'G') : [];
    const aHolder = (await holders(GShort, [a!])).get(String(a))?.owner;
    results.push(`stall ${stall.commands.join('+')} ${stall.ms} ms: X got a after ${xGot.ms} ms; G ${g.ok ? 'served' : (g.error as Error).name} after ${g.ms} ms; a held by ${aHolder}`);
    if (xGot.value) {
      // X never let go of a: G must not have been handed it.
      expect(g.ok ? `G served while X holds a: ${gProblems.join('; ')}` : (g.error as Error).constructor).toBe(LockedError);
      expect(aHolder).toBe('X');
      await xGot.value.unlock();
    } else if (g.ok) expect(gProblems).toEqual([]);
    if (g.ok) await GShort.unlockMany(g.value);
    expect(await waitUntil(async () => (await heldCount(GShort, 'G')) === 0, 10_000)).toBe(true);
  }
  console.log(`prefix lapse under stalls:\n  ${results.join('\n  ')}`);
});

withFailPoints('a fault at each command after the holder lets go (the completing step, its reads, any renewal): the call ends honestly and nothing is left held', async () => {
  // ttl 6 s: a prefix lease ending near the give-up time is shorter than the ttl, so completing the
  // group needs a renewal; a lock a failed release could not give back expires within 6 s.
  const shortLocks = GShort.lockModel().collection.collectionName;
  const client = gConn.connection.getClient();
  const results: string[] = [];
  for (let skip = 0; skip < 7; skip++) {
    const ids = await sorted(GShort, 3);
    const held = await HShort.lock(ids[2]!, 'H');
    const call = timed(GShort.lockMany(ids, 'G', { wait: 15_000 }));
    await sleep(1_000);
    // From the `skip`-th command of G on the lock collection on, commands fail (HostUnreachable,
    // as a network error would answer) until G sees the first failure: then the fail point is
    // turned off (mongod's mode takes one of times / skip, not both). One command in flight beside
    // it may fail too.
    let failed = 0;
    const onFailed = (event: { commandName: string }) => {
      if (++failed === 1) void failPointOff(admin.connection);
      void event;
    };
    client.on('commandFailed', onFailed);
    await admin.connection.getClient().db('admin').command({
      configureFailPoint: 'failCommand',
      mode: { skip },
      data: { failCommands: ['update', 'find'], appName: gConn.app, namespace: `${db.name}.${shortLocks}`, errorCode: 6 },
    });
    await held.unlock();
    const g = await call;
    client.off('commandFailed', onFailed);
    await failPointOff(admin.connection);
    if (g.ok) {
      const problems = await groupProblems(GShort, g.value, 'G');
      const left = await serverLeft(GShort, ids);
      results.push(`skip ${skip}: served after ${g.ms} ms (${failed} failed), server ${left.map(Math.round).join(' / ')}${problems.length ? `, PROBLEMS ${problems.join('; ')}` : ''}`);
      expect(problems).toEqual([]);
      for (const ms of left) expect(ms).toBeGreaterThan(6_000 - 3_000);
      await GShort.unlockMany(g.value);
    } else {
      const heldAfter = await heldCount(GShort, 'G');
      results.push(`skip ${skip}: ${(g.error as Error).name} after ${g.ms} ms (${failed} failed), G still held ${heldAfter} right after`);
      // Nothing of G's is left held once the call ended, except what a failed release could not
      // give back, which expires by the ttl.
      expect(await waitUntil(async () => (await heldCount(GShort, 'G')) === 0, 9_000)).toBe(true);
      for (const id of ids) {
        const got = await retryUntil(() => XShort.tryLock(id, 'X'), 6_000);
        expect(got.value).not.toBeNull();
        await got.value?.unlock();
      }
    }
  }
  console.log(`a fault at each command after the release:\n  ${results.join('\n  ')}`);
});

withFailPoints('an abort while each command after the holder lets go is held by the server: the call ends with the reason, nothing stays held or reserved', async () => {
  const results: string[] = [];
  for (let skip = 0; skip < 6; skip++) {
    const ids = await sorted(G, 3);
    const held = await H.lock(ids[2]!, 'H');
    const controller = new AbortController();
    const call = timed(G.lockMany(ids, 'G', { wait: 15_000, signal: controller.signal }));
    await sleep(1_000);
    await admin.connection.getClient().db('admin').command({
      configureFailPoint: 'failCommand',
      // From the `skip`-th command on, each is held 1.5 s by the server (off once the call settled).
      mode: { skip },
      data: { failCommands: ['update', 'find'], appName: gConn.app, namespace: `${db.name}.${locks}`, blockConnection: true, blockTimeMS: 1_500 },
    });
    let settledBeforeAbort = false;
    void call.then(() => (settledBeforeAbort = !controller.signal.aborted));
    await held.unlock();
    await sleep(300);
    controller.abort(new Error('caller gave up'));
    const g = await call;
    await failPointOff(admin.connection);
    results.push(`skip ${skip}: ${g.ok ? 'served' : (g.error as Error).message} after ${g.ms} ms${settledBeforeAbort ? ' (before the abort)' : ''}`);
    if (settledBeforeAbort && g.ok) {
      // Served before the abort (the held command was not on the way to the grant): a valid grant.
      expect(await groupProblems(G, g.value, 'G')).toEqual([]);
      await G.unlockMany(g.value);
    } else expect(g.ok ? 'served after abort' : (g.error as Error).message).toBe('caller gave up');
    // Once the held command answered (1.5 s) the background work releases what it held.
    expect(await waitUntil(async () => (await heldCount(G, 'G')) === 0, 5_000)).toBe(true);
    for (const id of ids) {
      const got = await retryUntil(() => X.tryLock(id, 'X'), 6_000);
      expect(got.value).not.toBeNull();
      await got.value?.unlock();
    }
  }
  console.log(`an abort at each command after the release:\n  ${results.join('\n  ')}`);
});
