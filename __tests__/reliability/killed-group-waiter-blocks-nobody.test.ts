/**
 * A waiting group whose process dies (SIGKILL: no `finally`, no release, no clearing of anything)
 * blocks nobody for long (issue 17 item 2; PRODUCT.md property 3: a lock whose holder vanished frees
 * itself after its ttl; fair3 brief design 3: a reservation "lapses by itself (bounded, renewed
 * while waiting) so a crashed waiter blocks nobody for long").
 *
 * A child process asks for [d0, d1, d2] with `wait` (ttl 3 s) while H holds one of them, and is
 * killed after it has been waiting for 2 s (long enough to have kept a prefix and reserved what it
 * waits for, in a design that does). Then H lets go, and others must be able to take every one of
 * the documents: with tryLock retried every 100 ms (a caller that does not wait), and with a
 * waiting single-document lock. Bound: 15 s each (the ttl plus a generous lapse; printed).
 */
import type { Types } from 'mongoose';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { retryUntil, timed } from '../support/group-waiting';
import { workItemModel, type WorkItemModel } from '../support/work-item';
import { killAll } from './support/children';
import { kill, startWaiter } from './support/waiter';

jest.setTimeout(180_000);
const db = testDatabase('grp_waiter_crash');
const MODEL = 'CrashWaiterItem';
const BOUND_MS = 15_000;
let conn: MonitoredConnection;
let X: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  X = await workItemModel(conn.connection, { ttl: 30_000, ownerStorage: 'plain' }, MODEL);
});

afterAll(async () => {
  await killAll();
  await db.drop(conn.connection);
  await conn.close();
});

async function killedWaiter(ids: Types.ObjectId[], heldIndex: number): Promise<void> {
  const hold = await X.lock(ids[heldIndex]!, 'H');
  const child = await startWaiter(db.name, { modelName: MODEL, ids, ttl: 3_000, owner: 'crashed', ownerStorage: 'plain' });
  await sleep(2_000);
  await kill(child);
  await hold.unlock();
}

test.each([0, 1, 2])('a group waiter killed while H holds d%i: every document can be taken by a non-waiting caller within the bound', async (heldIndex) => {
  const ids = (await X.insertMany([{ title: 'd0' }, { title: 'd1' }, { title: 'd2' }])).map((d) => d._id).sort((x, y) => x.toHexString().localeCompare(y.toHexString()));
  await killedWaiter(ids, heldIndex);
  const took: number[] = [];
  for (const id of ids) {
    const got = await retryUntil(() => X.tryLock(id, 'X'), BOUND_MS);
    took.push(got.value ? got.ms : -1);
    if (got.value) await got.value.unlock();
  }
  console.log(`killed waiter (H held d${heldIndex}): each document taken after ${took.join(' / ')} ms`);
  expect(took.every((ms) => ms >= 0)).toBe(true);
});

test('a group waiter killed while H holds d1: a waiting lock and a waiting group each get their documents within the bound', async () => {
  const ids = (await X.insertMany([{ title: 'd0' }, { title: 'd1' }, { title: 'd2' }])).map((d) => d._id).sort((x, y) => x.toHexString().localeCompare(y.toHexString()));
  await killedWaiter(ids, 1);
  const single = await timed(X.lock(ids[1]!, 'single', { wait: 30_000 }));
  if (single.ok) await single.value.unlock();
  const group = await timed(X.lockMany([ids[2]!, ids[0]!], 'group', { wait: 30_000 }));
  if (group.ok) await X.unlockMany(group.value);
  console.log(`killed waiter: a waiting lock got d1 after ${single.ms} ms, a waiting group [d2, d0] after ${group.ms} ms`);
  expect({ single: single.ok, group: group.ok }).toEqual({ single: true, group: true });
  expect(Math.max(single.ms, group.ms)).toBeLessThan(BOUND_MS);
});
