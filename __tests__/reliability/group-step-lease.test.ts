/**
 * The lease of a waiting group's ordered steps (issue 17 gap b; lock-group.ts stepLease,
 * renewedToTtl): a step takes (and renews the prefix with) a lease that ends near the group's
 * give-up, not the full ttl, so that a caller told to retry after the refusal's `retryAfterMs`
 * arrives in the group's pause (reliability/group-hold-vs-retry-after). What must stay true:
 *
 *  - a group that an ordered step completes is handed out with the FULL ttl: the server's record
 *    expires about `ttl` after the hand-out (PRODUCT.md: a lock lasts its ttl), the record keeps the
 *    acquisition's ttl (what a resume without its own ttl adds), and the caller's `msLeft()` is no
 *    more than the server grants;
 *  - a step lease that lapses before the group renews it to the ttl (the renewal held by the
 *    server: failCommand blockConnection), or a prefix that lapses because the group's give-up runs
 *    late (its read before the give-up held by the server), is taken by someone else, and the group
 *    never hands out a lock it does not hold (PRODUCT.md properties 1 and 13), but keeps waiting and
 *    is served once the document is free again.
 *
 * The independent record: the change stream of the database (owners in clear), replayed per lock
 * record into the server's grants (support/grant-history.ts): no two owners' grants overlap, every
 * belief sampled (the group's when handed out, the prober's while it held) is within what the
 * server granted, and the prober's grant came straight after the group's without a release (it took
 * a lapsed lock: the path under test was really taken).
 */
import type { Types, mongo } from 'mongoose';
import { lockAll, unlockAll } from '../../src';
import { blockCommands, failPointOff } from '../plugin/guard/support';
import { recordChanges } from '../support/change-record';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { usesPrivateServer } from '../support/private-server';
import { judgeRun, type Belief } from '../support/grant-history';
import { appConnections, groupProblems, holders, timed } from '../support/group-waiting';
import { replicaSetOnly } from '../support/topology';
import { workItemModel, type WorkItemModel } from '../support/work-item';

usesPrivateServer();
jest.setTimeout(120_000);

const db = testDatabase('grp_step_lease');
const TTL = 20_000;
let admin: MonitoredConnection;
let gConn: MonitoredConnection & { app: string };
let hConn: MonitoredConnection;
/** The group's models: A's lock collection sorts before B's, so A's document is the group's prefix. */
let GA: WorkItemModel;
let GB: WorkItemModel;
let HB: WorkItemModel;
let XA: WorkItemModel;

beforeAll(async () => {
  admin = await connect(db.name);
  [gConn] = await appConnections(db.name, 'mpl-step-lease', 1);
  hConn = await connect(db.name);
  const options = { ttl: TTL, ownerStorage: 'plain' as const };
  [GA, GB] = [await workItemModel(gConn.connection, options, 'StepLeaseA'), await workItemModel(gConn.connection, options, 'StepLeaseB')];
  HB = await workItemModel(hConn.connection, options, 'StepLeaseB');
  XA = await workItemModel(admin.connection, options, 'StepLeaseA');
  expect(GA.lockModel().collection.collectionName < GB.lockModel().collection.collectionName).toBe(true);
});

afterAll(async () => {
  await failPointOff(admin.connection).catch(() => undefined);
  await db.drop(admin.connection);
  await Promise.all([admin.close(), gConn.close(), hConn.close()]);
});

interface Scenario {
  a: Types.ObjectId;
  b: Types.ObjectId;
}

async function documents(): Promise<Scenario> {
  const [{ _id: a }] = await XA.insertMany([{ title: 'a' }]);
  const [{ _id: b }] = await HB.insertMany([{ title: 'b' }]);
  return { a: a as Types.ObjectId, b: b as Types.ObjectId };
}

/** Until G holds `a` on the server (its canonical prefix, taken by an ordered step). */
async function untilGroupHoldsPrefix(a: Types.ObjectId): Promise<void> {
  const deadline = Date.now() + 15_000;
  while ((await holders(XA, [a])).get(String(a))?.owner !== 'G') {
    if (Date.now() > deadline) throw new Error('G never held a');
    await sleep(20);
  }
}

/** The server's now and the lock record of `id`. */
async function recordOf(model: WorkItemModel, id: unknown): Promise<{ expiresAt: Date; acquiredAt: Date; ttl: unknown; owner: unknown; now: Date }> {
  const [record] = await model
    .lockModel()
    .collection.find({ _id: id as never }, { projection: { expiresAt: 1, acquiredAt: 1, ttl: 1, owner: 1, now: '$$NOW' } })
    .toArray();
  return record as never;
}

