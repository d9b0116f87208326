/**
 * A waiting `lockNext` worker that finds no free matching job reserves the first held matching one
 * (next-reservation.ts), as a waiting lock call reserves its document, so waiting groups and single
 * waiters (which reserve, oldest first) do not take it from the worker at every release
 * (reliability/single-waiter-beside-waiting-groups). A reservation is no lock, and it must never
 * keep others from a document the worker will not take:
 *  1. the worker reserves the held matching job (while it waits; nothing else reserves here);
 *  2. the job stops matching while held (the holder marks it done, the usual saveAndUnlock): the
 *     reservation is gone within CLEARED_MS, before the release, and once released another
 *     caller's tryLock gets the job at once, while the worker still waits (without the clear, the
 *     worker renews it each second for its whole wait: tryLock refused for 30 s);
 *  3. the worker claims another job: its reservation of the held one is gone within CLEARED_MS.
 * Replica set (change streams wake the worker) and standalone (it polls).
 */
import type { Types } from 'mongoose';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { retryUntil } from '../support/group-waiting';
import { workItemModel, type WorkItemModel } from '../support/work-item';

jest.setTimeout(120_000);
const db = testDatabase('next_reservation_follows');
let admin: MonitoredConnection;
let worker: MonitoredConnection;
let Admin: WorkItemModel;
let Worker: WorkItemModel;
/** Generous on a loaded machine: the worker hears the change (a stream event, or a poll of at most 1 s) and sends a read, a check and the clear. */
const CLEARED_MS = 3_000;

beforeAll(async () => {
  admin = await connect(db.name);
  worker = await connect(db.name);
  Admin = await workItemModel(admin.connection, { ttl: 30_000 }, 'NextReservationItem');
  Worker = await workItemModel(worker.connection, { ttl: 30_000 }, 'NextReservationItem');
});

afterAll(async () => {
  await db.drop(admin.connection);
  await Promise.all([admin.close(), worker.close()]);
});

async function reservedBy(id: Types.ObjectId): Promise<unknown> {
  const record = await Admin.lockModel().collection.findOne({ _id: id } as never);
  const until = record?.reservedUntil as Date | undefined;
  return until !== undefined && record?.reservedBy !== undefined ? record.reservedBy : null;
}

async function waitForReservation(id: Types.ObjectId, present: boolean): Promise<number> {
  const got = await retryUntil(async () => ((await reservedBy(id)) !== null) === present || null, 10_000, 50);
  return got.value === null ? Infinity : got.ms;
}

test('a waiting worker reserves the held matching job, and lets it go at once when the job stops matching', async () => {
  const [job] = (await Admin.insertMany([{ title: 'first', status: 'open' }])).map((x) => x._id);
  const holder = await Admin.lock(job!, 'holder');
  const controller = new AbortController();
  let settled = false;
  const claimed = Worker.lockNext({ status: 'open', title: 'first' }, 'worker', { wait: 30_000, signal: controller.signal }).then(
    (doc) => ((settled = true), doc),
    (error: unknown) => ((settled = true), error),
  );
  // 1. Reserved (the worker found none free for 250 ms).
  expect(await waitForReservation(job!, true)).toBeLessThan(5_000);
  // 2. The holder finishes the job: no longer matching, still held. The reservation goes first.
  holder.status = 'done';
  await holder.save();
  const clearedMs = await waitForReservation(job!, false);
  await holder.unlock();
  const other = await Admin.tryLock(job!, 'someone-else');
  console.log(`reservation of a job that stopped matching cleared after ${clearedMs} ms; tryLock after the release: ${other ? 'got it' : 'refused'}`);
  expect(clearedMs).toBeLessThan(CLEARED_MS);
  expect(other).not.toBeNull();
  await other?.unlock();
  expect(settled).toBe(false);
  controller.abort();
  await claimed;
});

test('a waiting worker that claims another job leaves no reservation on the held one', async () => {
  const [held, later] = (await Admin.insertMany([{ title: 'second', status: 'open' }, { title: 'second', status: 'done' }])).map((x) => x._id);
  const holder = await Admin.lock(held!, 'holder');
  const claimed = Worker.lockNext({ status: 'open', title: 'second' }, 'worker', { wait: 30_000 });
  expect(await waitForReservation(held!, true)).toBeLessThan(5_000);
  // Another job becomes free and matching: the worker claims it, and its call ends.
  await Admin.updateOne({ _id: later }, { $set: { status: 'open' } });
  const doc = await claimed;
  expect(String(doc?._id)).toBe(String(later));
  const clearedMs = await waitForReservation(held!, false);
  console.log(`reservation cleared ${clearedMs} ms after the worker claimed another job`);
  expect(clearedMs).toBeLessThan(CLEARED_MS);
  await doc?.unlock();
  await holder.unlock();
});

test('a worker whose wait is short (under 250 ms) reserves nothing', async () => {
  const [job] = (await Admin.insertMany([{ title: 'short', status: 'open' }])).map((x) => x._id);
  const holder = await Admin.lock(job!, 'holder');
  expect(await Worker.lockNext({ status: 'open', title: 'short' }, 'worker', { wait: 100 })).toBeNull();
  await sleep(500);
  expect(await reservedBy(job!)).toBeNull();
  await holder.unlock();
});

test('a waiting worker behind a held job sends a few commands per second (its read, the check, the renewal), not a loop', async () => {
  const [job] = (await Admin.insertMany([{ title: 'cost', status: 'open' }])).map((x) => x._id);
  const holder = await Admin.lock(job!, 'holder');
  const items = Admin.collection.collectionName;
  const locks = Admin.lockModel().collection.collectionName;
  const controller = new AbortController();
  const claimed = Worker.lockNext({ status: 'open', title: 'cost' }, 'worker', { wait: 30_000, signal: controller.signal }).catch((error: unknown) => error);
  expect(await waitForReservation(job!, true)).toBeLessThan(5_000);
  const counts = { reads: 0, updates: 0 };
  const listener = (event: { commandName: string; command: Record<string, unknown> }) => {
    if (event.commandName === 'aggregate' && event.command.aggregate === items) counts.reads++;
    if (event.commandName === 'update' && event.command.update === locks) counts.updates++;
  };
  const client = worker.connection.getClient();
  client.on('commandStarted', listener);
  const WINDOW_MS = 4_000;
  await sleep(WINDOW_MS);
  client.off('commandStarted', listener);
  controller.abort();
  await claimed;
  await holder.unlock();
  const perSecond = (n: number) => (n * 1_000) / WINDOW_MS;
  console.log(`waiting worker behind a held job: ${perSecond(counts.reads)} reads/s (candidate read + reservation check), ${perSecond(counts.updates)} reservation renewals/s`);
  // Replica set: a safety poll each second (read + check) and a renewal each second; standalone:
  // polling backs off to 1 s. Generous bounds: a loop would send hundreds.
  expect(counts.updates).toBeGreaterThanOrEqual(2);
  expect(perSecond(counts.updates)).toBeLessThanOrEqual(2);
  expect(perSecond(counts.reads)).toBeLessThanOrEqual(8);
});
