/**
 * A waiting `lockNext` worker reserves the first HELD matching job (next-reservation.ts, branch
 * nextgap). A reservation is no lock: it must never keep others from a job the worker will not
 * take (PRODUCT.md properties 3 and 14; docs/limits.md "Reservations are no locks"). Attacked here
 * (attack-5 brief), each path by which the worker stops wanting the job:
 *  1. the call is aborted (its signal): the reservation is gone within CLEARED_MS;
 *  2. the call's `wait` ends (it answers null): gone within CLEARED_MS;
 *  3. the reserved job is DELETED while held: the reservation leaves it within CLEARED_MS (and the
 *     worker reserves the next held match instead);
 *  4. the worker's process is killed (SIGKILL: nothing cleared): once the holder lets go, a caller
 *     that does not wait gets the job within BOUND_MS (the 3 s reservation lease plus a margin);
 *  5. the holder finishes the job with saveAndUnlock (no longer matching AND released in one call):
 *     a younger single waiter of the job is served within BOUND_MS, not after the worker's wait;
 *  6. owners starting with `$` (a reserving worker, a reserving single waiter whose grant removes
 *     its own reservation): stored as given, never evaluated (property 11).
 * Both topologies (replica set: change streams wake the worker; standalone: it polls).
 */
import { performance } from 'node:perf_hooks';
import type { Types } from 'mongoose';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { retryUntil, timed } from '../support/group-waiting';
import { workItemModel, type WorkItemModel } from '../support/work-item';
import { killAll, spawnWorker } from './support/children';
import type { KilledNextWorkerConfig } from './workers/killed-next-worker';

jest.setTimeout(180_000);
const db = testDatabase('next_res_outlive');
const MODEL = 'NextOutliveItem';
/** A stream event or a poll (at most 1 s), then a read, the check and the background clear: generous on a loaded machine. */
const CLEARED_MS = 3_000;
/** The 3 s reservation lease after the last renewal, plus a margin for a loaded machine. */
const BOUND_MS = 8_000;
let admin: MonitoredConnection;
let worker: MonitoredConnection;
let Admin: WorkItemModel;
let Worker: WorkItemModel;

beforeAll(async () => {
  admin = await connect(db.name);
  worker = await connect(db.name);
  Admin = await workItemModel(admin.connection, { ttl: 30_000, ownerStorage: 'plain' }, MODEL);
  Worker = await workItemModel(worker.connection, { ttl: 30_000, ownerStorage: 'plain' }, MODEL);
});

afterAll(async () => {
  await killAll();
  await db.drop(admin.connection);
  await Promise.all([admin.close(), worker.close()]);
});

/** The live reservation's key on `id`'s lock record, or null (none, or lapsed). */
async function reservedBy(id: Types.ObjectId): Promise<unknown> {
  const record = await Admin.lockModel().collection.findOne({ _id: id } as never);
  const until = record?.reservedUntil as Date | undefined;
  return until !== undefined && until.getTime() > Date.now() && record?.reservedBy !== undefined ? record.reservedBy : null;
}

/** Milliseconds until `id`'s reservation is present / absent (Infinity: not within 15 s). */
async function untilReservation(id: Types.ObjectId, present: boolean): Promise<number> {
  const got = await retryUntil(async () => ((await reservedBy(id)) !== null) === present || null, 15_000, 25);
  return got.value === null ? Infinity : got.ms;
}

async function openJobs(title: string, n: number): Promise<Types.ObjectId[]> {
  return (await Admin.insertMany(Array.from({ length: n }, () => ({ title, status: 'open' })))).map((x) => x._id);
}

test('1. an aborted waiting worker leaves no reservation: the freed job goes to a caller that does not wait', async () => {
  const [job] = await openJobs('abort', 1);
  const holder = await Admin.lock(job!, 'holder');
  const controller = new AbortController();
  const call = Worker.lockNext({ title: 'abort', status: 'open' }, 'worker', { wait: 60_000, signal: controller.signal }).catch((error: unknown) => error);
  expect(await untilReservation(job!, true)).toBeLessThan(5_000);
  controller.abort();
  expect(((await call) as { name?: string }).name).toBe('AbortError'); // the signal's reason
  const clearedMs = await untilReservation(job!, false);
  await holder.unlock();
  const other = await Admin.tryLock(job!, 'other');
  console.log(`aborted worker: reservation gone ${clearedMs} ms after the abort; tryLock after the release: ${other ? 'got it' : 'refused'}`);
  expect(clearedMs).toBeLessThan(CLEARED_MS);
  expect(other).not.toBeNull();
  await other?.unlock();
});

test('2. a worker whose wait ends (null) leaves no reservation', async () => {
  const [job] = await openJobs('timeout', 1);
  const holder = await Admin.lock(job!, 'holder');
  const call = Worker.lockNext({ title: 'timeout', status: 'open' }, 'worker', { wait: 2_000 });
  expect(await untilReservation(job!, true)).toBeLessThan(2_000);
  expect(await call).toBeNull();
  const ended = performance.now();
  const clearedMs = await untilReservation(job!, false);
  console.log(`worker whose wait ended: reservation gone ${clearedMs} ms after it answered null (${Math.round(performance.now() - ended)} ms)`);
  expect(clearedMs).toBeLessThan(CLEARED_MS);
  await holder.unlock();
});