test('a group an ordered step completes is handed out with the full ttl, not the step\'s lease', async () => {
  const { a, b } = await documents();
  const hold = await HB.lock(b, 'H', { ttl: 60_000 });
  const group = timed(lockAll([[GA, a], [GB, b]], 'G', { wait: 30_000 }));
  await untilGroupHoldsPrefix(a);
  // Early in the hold: the step that completes the group takes a lease of about the rest of the
  // first hold bound (2 s) plus a quarter second, far under the 20 s ttl.
  await hold.unlock();
  const got = await group;
  if (!got.ok) throw got.error;
  const handedOut = Date.now();
  const records = await Promise.all([recordOf(GA, a), recordOf(GB, b)]);
  const left = got.value.map((doc) => doc.heldLock()!.msLeft());
  const problems = await groupProblems(GA, [got.value[0]!], 'G');
  problems.push(...(await groupProblems(GB, [got.value[1]!], 'G')));
  await unlockAll(got.value);
  const remaining = records.map((r) => r.expiresAt.getTime() - r.now.getTime());
  console.log(`served after ${got.ms} ms; the server grants ${remaining.join(', ')} ms more, the caller counts on ${left.map(Math.round).join(', ')} ms (ttl ${TTL})`);
  expect(problems).toEqual([]);
  for (const record of records) {
    expect(record.owner).toBe('G');
    // The record keeps the acquisition's ttl: what a resume without its own ttl adds.
    expect(record.ttl).toBe(TTL);
    // About the ttl after the hand-out (generous: a loaded machine), and never less than the ttl
    // after the grant (the renewal was sent after it).
    expect(record.expiresAt.getTime() - record.now.getTime()).toBeGreaterThan(TTL - 5_000);
    expect(record.expiresAt.getTime() - record.acquiredAt.getTime()).toBeGreaterThanOrEqual(TTL);
  }
  for (const ms of left) expect(ms).toBeGreaterThan(TTL - 5_000);
  expect(Date.now() - handedOut).toBeLessThan(TTL - 5_000);
});

/** The database's change events from the call on, until `stop()` (replica set). */
const changeEvents = () => recordChanges(admin.connection.getClient().db(db.name));

/** X takes `a` whenever it can (30 ms sections) until `stop()`; its beliefs sampled while it holds. */
function prober(a: Types.ObjectId, stop: () => boolean, beliefs: Belief[]): Promise<number> {
  return (async () => {
    let got = 0;
    while (!stop()) {
      const doc = await XA.tryLock(a, 'X', { ttl: 2_000 });
      if (doc) {
        got++;
        const held = doc.heldLock()!;
        beliefs.push({ owner: 'X', token: held.token, t: Date.now(), m: held.msLeft() });
        await sleep(30);
        beliefs.push({ owner: 'X', token: held.token, t: Date.now(), m: held.msLeft() });
        await doc.unlock().catch(() => undefined);
      }
      await sleep(20);
    }
    return got;
  })();
}

const keyOf = (event: mongo.ChangeStreamDocument): string => `${String((event as { ns?: { coll?: string } }).ns?.coll)}/${String((event as { documentKey?: { _id: unknown } }).documentKey?._id)}`;

/**
 * Whether, in one lock record's change events, an acquisition of `next` replaced one of `lapsed`
 * with no release between (a release writes `token: null`): a takeover of an expired lock.
 */
function tookOverLapsed(events: readonly mongo.ChangeStreamDocument[], lapsed: string, next: string): boolean {
  let owner: string | null = null;
  let holder: string | null = null;
  for (const event of events) {
    if (event.operationType !== 'update' && event.operationType !== 'insert' && event.operationType !== 'replace') continue;
    const fields = (event.operationType === 'update' ? event.updateDescription.updatedFields : event.fullDocument) as Record<string, unknown>;
    // A diff names only the fields that changed: an owner that takes its own lock again keeps it.
    if ('owner' in fields) owner = (fields.owner as string | null) ?? null;
    if (!('token' in fields)) continue;
    const now = fields.token === null ? null : owner;
    if (holder === lapsed && now === next) return true;
    holder = now;
  }
  return false;
}

