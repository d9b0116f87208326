/**
 * Issue 17, item 2: "With `wait`, overlapping callers never deadlock and never starve each other
 * indefinitely (canonical order, or release and retry)."
 *
 * lock-group.ts waits by release-and-retry without any reservation or queue: a waiting group runs
 * a round only when a read finds its whole group free at once. Two other `lockMany` callers whose
 * groups overlap it ({A, B} and {C, D}, also waiting with `wait`) that take turns so that one of
 * them always holds its pair (each re-locks its pair while the other still holds its own) starve
 * the group {A, B, C, D} for as long as they keep working: at no instant are all four free. A
 * lock manager that queues waiters (a waiter on A is served before a later request for A) would
 * hand the group its documents within two turns.
 *
 * Without the hand-off being coordinated, the same happens by chance (two loops of 50 ms sections
 * on {A, B} and {C, D}): measured on the emulator at load 15, the big group got through after
 * 0.6 s, 15.7 s, and not within its 30 s wait (263 sections of each small loop meanwhile).
 *
 * Here the turns are coordinated in-process, each small caller on its own connection (as separate
 * processes would be); every call is an ordinary `lockMany(..., { wait })`.
 */
import { LockedError } from '../../src';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

jest.setTimeout(180_000);
const db = testDatabase('lockmany_starve');
const conns: MonitoredConnection[] = [];

afterAll(async () => {
  await db.drop(conns[0].connection);
  await Promise.all(conns.map((c) => c.close()));
});

// OPEN (issue 17 item 2, not fixed yet): marked `failing` so the suite stays green and Jest reports
// it the day it passes. Keeping a canonical prefix while waiting does not help here (tried: the small
// callers re-take their pair in one round trip after releasing it, before a waiter woken by the
// change stream runs its round); serving the waiter needs a reservation every acquisition honours
// (a ticket in the lock record, checked by the acquisition condition of src/lock-store.ts).
test.failing('a waiting group is served while two overlapping waiting callers keep taking turns', async () => {
  for (let i = 0; i < 3; i++) conns.push(await connect(db.name));
  const [Small1, Small2, Big]: WorkItemModel[] = await Promise.all(conns.map((c) => workItemModel(c.connection, { ttl: 30_000 }, 'StarveItem')));
  const ids = (await Small1.insertMany([{ title: 'A' }, { title: 'B' }, { title: 'C' }, { title: 'D' }])).map((d) => d._id);
  const pairs = [ids.slice(0, 2), ids.slice(2, 4)];
  const smalls = [Small1, Small2];
  let held = [await Small1.lockMany(pairs[0], 'small-1', { wait: 10_000 }), await Small2.lockMany(pairs[1], 'small-2', { wait: 10_000 })];

  let done = false;
  const big = Big.lockMany(ids, 'big', { wait: 20_000 }).then(
    (docs) => docs,
    (error: unknown) => error,
  );
  void big.then(() => (done = true));
  let turns = 0;
  const started = performance.now();
  // Each turn: one small caller gives its pair back and asks for it again (waiting, as a worker
  // would for its next section) while the other still holds its own; then they swap roles.
  while (!done && performance.now() - started < 25_000) {
    const k = turns % 2;
    await smalls[k].unlockMany(held[k]);
    const again = await smalls[k].lockMany(pairs[k], `small-${k + 1}`, { wait: 10_000 }).catch(() => null);
    if (again === null) break; // the big group got the pair: the small caller lost this turn
    held = k === 0 ? [again, held[1]] : [held[0], again];
    turns++;
    await sleep(20); // a short piece of work between turns
  }
  const outcome = await big;
  const waited = Math.round(performance.now() - started);
  expect({ served: !(outcome instanceof LockedError), turns, waited }).toEqual({ served: true, turns: expect.any(Number), waited: expect.any(Number) });
});
