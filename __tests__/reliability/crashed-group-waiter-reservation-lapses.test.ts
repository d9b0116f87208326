/**
 * A waiting group's reservation lapses by itself when its process dies (lock-group.ts ordered
 * waiting, group-reservation.ts): a crashed waiter blocks nobody for long.
 *
 * A child process runs `lockMany([a, b], { wait })` while this process holds b: the child takes
 * a (its canonical prefix), waits for b and reserves it. The child is killed (SIGKILL: no clear is
 * ever sent). Then b is released: a lock call without wait is refused (the reservation is still
 * live, so the test is not vacuous), and a waiting one is granted once the reservation lapses
 * (RESERVATION_MS after its last renewal), long before any ttl.
 */
import { Types } from 'mongoose';
import { LockedError } from '../../src';
import { RESERVATION_MS } from '../../src/group-reservation';
import { testDatabase } from '../support/db';
import type { WorkItemModel } from '../support/work-item';
import { kill, startWaiter, untilReserved, waiterTestModel } from './support/waiter';

jest.setTimeout(120_000);
const db = testDatabase('crashedgroupwaiter');
const MODEL = 'CrashedWaiterItem';
const fixture = waiterTestModel(db, MODEL, { ttl: 60_000 });
let M: WorkItemModel;
beforeAll(() => ({ model: M } = fixture));

test('a killed waiting group\'s reservation lapses: the document it waited for is free again within the reservation lease', async () => {
  const [a, b] = (await M.insertMany([{ title: 'a' }, { title: 'b' }])).map((d) => d._id as Types.ObjectId);
  const hb = await M.lock(b, 'holder');
  const child = await startWaiter(db.name, { modelName: MODEL, ids: [a, b], ttl: 60_000, owner: 'crashing-group' });
  // Until the child holds a and has reserved b.
  await untilReserved(M, b, child, async () => (await M.lockStatus([a]))[0] !== null);
  await kill(child);
  const killedAt = Date.now();
  await hb.unlock();
  // Still reserved right after the release (a lock without wait is refused) ...
  const first = await M.lock(b, 'next').then(
    () => 'granted',
    (error: unknown) => (error instanceof LockedError ? 'LockedError' : String(error)),
  );
  expect(first).toBe('LockedError');
  // ... and free once the reservation lapsed: within its lease (plus a renewal that may have
  // been on its way when the child died, and a margin for a loaded machine), not the 60 s ttl.
  const next = await M.lock(b, 'next', { wait: 30_000 });
  const freedAfter = Date.now() - killedAt;
  console.log(`crashed group waiter: its reservation of b lapsed; b granted ${freedAfter} ms after the kill`);
  expect(freedAfter).toBeLessThan(RESERVATION_MS + 7_000);
  await next.unlock();
});