async function lapseScenario(stall: (hold: { unlock(): Promise<void> }) => Promise<void>): Promise<void> {
  const { a, b } = await documents();
  const stream = await changeEvents();
  const hold = await HB.lock(b, 'H', { ttl: 60_000 });
  const group = timed(lockAll([[GA, a], [GB, b]], 'G', { wait: 60_000 }));
  await untilGroupHoldsPrefix(a);
  const beliefs: Array<Belief & { doc: string }> = [];
  const xBeliefs: Belief[] = [];
  let done = false;
  const probes = prober(a, () => done, xBeliefs);
  await stall(hold);
  // Wait for the prober to get the lapsed lock (bounded generously), then let the group go on.
  const deadline = Date.now() + 20_000;
  while (xBeliefs.length === 0 && Date.now() < deadline) await sleep(50);
  await failPointOff(admin.connection);
  await hold.unlock().catch(() => undefined); // (already released when the stall needed b free)
  const got = await group;
  done = true;
  const xGot = await probes;
  let problems: string[] = [];
  if (got.ok) {
    for (const doc of got.value) {
      const held = doc.heldLock();
      if (held) beliefs.push({ owner: 'G', token: held.token, t: Date.now(), m: held.msLeft(), doc: String(doc._id) });
    }
    problems = [...(await groupProblems(GA, [got.value[0]!], 'G')), ...(await groupProblems(GB, [got.value[1]!], 'G'))];
    await unlockAll(got.value).catch(() => undefined);
  }
  await stream.stop(300);
  // The lock records, keyed by lock collection and `_id` (the beliefs likewise).
  const locksA = GA.lockModel().collection.collectionName;
  const locksB = GB.lockModel().collection.collectionName;
  const lockEvents = stream.events.filter((e) => [`${locksA}/${String(a)}`, `${locksB}/${String(b)}`].includes(keyOf(e)));
  const keyed = [...beliefs.map((g) => ({ ...g, doc: g.doc === String(a) ? `${locksA}/${g.doc}` : `${locksB}/${g.doc}` })), ...xBeliefs.map((x) => ({ ...x, doc: `${locksA}/${String(a)}` }))];
  const judged = judgeRun(lockEvents, keyed, keyOf);
  const lapsedTakeover = tookOverLapsed(
    lockEvents.filter((e) => keyOf(e) === `${locksA}/${String(a)}`),
    'G',
    'X',
  );
  console.log(
    `G ${got.ok ? 'served' : String(got.error)} after ${got.ms} ms; X got a ${xGot} times (took over G's lapsed lock: ${lapsedTakeover}); ${judged.grantCount} grants, ${keyed.length} beliefs; overlaps ${JSON.stringify(judged.overlaps)}; violations ${JSON.stringify(judged.violations.slice(0, 3))}`,
  );
  expect(lapsedTakeover).toBe(true);
  expect(got.ok).toBe(true);
  expect(problems).toEqual([]);
  expect(judged.overlaps).toEqual([]);
  expect(judged.violations).toEqual([]);
}

replicaSetOnly('fail points on the group\'s commands and a change stream as the independent record need a replica set')(
  'a step lease that lapses before the renewal to the ttl reaches the server: the group hands out nothing it does not hold, and is served later',
  async () => {
    await lapseScenario(async (hold) => {
      // The group's next `update` on A's lock collection is the step's take (let through: skip 1);
      // every later one, first the renewal to the ttl, is held 3.5 s by the server: past the step's
      // lease (at most the first hold bound, 2 s, plus a quarter second).
      await admin.connection.getClient().db('admin').command({
        configureFailPoint: 'failCommand',
        mode: { skip: 1 },
        data: { failCommands: ['update'], appName: gConn.app, namespace: `${db.name}.${GA.lockModel().collection.collectionName}`, blockConnection: true, blockTimeMS: 3_500 },
      });
      // b free: the group's next step gets the whole group.
      await hold.unlock();
    });
  },
);

replicaSetOnly('fail points on the group\'s commands and a change stream as the independent record need a replica set')(
  'a prefix that lapses because the group\'s give-up runs late: the group hands out nothing it does not hold, and is served later',
  async () => {
    await lapseScenario(async () => {
      // The group's next `find` on B's lock collection is its read of b before the give-up (at the
      // end of the 2 s hold bound): held 3.5 s, past the prefix's lease (bound plus a quarter second).
      await blockCommands(admin.connection, { appName: gConn.app, namespace: `${db.name}.${GB.lockModel().collection.collectionName}`, commands: ['find'], blockTimeMS: 3_500 });
    });
  },
);
