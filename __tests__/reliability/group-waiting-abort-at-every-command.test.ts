/**
 * A waiting group that is called off (explicit abort, a timed-out signal, its `wait` running out, a
 * database fault) never hands out a lock it does not hold and leaves nothing held (issue 17 item 2;
 * PRODUCT.md properties 13 and 15; docs/api.md Waiting: "An explicit abort ... rejects with the
 * signal's reason at once ... An attempt already sent is not interrupted: a lock it got is returned").
 *
 * Black box, whatever commands a waiting design sends: the group G (its own connection and appName)
 * locks [d0, d1, d2] while H holds d1 (so in canonical order G may keep d0 while it waits for d1).
 * For k = 1, 2, ... the server holds G's k-th command on the lock collection (failCommand
 * `skip: k - 1`, blockConnection 1.5 s; then the fail point is turned off so only that command is
 * held) and G is aborted while it is held: the k-th command is the fast path, a release of what it
 * got past the refusal, a reservation write, a read, a renewal, the ordered acquisition after H
 * released, or the hold bound's release, depending on k and the design. Checked after each:
 *  - G settles within the held command's time plus slack (no hang);
 *  - rejected: with the signal's very reason, and then G holds no record, not even a moment later
 *    (nothing taken after the abort), and every document can be taken by someone else once H let
 *    go (no reservation left behind for long);
 *  - resolved (the attempt in flight got the whole group): every document is held by G on the
 *    server under the token it carries, with no more time than the server grants.
 * Then the same for a timed-out signal and for `wait` running out while the group keeps a prefix,
 * and for a fault on every update once the group waits (the give-up's release fails too: the error
 * must not claim that nothing is held when something is).
 */
import type { Types } from 'mongoose';
import { LockedError } from '../../src';
import { deploymentFacts } from '../conformance/support/server';
import { sleep, testDatabase, waitUntil } from '../support/db';
import { usesPrivateServer } from '../support/private-server';
import { failPointOff, groupCast, threeDocuments, type GroupCast, groupProblems, heldCount, retryUntil, timed } from '../support/group-waiting';

usesPrivateServer();
jest.setTimeout(600_000);

const db = testDatabase('grp_abort_steps');
const BLOCK_MS = 1_500;
const COUNTED = new Set(['update', 'find', 'findAndModify', 'insert', 'delete']);
const cast = groupCast(db, { appPrefix: 'mpl-grp-abort', modelName: 'AbortStepItem', gTtl: 30_000 });
let { admin, gConn, G, H, X, locks } = {} as GroupCast;
beforeAll(() => ({ admin, gConn, G, H, X, locks } = cast));

const run = deploymentFacts().failPoints ? test : test.skip;

const three = () => threeDocuments(X);

/** Everything `owner` could still hold is free to someone else within `ms` (H released first). */
async function allTakeable(ids: Types.ObjectId[], ms: number): Promise<{ ok: boolean; took: number[] }> {
  const took: number[] = [];
  for (const id of ids) {
    const got = await retryUntil(() => X.tryLock(id, 'X'), ms);
    took.push(got.ms);
    if (!got.value) return { ok: false, took };
    await got.value.unlock();
  }
  return { ok: true, took };
}

