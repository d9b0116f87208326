/**
 * Issue 17 item 2 ("with `wait`, overlapping callers never deadlock") against user code that holds
 * one lock and waits for another: a saga step, an order-then-invoice flow, a worker holding its
 * account while it claims a job. PRODUCT.md property 15.
 *
 * On main a waiting group never holds anything while it waits, so none of these can deadlock.
 * A design where a waiting group keeps a prefix of its documents (in its canonical order) and
 * reserves the one it waits for can: P holds x and waits for y; the group holds y (its prefix) and
 * waits for x. The fair3 brief promises such a cycle ends within the hold bound (the group gives
 * its prefix back after min(2 s, ttl/2) and backs off). Every scenario runs with the two documents
 * in both id orders, so one of the two orders is the one where the group holds what P wants.
 * Expectation: P gets its second document and the group is served, each well inside its `wait`
 * (15 s bound here, generous for a loaded machine; with a deadlock each waits its whole wait).
 *
 * Black box: the group and P use their own connections (as separate processes would), and nothing
 * here reads a field of the lock record other than the documented ones.
 */
import type { Types } from 'mongoose';
import { LockedError, lockAll } from '../../src';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { commandsSent, timed } from '../support/group-waiting';
import { workItemModel, type WorkItemModel } from '../support/work-item';

jest.setTimeout(180_000);
const db = testDatabase('grp_holdwait');
let pConn: MonitoredConnection;
let gConn: MonitoredConnection;
let qConn: MonitoredConnection;
let P: WorkItemModel;
let G: WorkItemModel;
let Q: WorkItemModel;
let PInvoice: WorkItemModel;
let GInvoice: WorkItemModel;

const BOUND_MS = 15_000;

beforeAll(async () => {
  [pConn, gConn, qConn] = [await connect(db.name), await connect(db.name), await connect(db.name)];
  P = await workItemModel(pConn.connection, { ttl: 60_000, ownerStorage: 'plain' }, 'HoldWaitItem');
  G = await workItemModel(gConn.connection, { ttl: 60_000, ownerStorage: 'plain' }, 'HoldWaitItem');
  Q = await workItemModel(qConn.connection, { ttl: 60_000, ownerStorage: 'plain' }, 'HoldWaitItem');
  PInvoice = await workItemModel(pConn.connection, { ttl: 60_000, ownerStorage: 'plain' }, 'HoldWaitInvoice');
  GInvoice = await workItemModel(gConn.connection, { ttl: 60_000, ownerStorage: 'plain' }, 'HoldWaitInvoice');
});

afterAll(async () => {
  await db.drop(pConn.connection);
  await Promise.all([pConn.close(), gConn.close(), qConn.close()]);
});

/** Two fresh documents, ascending by `_id` (ObjectIds made one after the other). */
async function pair(model: WorkItemModel = P): Promise<[Types.ObjectId, Types.ObjectId]> {
  const docs = await model.insertMany([{ title: 'first' }, { title: 'second' }]);
  const [a, b] = docs.map((d) => d._id).sort((x, y) => x.toHexString().localeCompare(y.toHexString()));
  return [a, b];
}

/** Starts a waiting group and lets it get into its waiting state (its first commands sent, then a pause). */
async function startGroup<T>(run: () => Promise<T>, release: (value: T) => Promise<unknown>): Promise<{ outcome: Promise<string> }> {
  const locks = G.lockModel().collection.collectionName;
  const sent = commandsSent(gConn, locks, 2);
  const outcome = run().then(
    async (value) => {
      await release(value);
      return 'served';
    },
    (error: unknown) => `refused: ${String(error)}`,
  );
  await Promise.race([sent, sleep(5_000)]);
  await sleep(800);
  // Wrapped: an async function returning the promise itself would wait for it.
  return { outcome };
}

