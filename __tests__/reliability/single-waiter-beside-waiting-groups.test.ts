/**
 * The other side of fairness for groups (issue 17 item 2: "overlapping callers never ... starve each
 * other indefinitely"): callers that wait for ONE document must not be starved by groups that wait.
 * In the fair3 design a single-document `lock(..., { wait })` never reserves, while every waiting
 * group reserves the document it waits for and is served before anyone else once it is free. A
 * steady stream of groups that each wait for the same document would then hand it from group to
 * group: a single waiter (or a `lockNext` worker whose only job is that document) never gets it,
 * although on main it competes with them on equal terms.
 *
 * Three loops of `lockMany([d, own document], { wait })` with 100 ms sections keep d busy; once they
 * have run for 2 s (past the groups' first 250 ms of release-and-retry, in a design that goes
 * ordered after it), a single waiter asks for d with a 25 s wait, and a `lockNext` worker whose
 * filter matches only d likewise. Each must be served within its wait (time printed).
 *
 * Runs on the merge of fair3: the lockNext worker is never served (both topologies; also on main
 * before fair3, where one group loop took every turn). The single waiter is served on a replica set
 * (229, 248 ms: woken by the change stream, it wins a race after a reservation's clear) but NOT on a
 * standalone server (refused after its whole 25 s wait, twice; group sections 47 / 81 / 55 and
 * 65 / 40 / 64): polling, it always finds d held or reserved by the next group. Main before fair3,
 * standalone: served after 128 ms.
 *
 * After the fixes (lockNext ignores reservations; LockWatch wakes every waiting group): the lockNext
 * worker is served on both topologies. The single waiter still is not on a standalone server
 * (refused after 25 s in a third run, 2026-11-26): a known gap, written in docs/limits.md ("Waiting
 * for a group"), so that case runs on a replica set only until single waiters take part in
 * reservations.
 *
 * Later (2026-11-26, replica set): the lockNext worker was again not served within 25 s (2 of 4
 * runs; the lead saw 3 of 3 on main, and 1 of 3 on a483dfc, where it had passed CI by luck: served
 * after 17-21 s otherwise): after each release the reserving group heard of it first and its find
 * + step reached the server before the worker's read + claim, so the worker found d held every
 * time (182 of 183 attempts in a traced run). A fix that claimed the contested document at once on
 * its lock record's change (branch nextfix) was served in 0.44-1.24 s, but an independent review
 * (branch review-nextfix) showed it locks a job that stopped matching before its release (the
 * document's and the lock record's events come on two streams, in no common order) and can answer
 * null while a matching free document exists: reverted. That case then ran on a standalone server
 * only, where the worker polls and is served (8 ms-4.0 s).
 *
 * Branch nextgap: a waiting lockNext call that found no free match for 250 ms reserves the first
 * held match (next-reservation.ts), oldest waiter first like the groups, and takes it by its
 * ordinary path once freed. The lockNext case runs on both topologies again, bounded at 5 s (main
 * at ce6d9b6, replica set, 7 runs: not served in 25 s once, otherwise after 1.4 to 7.3 s, 3 of 7
 * over the bound; after: 16 ms to 1.31 s in 17 runs on both topologies and Mongoose 8).
 */
import type { Types } from 'mongoose';
import { LockedError } from '../../src';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { timed } from '../support/group-waiting';
import { workItemModel, type WorkItemModel } from '../support/work-item';

jest.setTimeout(180_000);
const db = testDatabase('single_beside_groups');
const conns: MonitoredConnection[] = [];
const models: WorkItemModel[] = [];

beforeAll(async () => {
  for (let i = 0; i < 5; i++) {
    const c = await connect(db.name);
    conns.push(c);
    models.push(await workItemModel(c.connection, { ttl: 30_000, ownerStorage: 'plain' }, 'SingleBesideItem'));
  }
});

afterAll(async () => {
  await db.drop(conns[0]!.connection);
  await Promise.all(conns.map((c) => c.close()));
});

function groupLoops(d: Types.ObjectId, own: Types.ObjectId[], stop: () => boolean): Promise<number[]> {
  return Promise.all(
    own.map((mine, k) =>
      (async () => {
        let sections = 0;
        while (!stop()) {
          const got = await models[k + 1]!.lockMany([d, mine], `group-${k}`, { wait: 10_000 }).catch((error: unknown) => {
            if (error instanceof LockedError) return null;
            throw error;
          });
          if (!got) continue;
          sections++;
          await sleep(100);
          await models[k + 1]!.unlockMany(got);
        }
        return sections;
      })(),
    ),
  );
}

test('a single-document waiter for d is served while three waiting groups keep taking d', async () => {
  const [d, ...own] = (await models[0]!.insertMany([{ title: 'd' }, { title: 'g0' }, { title: 'g1' }, { title: 'g2' }])).map((x) => x._id);
  let done = false;
  const loops = groupLoops(d!, own, () => done);
  await sleep(2_000);
  const single = await timed(models[0]!.lock(d!, 'single', { wait: 25_000 }));
  done = true;
  if (single.ok) await single.value.unlock();
  const sections = await loops;
  console.log(`single waiter beside groups: ${single.ok ? 'served' : 'refused'} after ${single.ms} ms; group sections ${sections.join(' / ')}`);
  expect(single.ok ? 'served' : String(single.error)).toBe('served');
  // Served as the oldest waiter (it reserves d after 250 ms refused, and every later group call is
  // younger): within a few group sections, not by luck late in its wait (before single waiters
  // reserved, standalone: refused after 25 s three times, once served after 16.8 s).
  expect(single.ms).toBeLessThan(10_000);
});

test('a lockNext worker whose only job is d is served while three waiting groups keep taking d', async () => {
  const [d, ...own] = (await models[0]!.insertMany([{ title: 'only job' }, { title: 'g0' }, { title: 'g1' }, { title: 'g2' }])).map((x) => x._id);
  let done = false;
  const loops = groupLoops(d!, own, () => done);
  await sleep(2_000);
  const next = await timed(models[0]!.lockNext({ _id: d }, 'worker', { wait: 25_000 }));
  done = true;
  if (next.ok && next.value) await next.value.unlock();
  const sections = await loops;
  console.log(`lockNext beside groups: ${next.ok && next.value ? 'served' : 'not served'} after ${next.ms} ms; group sections ${sections.join(' / ')}`);
  expect(next.ok ? String(next.value?._id) : String(next.error)).toBe(String(d));
  // Served as the oldest waiter (it reserves d once it found none free for 250 ms, and every later
  // group call is younger): within a few group sections and one renewal (about 2 s at worst
  // unloaded), not by luck. Branch nextgap, 17 runs on both topologies and Mongoose 8: 16 ms to
  // 1.31 s. Main without the reservation, replica set, 7 runs: 1.4, 1.9, 2.0, 4.0, 5.8, 7.3 s and
  // not served in 25 s.
  expect(next.ms).toBeLessThan(5_000);
});
