/**
 * Oldest first (issue 17 item 2, "overlapping callers never ... starve each other indefinitely";
 * attack-fair4 brief): among callers that WAIT for one document, the one that has waited longest
 * (by the time of its first refusal) is served first once the document is free, whatever its kind
 * (a single-document `lock(..., { wait })` or a waiting `lockMany`), and a stream of younger
 * waiters that keep taking the document cannot starve an older one.
 *
 * Every caller has its own connection (as separate processes would: one change stream each, no
 * shared in-process queue). The holder H keeps the document while the waiters line up, one second
 * apart (far more than any clock or round-trip difference), then lets go. Who got the document
 * first is read from the order the calls resolved: the first served holds it for 300 ms before
 * releasing, so nobody else can be served in between.
 *
 * On main (a483dfc) a single waiter never reserves: among single waiters the release is a race,
 * and waiting groups (which reserve) overtake an older single waiter.
 *
 * On main 68d06ab (fair4retry + fair4oldest merged), replica set: the first two cases FAIL ("older,
 * younger, younger"; "group-0, single, group-1, group-2"); standalone passes. A single waiter
 * reserves only when a refusal comes 250 ms or more after its first (SingleWaiterReservation.refused
 * is called on refusals only); with a change stream a waiter refused once sleeps until the record
 * changes, its expiry or its 5 s safety poll, so behind a holder that keeps its lock it never
 * reserves, and the younger waiter (or a younger group, which reserves from its ordered loop) is
 * served first at the release.
 */
import type { Types } from 'mongoose';
import { LockedError } from '../../src';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { retryUntil, timed } from '../support/group-waiting';
import { workItemModel, type WorkItemModel } from '../support/work-item';

jest.setTimeout(240_000);
const db = testDatabase('oldest_across_kinds');
const conns: MonitoredConnection[] = [];
const models: WorkItemModel[] = [];
const SPACING_MS = 1_000;

beforeAll(async () => {
  for (let i = 0; i < 7; i++) {
    const c = await connect(db.name);
    conns.push(c);
    models.push(await workItemModel(c.connection, { ttl: 30_000, ownerStorage: 'plain' }, 'OldestKindsItem'));
  }
});

afterAll(async () => {
  await db.drop(conns[0]!.connection);
  await Promise.all(conns.map((c) => c.close()));
});

async function newDocs(n: number): Promise<Types.ObjectId[]> {
  return (await models[0]!.insertMany(Array.from({ length: n }, (_, i) => ({ title: `o${i}` })))).map((d) => d._id);
}

/** Runs `call`, and when it is served records its name in `order`, holds 300 ms and releases. */
async function served(name: string, order: string[], call: () => Promise<{ release(): Promise<unknown> }>): Promise<void> {
  const got = await call();
  order.push(name);
  await sleep(300);
  await got.release();
}

test('two single waiters, one second apart: the older is served first, in each of three rounds', async () => {
  const firsts: string[] = [];
  for (let round = 0; round < 3; round++) {
    const [d] = await newDocs(1);
    const held = await models[0]!.lock(d!, 'H');
    const order: string[] = [];
    const older = served('older', order, async () => {
      const doc = await models[1]!.lock(d!, 'older', { wait: 30_000 });
      return { release: () => doc.unlock() };
    });
    await sleep(SPACING_MS);
    const younger = served('younger', order, async () => {
      const doc = await models[2]!.lock(d!, 'younger', { wait: 30_000 });
      return { release: () => doc.unlock() };
    });
    await sleep(SPACING_MS * 1.5);
    await held.unlock();
    await Promise.all([older, younger]);
    firsts.push(order[0]!);
  }
  console.log(`older vs younger single waiter, first served per round: ${firsts.join(', ')}`);
  expect(firsts).toEqual(['older', 'older', 'older']);
});

test('an older single waiter is served before younger waiting groups that need the same document', async () => {
  const [d, ...own] = await newDocs(4);
  const held = await models[0]!.lock(d!, 'H');
  const order: string[] = [];
  const single = served('single', order, async () => {
    const doc = await models[1]!.lock(d!, 'single', { wait: 30_000 });
    return { release: () => doc.unlock() };
  });
  await sleep(SPACING_MS);
  const groups = own.map((mine, k) =>
    served(`group-${k}`, order, async () => {
      const docs = await models[k + 2]!.lockMany([d!, mine], `group-${k}`, { wait: 30_000 });
      return { release: () => models[k + 2]!.unlockMany(docs) };
    }),
  );
  // Past the groups' 250 ms of release-and-retry: they wait in order and reserve what they lack.
  await sleep(SPACING_MS * 1.5);
  await held.unlock();
  await Promise.all([single, ...groups]);
  console.log(`older single waiter vs three younger groups, served in order: ${order.join(', ')}`);
  expect(order[0]).toBe('single');
});

