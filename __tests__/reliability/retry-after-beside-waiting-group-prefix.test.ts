/**
 * A caller that does not wait but retries when the refusal says to (attack-fair4 brief: "a
 * Retry-After-honouring caller (retries exactly after retryAfterMs) gets a document a waiting
 * group holds as its prefix"; docs/limits.md, ordered group waiting, known gap (b)).
 *
 * R holds NOTHING (unlike group-hold-vs-retry-after on branch review-fair3fix, where the caller holds
 * the group's other document): it only wants a. The group G asks for [a, b] with `wait` while H
 * holds b for the whole test, so G keeps a as its canonical prefix, gives it back at each hold bound,
 * pauses and takes it again. R asks for a without `wait` and, refused, sleeps exactly what the
 * refusal advises:
 *  - `retryAfterMs` (the error's field, the JSON body of lockErrorHandler), plus 5 ms;
 *  - the `Retry-After` header lockErrorHandler sends, whole seconds rounded up (RFC 9110), which
 *    is what an HTTP client that honours the header sees: up to a second later than retryAfterMs.
 * With ttls of 4 s (bound 2 s = ttl/2), 10 s and 30 s (bounds 2 s, then 4 s). Expected: R gets a
 * within 15 s (a few bounds and pauses, generous for a loaded machine); printed: each advice.
 * On main (a483dfc) each step takes a with a fresh full-ttl lease, so the advice always points into
 * the next hold (or past the 15 s with ttl 30 s).
 *
 * On main 68d06ab (fair4retry: step lease ends a quarter pause unit after the give-up): every
 * retryAfterMs case is served after one refusal (2.2-2.3 s). The header cases are served after 2
 * refusals (5.0-7.0 s: the first advice, ceil'd to 3 s, always lands after the group's pause, in
 * its next hold), and once in 4 standalone runs of the ttl 10 s case only after 17.0 s (4 refusals
 * advising 3000, 5000, 5000, 4000 ms): FAILED. The margin (pause unit / 4 = 250 ms) is smaller than
 * the header's rounding up to whole seconds (up to 1 s).
 *
 * What is promised (docs/limits.md, "Retry-After beside a waiting group"): a caller following
 * `retryAfterMs` is served at its first advised retry (one refusal, within BOUND_MS); a caller
 * following the whole-second header is told ceil(retryAfterMs / 1000) s at every refusal and is
 * served once a retry lands in one of the group's pauses, at the latest when the group stops
 * waiting (its `wait`, GROUP_WAIT_MS here): no bound in turns is promised for it. Removing the
 * step lease (fair4retry) makes the retryAfterMs cases fail again.
 */
import type { Types } from 'mongoose';
import { LockedError } from '../../src';
import { lockErrorHandler } from '../../src/express';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { holders, timed } from '../support/group-waiting';
import { workItemModel, type WorkItemModel } from '../support/work-item';

jest.setTimeout(300_000);
const db = testDatabase('retry_after_prefix');
const conns: MonitoredConnection[] = [];
const BOUND_MS = 15_000;
const GROUP_WAIT_MS = 40_000;

beforeAll(async () => {
  for (let i = 0; i < 3; i++) conns.push(await connect(db.name));
});

afterAll(async () => {
  await db.drop(conns[0]!.connection);
  await Promise.all(conns.map((c) => c.close()));
});

/** The Retry-After header lockErrorHandler sets for `error`, in milliseconds (undefined if none). */
function retryAfterHeaderMs(error: LockedError): number | undefined {
  let header: string | undefined;
  const res = {
    headersSent: false,
    status() {
      return res;
    },
    setHeader(name: string, value: string) {
      if (name.toLowerCase() === 'retry-after') header = value;
    },
    json() {
      return res;
    },
  };
  lockErrorHandler()(error, {} as never, res as never, () => undefined);
  return header === undefined ? undefined : Number(header) * 1_000;
}

const models = new Map<number, WorkItemModel[]>();
async function modelsFor(ttl: number): Promise<WorkItemModel[]> {
  if (!models.has(ttl)) models.set(ttl, await Promise.all(conns.map((c) => workItemModel(c.connection, { ttl, ownerStorage: 'plain' }, `RetryAfterPrefix${ttl}`))));
  return models.get(ttl)!;
}

test.each([
  [4_000, 'retryAfterMs'],
  [10_000, 'retryAfterMs'],
  [30_000, 'retryAfterMs'],
  [4_000, 'Retry-After header'],
  [10_000, 'Retry-After header'],
  [30_000, 'Retry-After header'],
] as const)('ttl %i: a caller following %s gets the document a waiting group keeps as its prefix', async (ttl, follows) => {
  const [G, R, H] = await modelsFor(ttl);
  const [a, b] = (await H!.insertMany([{ title: 'a' }, { title: 'b' }])).map((d) => d._id).sort((x: Types.ObjectId, y: Types.ObjectId) => x.toHexString().localeCompare(y.toHexString()));
  const hb = await H!.lock(b!, 'H', { ttl: 120_000 });
  const group = timed(G!.lockMany([a!, b!], 'G', { wait: GROUP_WAIT_MS }));
  const deadline = Date.now() + 15_000;
  while ((await holders(R!, [a!])).get(String(a))?.owner !== 'G') {
    if (Date.now() > deadline) throw new Error('G never held a');
    await sleep(20);
  }
  const started = performance.now();
  const advice: number[] = [];
  let ra: Awaited<ReturnType<WorkItemModel['lock']>> | undefined;
  const headerMismatch: string[] = [];
  const giveUpAfter = follows === 'retryAfterMs' ? BOUND_MS + ttl : GROUP_WAIT_MS + ttl;
  while (!ra && performance.now() - started < giveUpAfter) {
    ra = await R!.lock(a!, 'R').catch((error: unknown) => {
      if (!(error instanceof LockedError)) throw error;
      const header = retryAfterHeaderMs(error);
      const expected = error.retryAfterMs === undefined ? undefined : Math.ceil(error.retryAfterMs / 1_000) * 1_000;
      if (header !== expected) headerMismatch.push(`${error.retryAfterMs} -> ${header}`);
      const ms = follows === 'retryAfterMs' ? error.retryAfterMs : header;
      advice.push(Math.round(ms ?? -1));
      return undefined;
    });
    if (!ra) await sleep((advice.at(-1)! >= 0 ? advice.at(-1)! : 1_000) + 5);
  }
  const ms = Math.round(performance.now() - started);
  if (ra) await ra.unlock();
  await hb.unlock();
  const g = await group;
  if (g.ok) await G!.unlockMany(g.value);
  console.log(`ttl ${ttl}, following ${follows}: R ${ra ? 'got a' : 'never got a'} after ${ms} ms, ${advice.length} refusals advising ${advice.join(', ')} ms; G ${g.ok ? 'served' : (g.error as Error).name} after ${g.ms} ms`);
  expect(ra ? 'got a' : 'never got a').toBe('got a');
  expect(headerMismatch).toEqual([]);
  if (follows === 'retryAfterMs') {
    expect(advice.length).toBe(1);
    expect(ms).toBeLessThan(BOUND_MS);
  } else {
    // Served while the group still waited (its step leases left a pause to land in), not by its end.
    expect(ms).toBeLessThan(GROUP_WAIT_MS - 5_000);
  }
});
