/**
 * The renewal to the full ttl answered late (attack-fair4 brief: "the renewal to full ttl stalled /
 * failed / answered late"). A group that completes after ordered waiting may have kept its prefix
 * under a lease shorter than the ttl and renew it when it gets the whole group. Here every `update`
 * reply of the group's process after the holder lets go (the completing step's take, its renewal,
 * its releases) reaches it late, after the server ran the command: the process stands still for
 * 1, 2.5 or 4 s each time (support/late-replies.ts), longer than a prefix lease near the give-up
 * time, shorter than the ttl (6 s). A prober in ANOTHER process (workers/try-lock-prober.ts) takes
 * any of the group's documents the moment it is free. Whatever the group then does, it must never
 * hand out a lock it does not hold, nor count on more than the server granted: checked on the
 * server when the call resolves (groupProblems), and on the whole history of the lock records (the
 * change stream, support/grant-history.ts judgeRun: no two owners at once). Replica set only.
 */
import type { Types } from 'mongoose';
import { testUri } from '../conformance/support/server';
import { recordChangesOf } from '../support/change-record';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { judgeRun } from '../support/grant-history';
import { groupProblems, heldCount, timed } from '../support/group-waiting';
import { lateReplies, on, type LateReplies } from '../support/late-replies';
import { replicaSetOnly } from '../support/topology';
import { workItemModel, type WorkItemModel } from '../support/work-item';
import { killAll, spawnWorker } from './support/children';
import type { TryLockProberConfig } from './workers/try-lock-prober';

jest.setTimeout(300_000);
const db = testDatabase('grp_renewal_late');
const MODEL = 'RenewalLateItem';
let gConn: MonitoredConnection;
let hConn: MonitoredConnection;
let G: WorkItemModel;
let H: WorkItemModel;
let late: LateReplies;

beforeAll(async () => {
  [gConn, hConn] = [await connect(db.name), await connect(db.name)];
  G = await workItemModel(gConn.connection, { ttl: 6_000, ownerStorage: 'plain' }, MODEL);
  H = await workItemModel(hConn.connection, { ttl: 60_000, ownerStorage: 'plain' }, MODEL);
  late = lateReplies(gConn.connection);
});

afterAll(async () => {
  late.stop();
  await killAll();
  await db.drop(hConn.connection);
  await Promise.all([gConn.close(), hConn.close()]);
});

replicaSetOnly('the change-stream record needs a replica set')('late update replies after the release, a prober in another process: the group never hands out a lock it does not hold', async () => {
  const locks = G.lockModel().collection.collectionName;
  const record = await recordChangesOf(testUri(), db.name, { pipeline: [{ $match: { 'ns.coll': locks } }] });
  const results: string[] = [];
  const problems: string[] = [];
  for (const lateMs of [1_000, 2_500, 4_000]) {
    const ids = (await H.insertMany([{ title: 'd0' }, { title: 'd1' }, { title: 'd2' }])).map((d) => d._id as Types.ObjectId).sort((x, y) => x.toHexString().localeCompare(y.toHexString()));
    const held = await H.lock(ids[2]!, 'H');
    const call = timed(G.lockMany(ids, 'G', { wait: 20_000 }));
    // Ordered by now: G keeps [d0, d1] and waits for d2.
    await sleep(1_000);
    const config: TryLockProberConfig = { uri: process.env.MONGODB_URI!, dbName: db.name, modelName: MODEL, ids: ids.slice(0, 2).map((id) => id.toHexString()), durationMs: 12_000, owner: 'X' };
    const prober = spawnWorker('try-lock-prober.ts', { MPL_TRY_LOCK_PROBER: JSON.stringify(config) }, 60_000);
    expect(await prober.nextLine(30_000)).toBe('started');
    late.arm(on('update', locks), lateMs, 4);
    await held.unlock();
    const g = await call;
    if (g.ok) {
      const found = await groupProblems(G, g.value, 'G');
      problems.push(...found.map((p) => `late ${lateMs}: ${p}`));
      await G.unlockMany(g.value).catch(() => undefined);
    }
    const probed = await prober.nextLine(60_000);
    await prober.exited;
    results.push(`late ${lateMs} ms: G ${g.ok ? 'served' : (g.error as Error).name} after ${g.ms} ms; prober got ${probed}; replies paused ${late.paused}`);
    await sleep(200);
    expect(await heldCount(G, 'G')).toBe(0);
  }
  await record.stop();
  const { grantCount, overlaps } = judgeRun(record.events, []);
  console.log(`group renewal answered late:\n  ${results.join('\n  ')}\n  ${grantCount} grants, overlaps ${overlaps.length}`);
  expect(problems).toEqual([]);
  expect(overlaps).toEqual([]);
});