test('an older waiting group is served before a younger single waiter', async () => {
  const [d, e] = await newDocs(2);
  const held = await models[0]!.lock(d!, 'H');
  const order: string[] = [];
  const group = served('group', order, async () => {
    const docs = await models[1]!.lockMany([d!, e!], 'group', { wait: 30_000 });
    return { release: () => models[1]!.unlockMany(docs) };
  });
  await sleep(SPACING_MS);
  const single = served('single', order, async () => {
    const doc = await models[2]!.lock(d!, 'single', { wait: 30_000 });
    return { release: () => doc.unlock() };
  });
  await sleep(SPACING_MS * 1.5);
  await held.unlock();
  await Promise.all([group, single]);
  console.log(`older group vs younger single waiter, served in order: ${order.join(', ')}`);
  expect(order[0]).toBe('group');
});

test('an older single waiter beside three loops of younger single waiters that release and ask again at once is served within 12 s', async () => {
  const [d] = await newDocs(1);
  let stop = false;
  const turns = [0, 0, 0];
  // The loops take turns on d: each call waits, holds 150 ms, releases and asks again at once.
  const loops = [0, 1, 2].map((k) =>
    (async () => {
      while (!stop) {
        const doc = await models[k + 2]!.lock(d!, `loop-${k}`, { wait: 10_000 }).catch((error: unknown) => {
          if (error instanceof LockedError) return null;
          throw error;
        });
        if (!doc) continue;
        turns[k]!++;
        await sleep(150);
        await doc.unlock();
      }
    })(),
  );
  await sleep(1_500);
  const older = await timed(models[1]!.lock(d!, 'older', { wait: 20_000 }));
  stop = true;
  if (older.ok) await older.value.unlock();
  await Promise.all(loops);
  console.log(`single waiter beside barging single-waiter loops: ${older.ok ? 'served' : 'refused'} after ${older.ms} ms; loop turns ${turns.join(' / ')}`);
  expect(older.ok ? 'served' : String(older.error)).toBe('served');
  expect(older.ms).toBeLessThan(12_000);
});

test('two single waiters that each hold what the other waits for end by their own wait, and leave both documents takeable', async () => {
  const [a, b] = await newDocs(2);
  const p = await models[1]!.lock(a!, 'P');
  const q = await models[2]!.lock(b!, 'Q');
  const [pWait, qWait] = await Promise.all([timed(models[1]!.lock(b!, 'P', { wait: 4_000 })), timed(models[2]!.lock(a!, 'Q', { wait: 4_000 }))]);
  console.log(`hold-and-wait pair: P ended after ${pWait.ms} ms (${pWait.ok ? 'served' : (pWait.error as Error).name}), Q after ${qWait.ms} ms (${qWait.ok ? 'served' : (qWait.error as Error).name})`);
  // Each ends by its own deadline (4 s) with LockedError; a generous bound for a loaded machine.
  for (const w of [pWait, qWait]) {
    expect(w.ok ? 'served' : (w.error as Error).constructor).toBe(LockedError);
    expect(w.ms).toBeLessThan(10_000);
  }
  await Promise.all([p.unlock(), q.unlock()]);
  // What either waiter may have reserved is cleared or lapses (3 s lease): a caller that does not wait gets each document.
  for (const id of [a!, b!]) {
    const got = await retryUntil(() => models[3]!.tryLock(id, 'third'), 6_000);
    console.log(`after the pair ended, a tryLock got the document after ${got.ms} ms (${got.tries} tries)`);
    expect(got.value).not.toBeNull();
    await got.value!.unlock();
  }
});

test('a user holding b waits for a while an OLDER group waits for [a, b]: the cycle ends, both are served within 20 s', async () => {
  for (const flip of [false, true]) {
    const [x, y] = await newDocs(2);
    // Both canonical orders: in one the group holds a as its prefix and waits for b.
    const [a, b] = flip ? [y!, x!] : [x!, y!];
    const userB = await models[1]!.lock(b, 'U');
    const group = timed(models[2]!.lockMany([a, b], 'G', { wait: 40_000 }));
    // The group is older by far: it has waited (and reserved, kept a prefix) for 1.5 s.
    await sleep(1_500);
    const userA = await timed(models[1]!.lock(a, 'U', { wait: 20_000 }));
    if (userA.ok) {
      await sleep(100);
      await Promise.all([userA.value.unlock(), userB.unlock()]);
    } else await userB.unlock();
    const g = await group;
    if (g.ok) await models[2]!.unlockMany(g.value);
    console.log(`user hold-and-wait beside an older group (${flip ? 'flipped' : 'ascending'}): user ${userA.ok ? 'served' : 'refused'} after ${userA.ms} ms; group ${g.ok ? 'served' : 'refused'} after ${g.ms} ms`);
    expect({ user: userA.ok, group: g.ok }).toEqual({ user: true, group: true });
    expect(userA.ms).toBeLessThan(20_000);
  }
});
