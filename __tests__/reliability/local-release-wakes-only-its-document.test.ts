/**
 * A release made by this process wakes this process's waiters of THAT document at once
 * (local-wake.ts, branch reservecost), on every topology. Attacked here (attack-5 brief: "no
 * wake-up of waiters for other documents, no cross-model mix-up (two models, same _id values)"):
 * the waiters are listed per lock collection scope (LockStore.scope: deployment and namespace) and
 * woken per idKey, so a release of
 *  - the same `_id` in ANOTHER model (another lock collection),
 *  - another document of the same model,
 *  - `releaseAllFor` on another model,
 * must not wake a waiter, while a release of its own document does (the control: without it the
 * measure could not see a wake at all).
 *
 * Measure: with `changeStreams: 'never'` a waiter that holds its document's reservation asks every
 * RESERVED_POLL_MS (500 ms); a release that wakes it makes it ask within a few milliseconds. Over
 * ROUNDS releases of each kind, the waiter's acquisitions started within WINDOW_MS of a release are
 * counted: by chance (its polls) about WINDOW_MS / 500 of the releases see one (~8%); a wake makes
 * every release see one. Asserted: under half for the other documents, over 3/4 for its own.
 * Both topologies (no stream either way).
 */
import { performance } from 'node:perf_hooks';
import { Types, type mongo } from 'mongoose';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

jest.setTimeout(180_000);
const db = testDatabase('local_wake_only');
const ROUNDS = 12;
const WINDOW_MS = 40;
let hConn: MonitoredConnection;
let wConn: MonitoredConnection;
let HA: WorkItemModel;
let HB: WorkItemModel;
let WB: WorkItemModel;

beforeAll(async () => {
  hConn = await connect(db.name);
  wConn = await connect(db.name);
  const options = { ttl: 60_000, ownerStorage: 'plain' as const, changeStreams: 'never' as const };
  HA = await workItemModel(hConn.connection, options, 'LocalWakeA');
  HB = await workItemModel(hConn.connection, options, 'LocalWakeB');
  WB = await workItemModel(wConn.connection, options, 'LocalWakeB');
});

afterAll(async () => {
  await db.drop(hConn.connection);
  await Promise.all([hConn.close(), wConn.close()]);
});

test('a release wakes the waiters of its own document only: not the same _id of another model, not another document, not releaseAllFor of another model', async () => {
  const x = new Types.ObjectId();
  const y = new Types.ObjectId();
  await HA.insertMany([{ _id: x, title: 'A:x' }]);
  await HB.insertMany([
    { _id: x, title: 'B:x' },
    { _id: y, title: 'B:y' },
  ]);
  const bLocks = WB.lockModel().collection.collectionName;
  const attempts: number[] = [];
  const listener = (event: { commandName: string; command: mongo.Document }) => {
    if (event.commandName === 'findAndModify' && event.command.findAndModify === bLocks) attempts.push(performance.now());
  };
  const held = await HB.lock(x, 'H');
  wConn.connection.getClient().on('commandStarted', listener);
  const waiting = WB.lock(x, 'W', { wait: 120_000 });
  // Refused for over 250 ms: it reserves x and asks every 500 ms.
  await sleep(1_000);
  const seen = async (release: () => Promise<unknown>): Promise<boolean> => {
    // Spread over the poll period, so chance coincidences stay at their rate.
    await sleep(150 + Math.random() * 500);
    await release();
    const at = performance.now();
    await sleep(WINDOW_MS + 20);
    return attempts.some((t) => t >= at && t <= at + WINDOW_MS);
  };
  // releaseAllFor of the waiter's own model, of another document: it cannot name the documents it
  // released (one updateMany), so it wakes every waiter of the model here (LockStore.releaseAll,
  // releasedManyHere): measured, not asserted (a designed cost: one attempt per waiter per call).
  const tally = { otherModel: 0, otherDocument: 0, releaseAllForOtherModel: 0, releaseAllForSameModelOtherDocument: 0 };
  try {
    for (let i = 0; i < ROUNDS; i++) {
      const a = await HA.lock(x, 'A');
      if (await seen(() => a.unlock())) tally.otherModel++;
      const b = await HB.lock(y, 'B');
      if (await seen(() => b.unlock())) tally.otherDocument++;
      await HA.lock(x, 'Z');
      if (await seen(() => HA.releaseAllFor('Z'))) tally.releaseAllForOtherModel++;
      await HB.lock(y, 'Z');
      if (await seen(() => HB.releaseAllFor('Z'))) tally.releaseAllForSameModelOtherDocument++;
    }
  } finally {
    wConn.connection.getClient().off('commandStarted', listener);
  }
  // The control: its own document's release wakes it (and it is served).
  await sleep(300);
  await held.unlock();
  const releasedAt = performance.now();
  const got = await waiting;
  const servedMs = Math.round(performance.now() - releasedAt);
  console.log(`waiter of B:x woken within ${WINDOW_MS} ms, out of ${ROUNDS} releases each: ${JSON.stringify(tally)}; its own document's release: served after ${servedMs} ms`);
  await got.unlock();
  expect(tally.otherModel).toBeLessThan(ROUNDS / 2);
  expect(tally.otherDocument).toBeLessThan(ROUNDS / 2);
  expect(tally.releaseAllForOtherModel).toBeLessThan(ROUNDS / 2);
  expect(servedMs).toBeLessThan(400);
});

test('the control over rounds: releases of its own document wake its reserving waiter each time', async () => {
  const z = new Types.ObjectId();
  await HB.insertMany([{ _id: z, title: 'B:z' }]);
  const gaps: number[] = [];
  for (let i = 0; i < 6; i++) {
    const held = await HB.lock(z, 'H');
    const waiting = WB.lock(z, 'W', { wait: 60_000 });
    await sleep(700 + Math.random() * 500);
    await held.unlock();
    const at = performance.now();
    const got = await waiting;
    gaps.push(Math.round(performance.now() - at));
    await got.unlock();
  }
  console.log(`own document released by this process, served after: ${gaps.join(' / ')} ms`);
  expect(gaps.filter((ms) => ms < WINDOW_MS * 3).length).toBeGreaterThanOrEqual(5);
});