describe.each([
  ['P holds the lower id and waits for the higher', false],
  ['P holds the higher id and waits for the lower', true],
] as const)('%s', (_name, swap) => {
  test('P waits for y (lock with wait) while a group waits for [x, y]: both served within the bound', async () => {
    const [lo, hi] = await pair();
    const [x, y] = swap ? [hi, lo] : [lo, hi];
    const first = await P.lock(x, 'P');
    const { outcome: group } = await startGroup(() => G.lockMany([x, y], 'G', { wait: 40_000 }), (docs) => G.unlockMany(docs));
    const second = await timed(P.lock(y, 'P', { wait: 20_000 }));
    await first.unlock();
    if (second.ok) await second.value.unlock();
    const groupOutcome = await group;
    expect({ pGotY: second.ok, groupOutcome }).toEqual({ pGotY: true, groupOutcome: 'served' });
    expect(second.ms).toBeLessThan(BOUND_MS);
  });

  test('P, holding [x, u] from lockMany, waits for [y, v] while a group waits for [y, x]: both served within the bound', async () => {
    const [lo, hi] = await pair();
    const [u, v] = await pair();
    const [x, y] = swap ? [hi, lo] : [lo, hi];
    const first = await P.lockMany([x, u], 'P');
    const { outcome: group } = await startGroup(() => G.lockMany([y, x], 'G', { wait: 40_000 }), (docs) => G.unlockMany(docs));
    const second = await timed(P.lockMany([y, v], 'P', { wait: 20_000 }));
    await P.unlockMany(first);
    if (second.ok) await P.unlockMany(second.value);
    expect({ pGotY: second.ok, groupOutcome: await group }).toEqual({ pGotY: true, groupOutcome: 'served' });
    expect(second.ms).toBeLessThan(BOUND_MS);
  });

  test.each([300, 1_000])('a holder of x retrying lock(y) WITHOUT wait every %i ms (a web flow following Retry-After) gets y within the bound while a group waits for [x, y]', async (everyMs) => {
    const [lo, hi] = await pair();
    const [x, y] = swap ? [hi, lo] : [lo, hi];
    const first = await P.lock(x, 'P');
    const { outcome: group } = await startGroup(() => G.lockMany([x, y], 'G', { wait: 40_000 }), (docs) => G.unlockMany(docs));
    const started = performance.now();
    let second: Awaited<ReturnType<WorkItemModel['lock']>> | undefined;
    let refusals = 0;
    while (!second && performance.now() - started < BOUND_MS) {
      try {
        second = await P.lock(y, 'P');
      } catch (error) {
        if (!(error instanceof LockedError)) throw error;
        refusals++;
        await sleep(everyMs);
      }
    }
    const waited = Math.round(performance.now() - started);
    await first.unlock();
    if (second) await second.unlock();
    const groupOutcome = await group;
    expect({ pGotY: second !== undefined, groupOutcome, refusals: expect.any(Number), waited: expect.any(Number) }).toEqual({ pGotY: true, groupOutcome: 'served', refusals, waited });
  });

  test('a worker holding its account x claims the one job y with lockNext(wait) while a group waits for [x, y]: both served within the bound', async () => {
    const [lo, hi] = await pair();
    const [x, y] = swap ? [hi, lo] : [lo, hi];
    await P.updateOne({ _id: y }, { $set: { title: `job ${y.toHexString()}` } });
    const account = await P.lock(x, 'P');
    const { outcome: group } = await startGroup(() => G.lockMany([x, y], 'G', { wait: 40_000 }), (docs) => G.unlockMany(docs));
    const job = await timed(P.lockNext({ title: `job ${y.toHexString()}` }, 'P', { wait: 20_000 }));
    await account.unlock();
    if (job.ok && job.value) await job.value.unlock();
    expect({ claimed: job.ok ? String(job.value?._id) : String(job.error), groupOutcome: await group }).toEqual({ claimed: String(y), groupOutcome: 'served' });
    expect(job.ms).toBeLessThan(BOUND_MS);
  });

  test('across models (lockAll): P holds one model\'s document and waits for the other\'s while a group waits for both: both served within the bound', async () => {
    const item = (await P.create({ title: 'order' }))._id;
    const invoice = (await PInvoice.create({ title: 'invoice' }))._id;
    // swap: P holds the invoice and waits for the order; else the other way round.
    const first = swap ? await PInvoice.lock(invoice, 'P') : await P.lock(item, 'P');
    const { outcome: group } = await startGroup(
      () => (swap ? lockAll([[G, item], [GInvoice, invoice]], 'G', { wait: 40_000 }) : lockAll([[GInvoice, invoice], [G, item]], 'G', { wait: 40_000 })),
      async () => {
        await G.releaseAllFor('G');
        await GInvoice.releaseAllFor('G');
      },
    );
    const second = await timed(swap ? P.lock(item, 'P', { wait: 20_000 }) : PInvoice.lock(invoice, 'P', { wait: 20_000 }));
    await first.unlock();
    if (second.ok) await second.value.unlock();
    expect({ pGotIt: second.ok, groupOutcome: await group }).toEqual({ pGotIt: true, groupOutcome: 'served' });
    expect(second.ms).toBeLessThan(BOUND_MS);
  });
});

/**
 * attack-fair2's three-way cycle (f0eeffe), every assignment of three ids: P holds a and waits for
 * b, Q holds b and waits for c (one global order: deadlock-free with plain locks), a group waits
 * for [a, c]. Whatever the group keeps or reserves, P and Q must each get their second document.
 */
test.each([0, 1, 2, 3, 4, 5])('three-way: P holds a waits b, Q holds b waits c, a group waits [a, c] (id assignment %i): all served within the bound', async (perm) => {
  const docs = (await P.insertMany([{ title: '1' }, { title: '2' }, { title: '3' }])).map((d) => d._id).sort((x, y) => x.toHexString().localeCompare(y.toHexString()));
  const orders = [
    [0, 1, 2],
    [0, 2, 1],
    [1, 0, 2],
    [1, 2, 0],
    [2, 0, 1],
    [2, 1, 0],
  ][perm]!;
  const [a, b, c] = orders.map((i) => docs[i]!);
  const pa = await P.lock(a, 'P');
  const qb = await Q.lock(b, 'Q');
  const { outcome: group } = await startGroup(() => G.lockMany([a, c], 'G', { wait: 40_000 }), (got) => G.unlockMany(got));
  const pb = timed(P.lock(b, 'P', { wait: 25_000 }).then(async (doc) => {
    await doc.unlock();
    await pa.unlock();
    return 'P done';
  }));
  const qc = timed(Q.lock(c, 'Q', { wait: 25_000 }).then(async (doc) => {
    await doc.unlock();
    await qb.unlock();
    return 'Q done';
  }));
  const [p, q] = await Promise.all([pb, qc]);
  if (!p.ok) await pa.unlock().catch(() => undefined);
  if (!q.ok) await qb.unlock().catch(() => undefined);
  expect({ p: p.ok ? p.value : String(p.error), q: q.ok ? q.value : String(q.error), g: await group }).toEqual({ p: 'P done', q: 'Q done', g: 'served' });
  expect(Math.max(p.ms, q.ms)).toBeLessThan(BOUND_MS);
});