describe.each([
  ['H holds d1 throughout', undefined],
  ['H releases d1 0.6 s after G started', 600],
] as const)('%s', (_name, releaseAfter) => {
  run('an abort while the server holds G\'s k-th command: the reason or the whole group, never a lock it lacks, nothing left held', async () => {
    const report: string[] = [];
    for (let k = 1; k <= 14; k++) {
      const ids = await three();
      const hold = await H.lock(ids[1]!, 'H');
      // Count G's commands on the lock collection; abort 200 ms into the k-th.
      let seen = 0;
      let kthSent: () => void = () => undefined;
      const kth = new Promise<void>((resolve) => (kthSent = resolve));
      const client = gConn.connection.getClient();
      const listener = (event: { commandName: string; command: Record<string, unknown> }) => {
        if (COUNTED.has(event.commandName) && event.command[event.commandName] === locks && ++seen === k) kthSent();
      };
      client.on('commandStarted', listener);
      await admin.connection.getClient().db('admin').command({
        configureFailPoint: 'failCommand',
        mode: { skip: k - 1 },
        data: { failCommands: [...COUNTED], appName: gConn.app, namespace: `${db.name}.${locks}`, blockConnection: true, blockTimeMS: BLOCK_MS },
      });
      const controller = new AbortController();
      const reason = new Error(`called off at command ${k}`);
      const releasing = releaseAfter === undefined ? undefined : sleep(releaseAfter).then(() => hold.unlock());
      const call = timed(G.lockMany(ids, 'G', { wait: 20_000, signal: controller.signal }));
      const reached = await Promise.race([kth.then(() => true), call.then(() => false), sleep(15_000).then(() => false)]);
      let abortedAt = 0;
      if (reached) {
        await sleep(200);
        await failPointOff(admin.connection);
        abortedAt = performance.now();
        controller.abort(reason);
      } else {
        await failPointOff(admin.connection);
        controller.abort(reason);
      }
      const outcome = await call;
      const settleMs = abortedAt ? Math.round(performance.now() - abortedAt) : -1;
      client.off('commandStarted', listener);
      await releasing;
      if (releaseAfter === undefined) await hold.unlock();
      if (outcome.ok) {
        const problems = await groupProblems(G, outcome.value, 'G');
        report.push(`k=${k}: resolved (${seen} commands) ${problems.join('; ')}`);
        expect(problems).toEqual([]);
        await G.unlockMany(outcome.value);
      } else {
        expect(outcome.error).toBe(reason);
        // Nothing held once it settled (a release in the background gets 3 s), and nothing taken later.
        const released = await waitUntil(async () => (await heldCount(G, 'G')) === 0, 3_000);
        await sleep(1_500);
        const later = await heldCount(G, 'G');
        const takeable = await allTakeable(ids, 5_000);
        report.push(`k=${k}: rejected after ${settleMs} ms (${seen} commands), released ${released}, later ${later}, others took each in ${takeable.took.join('/')} ms`);
        expect({ k, released, later, takeable: takeable.ok }).toEqual({ k, released: true, later: 0, takeable: true });
        if (reached) expect(settleMs).toBeLessThan(BLOCK_MS + 3_000);
      }
      if (!reached) break; // G never sent a k-th command: every step was covered
    }
    console.log(`abort at every command (${releaseAfter === undefined ? 'H holds' : 'H releases'}):\n${report.join('\n')}`);
  });
});

run('a signal that times out while G keeps a prefix: LockedError, nothing held, every document takeable at once after H let go', async () => {
  const ids = await three();
  const hold = await H.lock(ids[1]!, 'H');
  const outcome = await timed(G.lockMany(ids, 'G', { wait: 20_000, signal: AbortSignal.timeout(2_500) }));
  const heldRight = await heldCount(G, 'G');
  await hold.unlock();
  const takeable = await allTakeable(ids, 3_000);
  expect({ error: outcome.ok ? 'resolved' : (outcome.error as Error).constructor.name, heldRight, takeable: takeable.ok }).toEqual({ error: LockedError.name, heldRight: 0, takeable: true });
});

run('`wait` running out while G keeps a prefix: LockedError, nothing held, every document takeable at once after H let go', async () => {
  const ids = await three();
  const hold = await H.lock(ids[2]!, 'H');
  const outcome = await timed(G.lockMany(ids, 'G', { wait: 3_000 }));
  const heldRight = await heldCount(G, 'G');
  await hold.unlock();
  const takeable = await allTakeable(ids, 3_000);
  console.log(`wait ran out: others took each document in ${takeable.took.join('/')} ms`);
  expect({ error: outcome.ok ? 'resolved' : (outcome.error as Error).constructor.name, heldRight, takeable: takeable.ok }).toEqual({ error: LockedError.name, heldRight: 0, takeable: true });
});

run('a fault on every update once G waits (its give-up cannot release): the error does not claim nothing is held while something is', async () => {
  const ids = await three();
  const hold = await H.lock(ids[2]!, 'H');
  const call = timed(G.lockMany(ids, 'G', { wait: 4_000 }));
  await sleep(1_000);
  await admin.connection.getClient().db('admin').command({
    configureFailPoint: 'failCommand',
    mode: 'alwaysOn',
    data: { failCommands: ['update', 'findAndModify', 'delete', 'insert'], appName: gConn.app, namespace: `${db.name}.${locks}`, errorCode: 1 },
  });
  const outcome = await call;
  const stillHeld = await heldCount(G, 'G');
  await failPointOff(admin.connection);
  await hold.unlock();
  const error = outcome.ok ? undefined : (outcome.error as Error);
  console.log(`fault on release: ${error ? `${error.constructor.name}: ${error.message}` : 'resolved'}; records still held by G: ${stillHeld}`);
  if (outcome.ok) {
    expect(await groupProblems(G, outcome.value, 'G')).toEqual([]);
    await G.unlockMany(outcome.value);
    return;
  }
  // A LockedError says "none of the documents asked for was locked": only true if G holds none.
  if (stillHeld > 0) expect(error).not.toBeInstanceOf(LockedError);
  await G.releaseAllFor('G');
});
