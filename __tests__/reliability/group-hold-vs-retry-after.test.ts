/**
 * Attack on the capped hold bound (6fc289c, lock-group.ts holdBound) and docs/limits.md's claim
 * "A cycle through other hold-and-wait code ends within the hold bound: code that holds one
 * document and waits for another in a different order (..., a web flow retrying after
 * `Retry-After`) ... The group gives everything back after its hold bound ... and the other code
 * gets what it waits for."
 *
 * F holds b and wants a; it does not wait in the plugin but retries when the refusal tells it to:
 * after `LockedError.retryAfterMs` (the JSON body's `retryAfterMs`, the `Retry-After` header in
 * milliseconds; lockErrorHandler). G asks for [a, b] with `wait`: in canonical order it holds a and
 * waits for b. With a ttl of 8 s or less the bound is ttl / 2, and each ordered step takes a with a
 * fresh ttl lease. The refusal F gets says "a is free in ttl - (now - s)" where s is G's last step,
 * so F asks again at s + ttl. But G gives a back at s + ttl/2, pauses 0.5..1 s, and takes it again
 * at s' = s + ttl/2 + pause, holding it until s' + ttl/2 = s + ttl + pause: F always arrives during
 * the next hold, is refused again with retryAfterMs = s' + ttl - now, and the same happens again.
 * Neither is served until G's `wait` ends (a livelock the bound does not end).
 *
 * Expected (the documented property): F gets a within the hold bound plus a generous margin.
 * Fixed by the step lease (lock-group.ts stepLease): a step takes the prefix until a quarter of
 * the pause unit after the end of the hold bound, not for a full ttl, so F is advised a time in
 * G's pause. Failed on the code before it (twice: never got a after 23.5 s and 22.9 s, 8 refusals).
 */
import type { Types } from 'mongoose';
import { LockedError } from '../../src';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { holders, timed } from '../support/group-waiting';
import { workItemModel, type WorkItemModel } from '../support/work-item';

jest.setTimeout(60_000);
const db = testDatabase('grp_retry_after');
const conns: MonitoredConnection[] = [];
let G: WorkItemModel;
let F: WorkItemModel;

beforeAll(async () => {
  for (let i = 0; i < 2; i++) conns.push(await connect(db.name));
  [G, F] = await Promise.all(conns.map((c) => workItemModel(c.connection, { ttl: 4_000, ownerStorage: 'plain' }, 'RetryAfterItem')));
});

afterAll(async () => {
  await db.drop(conns[0]!.connection);
  await Promise.all(conns.map((c) => c.close()));
});

test('a holder that retries after the refusal\'s retryAfterMs gets the document a waiting group holds as its prefix within the hold bound', async () => {
  const [a, b] = (await F.insertMany([{ title: 'a' }, { title: 'b' }])).map((d) => d._id).sort((x: Types.ObjectId, y: Types.ObjectId) => x.toHexString().localeCompare(y.toHexString()));
  const fb = await F.lock(b!, 'F', { ttl: 60_000 });
  const group = timed(G.lockMany([a!, b!], 'G', { wait: 40_000 }));
  // Until G holds a (its canonical prefix) while it waits for b.
  const deadline = Date.now() + 15_000;
  while ((await holders(F, [a!])).get(String(a))?.owner !== 'G') {
    if (Date.now() > deadline) throw new Error('G never held a');
    await sleep(20);
  }
  const started = performance.now();
  const advice: number[] = [];
  let fa: Awaited<ReturnType<WorkItemModel['lock']>> | undefined;
  while (!fa && performance.now() - started < 22_000) {
    fa = await F.lock(a!, 'F').catch((error: unknown) => {
      if (!(error instanceof LockedError)) throw error;
      advice.push(Math.round(error.retryAfterMs ?? -1));
      return undefined;
    });
    // Follow the refusal's advice, as a client honouring Retry-After does (1 s if none given).
    if (!fa) await sleep((advice[advice.length - 1]! >= 0 ? advice[advice.length - 1]! : 1_000) + 5);
  }
  const ms = Math.round(performance.now() - started);
  if (fa) await fa.unlock();
  await fb.unlock();
  const g = await group;
  if (g.ok) await G.unlockMany(g.value);
  console.log(`retry-after holder: ${fa ? 'got a' : 'never got a'} after ${ms} ms, ${advice.length} refusals advising ${advice.join(', ')} ms; G ${g.ok ? 'served' : String(g.error)} after ${g.ms} ms`);
  expect(fa).toBeDefined();
  // The first hold bound (2 s here: min(2 s, ttl/2)) plus a pause and a generous margin.
  expect(ms).toBeLessThan(12_000);
});
