/**
 * An explicit abort of a waiting group ends the call at once and never returns a lock, whatever
 * command of the ordered wait is in flight (lock-group.ts abortable / waitInOrder). The scenario
 * of attack-fair2 5624d66 ("an abort while a waiting call's extra read is held by the server"),
 * for this design: the group holds its prefix [a], reserved b and waits for it; when b is
 * released, its ordered step (an `update` of the lock collection) is held 6 s by the server
 * (failCommand blockConnection on the group's appName). The abort comes during that stall.
 *
 * Expected: the call rejects with the signal's reason promptly (not when the stalled command
 * answers), and once the stall is over the group holds nothing (neither its prefix nor what the
 * stalled step took): nobody waits for its ttl.
 */
import { deploymentFacts, describeIf } from '../conformance/support/server';
import { blockCommands, failPointOff } from '../plugin/guard/support';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { usesPrivateServer } from '../support/private-server';
import { workItemModel, type WorkItemModel } from '../support/work-item';

usesPrivateServer();
jest.setTimeout(120_000);

const db = testDatabase('groupabortstep');
const APP_G = `mpl-groupabortstep-${process.pid}`;
const STALL_MS = 6_000;
let connG: MonitoredConnection;
let connO: MonitoredConnection;
let G: WorkItemModel;
let O: WorkItemModel;

describeIf(deploymentFacts().failPoints, 'needs fail points')('an abort during an ordered step', () => {
  beforeAll(async () => {
    connG = await connect(db.name, { appName: APP_G });
    connO = await connect(db.name);
    G = await workItemModel(connG.connection, { ttl: 60_000 }, 'GroupAbortItem');
    O = await workItemModel(connO.connection, { ttl: 60_000 }, 'GroupAbortItem');
  });

  afterAll(async () => {
    await failPointOff(connO.connection);
    await db.drop(connO.connection);
    await connG.close();
    await connO.close();
  });

  test('lockMany([a, b], { wait, signal }) aborted while its step is held by the server: rejects at once with the reason, and holds nothing afterwards', async () => {
    const [a, b] = (await O.insertMany([{ title: 'a' }, { title: 'b' }])).map((d) => d._id);
    const ob = await O.lock(b, 'O');
    const controller = new AbortController();
    const reason = new Error('the user left');
    const waiting = G.lockMany([a, b], 'G', { wait: 60_000, signal: controller.signal }).then(
      (docs) => ({ docs }),
      (error: unknown) => ({ error }),
    );
    const deadline = Date.now() + 20_000;
    while ((await O.lockModel().countDocuments({ _id: b, $expr: { $gt: ['$reservedUntil', '$$NOW'] } })) === 0) {
      if (Date.now() > deadline) throw new Error('not reserved within 20 s');
      await sleep(50);
    }
    expect((await O.lockStatus([a], { owner: 'G' }))[0]?.mine).toBe(true);
    // The group's next updates on its lock collection (its step; a renewal may take one) held STALL_MS.
    const locksNs = `${db.name}.${G.lockModel().collection.collectionName}`;
    await blockCommands(connO.connection, { appName: APP_G, namespace: locksNs, commands: ['update'], blockTimeMS: STALL_MS, times: 3 });
    await ob.unlock();
    await sleep(1_000); // woken, read b free, sent its step: held by the server
    const started = Date.now();
    controller.abort(reason);
    const outcome = await waiting;
    const tookMs = Date.now() - started;
    if ('docs' in outcome) await G.unlockMany(outcome.docs);
    expect('docs' in outcome ? 'resolved with locks' : outcome.error).toBe(reason);
    expect(tookMs).toBeLessThan(STALL_MS / 2);
    await failPointOff(connO.connection);
    // Once the stalled commands answered, the aborted call released what it held and took.
    const freeBy = Date.now() + STALL_MS + 15_000;
    let mine = [true, true];
    while (mine.some(Boolean) && Date.now() < freeBy) {
      mine = (await O.lockStatus([a, b], { owner: 'G' })).map((s) => s?.mine === true);
      if (mine.some(Boolean)) await sleep(100);
    }
    expect(mine).toEqual([false, false]);
    // And b is takeable by someone else (no reservation left behind past its lease).
    const next = await O.lock(b, 'next', { wait: 20_000 });
    await next.unlock();
  });
});
