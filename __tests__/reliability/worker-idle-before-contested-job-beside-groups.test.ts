/**
 * The lockNext starvation fix (nextgap, single-waiter-beside-waiting-groups) with fix5's backoff of
 * the held-match search (88aa4b5: after 250 ms, then only on a sign of contention at most once a
 * second, else after 2 s, 4 s, then every 8 s). Here the worker started when the queue was EMPTY:
 * by the time its job appears it has backed off. Three loops of waiting `lockMany([d, own])` keep
 * d busy (100 ms sections); after IDLE_MS the job d comes to match the worker's filter (a raw
 * update of its title, outside the guard). Measured: time from then until the worker is served.
 * The groups run on connections of this process (their releases wake the worker: local-wake.ts)
 * and, on a standalone server, ALSO as "another process": their connections name the server by
 * another host name (localhost for 127.0.0.1), so that deployment-key.ts counts them as another
 * deployment and no release of theirs reaches the worker locally (no change streams on a
 * standalone: only collisions signal contention).
 * Asserted: served within 5 s of the job appearing (single-waiter-beside-waiting-groups' bound for
 * the lockNext worker).
 * Measured, standalone: a3d81e6 (before fix5, a search each second) this process 2.9 s, another
 * process 2.1 s; 0461a24 (fix5) this process 0.8-1.5 s, another process 9.1, 9.2, 9.8, 10.3 s and once 2.9 s (FAILS: the search had
 * backed off to 8 s on the empty queue; ~150 group sections meanwhile gave the worker no sign: its
 * reads never found d free, so it never collided, and no release of another process reaches it).
 * The second case runs on a standalone server only (on a replica set the addresses come from the
 * set's configuration, one deployment; the change stream signals contention there).
 */
import type { Types } from 'mongoose';
import { LockedError } from '../../src';
import { testUri } from '../../test-backend/test-env';
import { connect, connectTo, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { timed } from '../support/group-waiting';
import { workItemModel, type WorkItemModel } from '../support/work-item';

jest.setTimeout(180_000);
const db = testDatabase('idle_worker_groups');
const IDLE_MS = 7_000;
const conns: MonitoredConnection[] = [];

afterAll(async () => {
  await db.drop(conns[0]!.connection);
  await Promise.all(conns.map((c) => c.close()));
});

async function models(name: string, otherHost: boolean): Promise<WorkItemModel[]> {
  const out: WorkItemModel[] = [];
  for (let i = 0; i < 4; i++) {
    const uri = i > 0 && otherHost ? testUri().replace('127.0.0.1', 'localhost') : testUri();
    const c = i === 0 ? await connect(db.name) : await connectTo(uri, db.name);
    conns.push(c);
    out.push(await workItemModel(c.connection, { ttl: 30_000, ownerStorage: 'plain' }, name));
  }
  return out;
}

function groupLoops(ms: WorkItemModel[], d: Types.ObjectId, own: Types.ObjectId[], stop: () => boolean): Promise<number[]> {
  return Promise.all(
    own.map((mine, k) =>
      (async () => {
        let sections = 0;
        while (!stop()) {
          const got = await ms[k + 1]!.lockMany([d, mine], `group-${k}`, { wait: 10_000 }).catch((error: unknown) => {
            if (error instanceof LockedError) return null;
            throw error;
          });
          if (!got) continue;
          sections++;
          await sleep(100);
          await ms[k + 1]!.unlockMany(got);
        }
        return sections;
      })(),
    ),
  );
}

async function scene(ms: WorkItemModel[]): Promise<string> {
  const [d, ...own] = (await ms[0]!.insertMany([{ title: 'not yet' }, { title: 'g0' }, { title: 'g1' }, { title: 'g2' }])).map((x) => x._id);
  let done = false;
  const loops = groupLoops(ms, d!, own, () => done);
  const next = timed(ms[0]!.lockNext({ title: 'late job' }, 'worker', { wait: 60_000 }));
  await sleep(IDLE_MS);
  const appeared = performance.now();
  // The driver's own collection (Mongoose's, guarded, refuses a write to a document others lock).
  await conns[0]!.connection.getClient().db(db.name).collection(ms[0]!.collection.collectionName).updateOne({ _id: d }, { $set: { title: 'late job' } });
  const got = await next.finally(() => (done = true));
  const afterMs = Math.round(performance.now() - appeared);
  if (got.ok && got.value) await got.value.unlock();
  const sections = await loops;
  expect(got.ok ? String(got.value?._id) : String(got.error)).toBe(String(d));
  return `served ${afterMs} ms after the job appeared (sections ${sections.join(' / ')})`;
}

test('a worker idle since an empty queue is served soon after its job appears among waiting groups (this process)', async () => {
  const result = await scene(await models('IdleWorkerItemA', false));
  console.log(`idle worker beside groups, groups in this process: ${result}`);
  expect(Number(/served (\d+) ms/.exec(result)![1])).toBeLessThan(5_000);
});

test('the same with the groups as another process (standalone: another host name)', async () => {
  if (!testUri().includes('127.0.0.1') || testUri().includes('replicaSet=')) {
    console.log('skipped: needs a standalone server named 127.0.0.1 (another host name is another deployment only there)');
    return;
  }
  const result = await scene(await models('IdleWorkerItemB', true));
  console.log(`idle worker beside groups, groups as another process: ${result}`);
  expect(Number(/served (\d+) ms/.exec(result)![1])).toBeLessThan(5_000);
});