test('3. the reserved job is deleted while held: the reservation leaves it and moves to the next held match', async () => {
  const [first, second] = await openJobs('deleted', 2);
  const h1 = await Admin.lock(first!, 'holder');
  const h2 = await Admin.lock(second!, 'holder');
  const controller = new AbortController();
  const call = Worker.lockNext({ title: 'deleted', status: 'open' }, 'worker', { wait: 60_000, signal: controller.signal, sort: { _id: 1 } }).catch((error: unknown) => error);
  expect(await untilReservation(first!, true)).toBeLessThan(5_000);
  expect(await reservedBy(second!)).toBeNull();
  // The holder deletes the job (a guarded write by the holder).
  await h1.deleteOne();
  const leftMs = await untilReservation(first!, false);
  const movedMs = await untilReservation(second!, true);
  console.log(`reserved job deleted: reservation left it after ${leftMs} ms, reserved the next held match after ${movedMs} ms more`);
  controller.abort();
  await call;
  await h1.unlock().catch(() => undefined);
  await h2.unlock();
  expect(leftMs).toBeLessThan(CLEARED_MS);
  expect(movedMs).toBeLessThan(CLEARED_MS);
});

test('4. a waiting worker killed while it reserves the held job blocks a caller that does not wait for at most the lease', async () => {
  const [job] = await openJobs('killed', 1);
  const holder = await Admin.lock(job!, 'holder');
  const config: KilledNextWorkerConfig = { uri: process.env.MONGODB_URI!, dbName: db.name, modelName: MODEL, title: 'killed', ttl: 30_000, wait: 60_000, owner: 'crashed' };
  const child = spawnWorker('killed-next-worker.ts', { MPL_KILLED_NEXT_WORKER: JSON.stringify(config) }, 90_000);
  expect(await child.nextLine(60_000)).toBe('started');
  expect(await untilReservation(job!, true)).toBeLessThan(8_000);
  await sleep(1_200); // renewed at least once
  child.process.kill('SIGKILL');
  await child.exited;
  await holder.unlock();
  const got = await retryUntil(() => Admin.tryLock(job!, 'other'), BOUND_MS + 5_000);
  console.log(`killed reserving worker: tryLock got the job ${got.ms} ms after the release (${got.tries} tries)`);
  expect(got.value).not.toBeNull();
  expect(got.ms).toBeLessThan(BOUND_MS);
  await got.value?.unlock();
});

test('5. the holder finishes the reserved job with saveAndUnlock: a younger single waiter gets it soon, not after the worker\'s wait', async () => {
  const [job] = await openJobs('finished', 1);
  const holder = await Admin.lock(job!, 'holder');
  const controller = new AbortController();
  let settled = false;
  const call = Worker.lockNext({ title: 'finished', status: 'open' }, 'worker', { wait: 60_000, signal: controller.signal }).then(
    (doc) => ((settled = true), doc),
    (error: unknown) => ((settled = true), error),
  );
  expect(await untilReservation(job!, true)).toBeLessThan(5_000);
  // A younger single waiter, from the holder's process (so a local wake reaches it at once).
  const younger = timed(Admin.lock(job!, 'younger', { wait: 60_000 }));
  await sleep(600);
  holder.status = 'done';
  await holder.saveAndUnlock();
  const released = performance.now();
  const outcome = await younger;
  const afterRelease = Math.round(performance.now() - released);
  console.log(`finished reserved job: the younger single waiter ${outcome.ok ? 'was served' : 'was refused'} ${afterRelease} ms after saveAndUnlock`);
  expect(outcome.ok).toBe(true);
  expect(afterRelease).toBeLessThan(BOUND_MS);
  expect(settled).toBe(false);
  controller.abort();
  await call;
  if (outcome.ok) await outcome.value.unlock();
});

test('6. owners starting with `$` in the reservation paths are stored as given', async () => {
  const [job] = await openJobs('dollar', 1);
  const holder = await Admin.lock(job!, '$holder');
  // A reserving worker whose owner is a field path.
  const controller = new AbortController();
  const call = Worker.lockNext({ title: 'dollar', status: 'open' }, '$reservedBy', { wait: 60_000, signal: controller.signal }).catch((error: unknown) => error);
  expect(await untilReservation(job!, true)).toBeLessThan(5_000);
  controller.abort();
  await call;
  expect(await untilReservation(job!, false)).toBeLessThan(CLEARED_MS);
  // A reserving single waiter whose owner is `$$REMOVE`: its grant removes its own reservation (cmd-acquire's second stage).
  const waiting = Worker.lock(job!, '$$REMOVE', { wait: 60_000 });
  expect(await untilReservation(job!, true)).toBeLessThan(5_000);
  await holder.unlock();
  const got = await waiting;
  const record = await Admin.lockModel().collection.findOne({ _id: job } as never);
  expect(record?.owner).toBe('$$REMOVE');
  expect(Object.keys(record ?? {}).filter((k) => k.startsWith('reserved'))).toEqual([]);
  await got.unlock();
  const next = await Worker.lockNext({ title: 'dollar', status: 'open' }, '$token');
  expect(String(next?._id)).toBe(String(job));
  expect((await Admin.lockModel().collection.findOne({ _id: job } as never))?.owner).toBe('$token');
  await next?.unlock();
});
