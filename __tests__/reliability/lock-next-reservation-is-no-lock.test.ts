/**
 * A waiting `lockNext` worker's reservation is no lock (docs/limits.md "Reservations are no
 * locks", attack-5 brief): on a FREE document it reserved, it keeps nobody from reading it, from
 * guarded writes to it (PRODUCT.md property 10: the guard refuses only because of someone else's
 * LOCK), from `releaseAllFor`, from `isLocked` answering false, and from `lockNext` claiming it
 * (property 14: lockNext ignores reservations); it refuses only other acquisitions by `tryLock`.
 *
 * To hold a live reservation on a free document without its worker claiming it, the worker runs
 * in a child process (workers/killed-next-worker.ts) that is killed (SIGKILL) after it reserved the
 * held job; the holder then lets go, and everything below runs while the dead worker's
 * reservation is still live (asserted before and after: it lapses 3 s after its last renewal).
 * Both topologies.
 */
import type { Types } from 'mongoose';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { retryUntil } from '../support/group-waiting';
import { workItemModel, type WorkItemModel } from '../support/work-item';
import { killAll, spawnWorker } from './support/children';
import type { KilledNextWorkerConfig } from './workers/killed-next-worker';

jest.setTimeout(120_000);
const db = testDatabase('next_res_no_lock');
const MODEL = 'NextNoLockItem';
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

async function liveReservation(id: Types.ObjectId): Promise<boolean> {
  const record = await X.lockModel().collection.findOne({ _id: id } as never);
  const until = record?.reservedUntil as Date | undefined;
  return until !== undefined && until.getTime() > Date.now() && record?.reservedBy !== undefined;
}

test('a free job reserved by a (dead) lockNext worker: reads, guarded writes, isLocked, releaseAllFor and lockNext go through; tryLock is refused', async () => {
  const [job] = (await X.insertMany([{ title: 'nolock', status: 'open' }])).map((x) => x._id);
  const holder = await X.lock(job!, 'holder');
  const config: KilledNextWorkerConfig = { uri: process.env.MONGODB_URI!, dbName: db.name, modelName: MODEL, title: 'nolock', ttl: 30_000, wait: 60_000, owner: 'dead-worker' };
  const child = spawnWorker('killed-next-worker.ts', { MPL_KILLED_NEXT_WORKER: JSON.stringify(config) }, 90_000);
  expect(await child.nextLine(60_000)).toBe('started');
  const reserved = await retryUntil(async () => (await liveReservation(job!)) || null, 10_000, 25);
  expect(reserved.value).toBe(true);
  await sleep(1_100); // renewed once: live for about 3 s from now
  child.process.kill('SIGKILL');
  await child.exited;
  await holder.unlock();
  expect(await liveReservation(job!)).toBe(true);

  // Everything below runs within the reservation's life.
  expect(await X.tryLock(job!, 'prober')).toBeNull();
  expect((await X.findById(job))?.title).toBe('nolock');
  expect(await X.isLocked(job!)).toBe(false);
  await X.updateOne({ _id: job }, { $set: { edits: 1 } });
  const loaded = await X.findById(job);
  loaded!.edits = 2;
  await loaded!.save();
  expect(await X.releaseAllFor('dead-worker')).toBe(0);
  const claimed = await X.lockNext({ title: 'nolock', status: 'open' }, 'claimer');
  expect(String(claimed?._id)).toBe(String(job));
  expect(claimed?.edits).toBe(2);
  const stillReserved = await liveReservation(job!);
  await claimed?.unlock();
  console.log(`dead worker's reservation still live after the checks: ${stillReserved}`);
  // The checks ran while it was live (otherwise this test proves nothing about reservations).
  expect(stillReserved).toBe(true);
});
