/**
 * A single-document waiter's reservation (single-waiter-reservation.ts) lapses by itself when its
 * process dies: a crashed waiter blocks nobody for long. And while it lives, it refuses the callers
 * that do not wait (`lock` without `wait`, `tryLock`) like a group's does.
 *
 * A child process runs `lock(b, { wait })` while this process holds b: refused for 250 ms, the child
 * reserves b. The child is killed (SIGKILL: no clear is ever sent). Then b is released: a lock call
 * without wait and a tryLock are refused (the reservation is still live, so the test is not
 * vacuous), and a waiting one is granted once the reservation lapses (RESERVATION_MS after its last
 * renewal), long before any ttl.
 */
import type { Types } from 'mongoose';
import { LockedError } from '../../src';
import { RESERVATION_MS } from '../../src/group-reservation';
import { testDatabase } from '../support/db';
import type { WorkItemModel } from '../support/work-item';
import { kill, startWaiter, untilReserved, waiterTestModel } from './support/waiter';

jest.setTimeout(120_000);
const db = testDatabase('crashedsinglewaiter');
const MODEL = 'CrashedSingleWaiterItem';
const fixture = waiterTestModel(db, MODEL, { ttl: 60_000 });
let M: WorkItemModel;
beforeAll(() => ({ model: M } = fixture));

const outcome = (call: Promise<unknown>) =>
  call.then(
    (got) => (got === null ? 'null' : 'granted'),
    (error: unknown) => (error instanceof LockedError ? 'LockedError' : String(error)),
  );

test('a killed single waiter\'s reservation refuses callers that do not wait, then lapses within the reservation lease', async () => {
  const [b] = (await M.insertMany([{ title: 'b' }])).map((d) => d._id as Types.ObjectId);
  const hb = await M.lock(b!, 'holder');
  const child = await startWaiter(db.name, { modelName: MODEL, ids: [b!], ttl: 60_000, owner: 'crashing-single', single: true });
  await untilReserved(M, b!, child);
  await kill(child);
  const killedAt = Date.now();
  await hb.unlock();
  // Still reserved right after the release: callers that do not wait are refused ...
  expect(await outcome(M.lock(b!, 'next'))).toBe('LockedError');
  expect(await outcome(M.tryLock(b!, 'next'))).toBe('null');
  // ... and b is free once the reservation lapsed: within its lease (plus a renewal that may have
  // been on its way when the child died, and a margin for a loaded machine), not the 60 s ttl.
  const next = await M.lock(b!, 'next', { wait: 30_000 });
  const freedAfter = Date.now() - killedAt;
  console.log(`crashed single waiter: its reservation of b lapsed; b granted ${freedAfter} ms after the kill`);
  expect(freedAfter).toBeLessThan(RESERVATION_MS + 7_000);
  await next.unlock();
});
