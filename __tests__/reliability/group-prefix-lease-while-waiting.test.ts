/**
 * Leases of a group that waits (issue 17 item 2; PRODUCT.md properties 1 and 13): a group handed out
 * after a wait carries, for every document, a lock the server grants it under that very token, and
 * no more time than the server grants. A design that keeps the prefix it got while it waits for the
 * rest (fair3 brief, design 2 and 5) must renew that prefix, re-take it, or report what is left of
 * it; it must never report held a prefix whose lease ran out while it waited (and that someone else
 * took meanwhile), nor hand out a grant whose reply arrived after its lease was over.
 *
 * The group G asks for [d0, d1, d2] with a ttl far shorter than its wait while H holds d2; a prober
 * X keeps trying to take d0 and d1 (tryLock, a short section, release) the whole time, so any
 * moment the group's prefix is not held is used by someone else. Then: its own renewals stalled by
 * the server past the ttl (failCommand blockConnection on G's updates); then the replies of G's
 * commands reaching it late (the process stands still after the server ran them, past the ttl).
 * Checked on the server (support/group-waiting.ts groupProblems): owner, token and expiry of every
 * record against what each returned document believes, right after the call resolved.
 */
import type { Types } from 'mongoose';
import { deploymentFacts } from '../conformance/support/server';
import { connect, sleep, testDatabase } from '../support/db';
import { usesPrivateServer } from '../support/private-server';
import { failPointOff, groupCast, threeDocuments, type GroupCast, groupProblems, holders, timed } from '../support/group-waiting';
import { lateReplies, on } from '../support/late-replies';
import { workItemModel } from '../support/work-item';

usesPrivateServer();
jest.setTimeout(300_000);

const db = testDatabase('grp_prefix_lease');
const TTL = 1_000;
const cast = groupCast(db, { appPrefix: 'mpl-grp-prefix', modelName: 'PrefixLeaseItem', gTtl: TTL });
let { admin, gConn, G, H, X, locks } = {} as GroupCast;
beforeAll(() => ({ admin, gConn, G, H, X, locks } = cast));

const withFailPoints = deploymentFacts().failPoints ? test : test.skip;

const three = () => threeDocuments(X);

/** X takes `ids` whenever it can (20 ms sections) until `stop()`; resolves to how many times it got one. */
function prober(ids: Types.ObjectId[], stop: () => boolean): Promise<number> {
  return (async () => {
    let got = 0;
    while (!stop()) {
      for (const id of ids) {
        const doc = await X.tryLock(id, 'X');
        if (!doc) continue;
        got++;
        await sleep(20);
        await doc.unlock();
      }
      await sleep(30);
    }
    return got;
  })();
}

async function scenario(during: (started: number) => Promise<void>, holdMs = 3_500): Promise<{ problems: string[]; probes: number; ms: number; served: boolean; detail: string }> {
  const ids = await three();
  const hold = await H.lock(ids[2]!, 'H');
  let done = false;
  const probes = prober(ids.slice(0, 2), () => done);
  const started = performance.now();
  const call = timed(G.acquireLocks(ids, 'G', { ttl: TTL, wait: 20_000, autoExtend: false }));
  const releasing = sleep(holdMs).then(() => hold.unlock());
  await during(started);
  const outcome = await call;
  done = true;
  let problems: string[] = [];
  let detail = '';
  if (outcome.ok) {
    const handle = outcome.value;
    problems = await groupProblems(G, handle.documents, 'G');
    // The handle's expiresAt is the earliest of the group's: no later than any the server wrote.
    const server = await G.lockModel().collection.find({ _id: { $in: ids } }).toArray();
    const earliest = Math.min(...server.map((r) => (r.expiresAt as Date).getTime()));
    if (handle.expiresAt.getTime() > earliest) problems.push(`handle.expiresAt ${handle.expiresAt.toISOString()} after the earliest the server grants ${new Date(earliest).toISOString()}`);
    detail = JSON.stringify([...(await holders(G, ids))].map(([id, h]) => `${id.slice(-4)}:${h.owner}`));
    await handle.release().catch(() => undefined);
  } else detail = String(outcome.error);
  await releasing;
  await failPointOff(admin.connection);
  return { problems, probes: await probes, ms: outcome.ms, served: outcome.ok, detail };
}

test('a group waiting 3.5 s with a 1 s ttl, its prefix probed all the time: every document it hands out is held by it on the server, under its token, with no more time than granted', async () => {
  const result = await scenario(async () => undefined);
  console.log(`prefix probed: ${JSON.stringify(result)}`);
  expect(result.served).toBe(true);
  expect(result.problems).toEqual([]);
});

withFailPoints('the same with the group\'s own updates held by the server past its ttl while it waits (renewals, releases, reservation traffic)', async () => {
  const result = await scenario(async () => {
    await sleep(700);
    await admin.connection.getClient().db('admin').command({
      configureFailPoint: 'failCommand',
      mode: { times: 3 },
      data: { failCommands: ['update', 'findAndModify'], appName: gConn.app, namespace: `${db.name}.${locks}`, blockConnection: true, blockTimeMS: 1_300 },
    });
  });
  console.log(`prefix with stalled updates: ${JSON.stringify(result)}`);
  expect(result.served).toBe(true);
  expect(result.problems).toEqual([]);
});

test('the same with the replies of the group\'s updates reaching it 1.1 s late (past the ttl) from just before H lets go', async () => {
  const late = lateReplies(gConn.connection);
  try {
    const result = await scenario(async () => {
      await sleep(3_300);
      late.arm(on('update', locks), 1_100, 3);
    });
    console.log(`prefix with late replies (${late.paused} paused): ${JSON.stringify(result)}`);
    expect(result.served).toBe(true);
    expect(result.problems).toEqual([]);
  } finally {
    late.stop();
  }
});

test('many rounds: groups of 3 with a 600 ms ttl waiting on each other and on a prober, every handed-out group is held as believed', async () => {
  const ids = (await X.insertMany(Array.from({ length: 5 }, (_, i) => ({ title: `m${i}` })))).map((d) => d._id);
  const stopAt = Date.now() + 12_000;
  let done = false;
  const probes = prober(ids.slice(0, 2), () => done);
  const problems: string[] = [];
  let served = 0;
  const conns = await Promise.all([0, 1, 2].map(() => connect(db.name)));
  const models = await Promise.all(conns.map((c) => workItemModel(c.connection, { ttl: 600, ownerStorage: 'plain' }, 'PrefixLeaseItem')));
  await Promise.all(
    models.map((model, k) =>
      (async () => {
        while (Date.now() < stopAt) {
          const set = [...ids].sort(() => Math.random() - 0.5).slice(0, 3);
          const got = await timed(model.lockMany(set, `W${k}`, { wait: 8_000 }));
          if (!got.ok) continue;
          served++;
          problems.push(...(await groupProblems(model, got.value, `W${k}`)));
          await sleep(Math.random() * 300);
          await model.unlockMany(got.value).catch(() => undefined);
        }
      })(),
    ),
  );
  done = true;
  const got = await probes;
  await Promise.all(conns.map((c) => c.close()));
  console.log(`many rounds: ${served} groups served, prober got ${got}`);
  expect(served).toBeGreaterThan(5);
  expect(problems.slice(0, 5)).toEqual([]);
});
