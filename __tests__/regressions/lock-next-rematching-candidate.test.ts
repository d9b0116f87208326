/**
 * PRODUCT.md property 14: lockNext "answers 'none' only if at some instant during the call no
 * matching free document existed" (README, Job workers: "`null` only after a read that started
 * during the call found no free matching document").
 *
 * lock-next.ts keeps, per call, the documents it locked and then found not matching (`skip`), and
 * every later candidate read of that call excludes them with `$nin`. A document that stops
 * matching and matches again later (a job finished by someone else and re-queued, a retry
 * scheduler, a status that flips back) is then invisible to that call, and the call can answer
 * null while that very document is free and matching, and while at every instant of the call some
 * matching document was free.
 *
 * The schedule, forced with two fail-point stalls on the worker's own connection (mongod:
 * src/mongo/db/commands/fail_point_cmd.cpp, `failCommand` with `blockConnection`, limited by appName
 * and namespace; the block happens before the command runs):
 *   1. X (priority 2) is queued and free; Y (priority 1) is queued and held by w0. The worker's
 *      candidate read finds X only.
 *   2. The worker's acquisition of X is held back. Meanwhile w0 releases Y (Y free and matching),
 *      THEN X is finished ('done') by another process: Y was free before X stopped matching.
 *   3. The worker takes X, loads it, finds it not matching, releases it: correct so far.
 *   4. Its next candidate read is held back. Meanwhile X is re-queued (free and matching again),
 *      THEN w1 takes Y: X was free and matching before Y was taken.
 *   5. The read runs with `_id: { $nin: [X] }` and finds nothing: the call answers null, while X is
 *      free and matching (and was, or Y was, at every instant of the call).
 */
import type { mongo } from 'mongoose';
import { usesPrivateServer } from '../support/private-server';
import { connect, nextCommandSent, testDatabase, type MonitoredConnection } from '../support/db';
import { blockCommands } from '../plugin/guard/support';
import { jobModel } from '../support/job';

usesPrivateServer();
jest.setTimeout(120_000);

const APP = 'locknext-rematching';
const db = testDatabase('locknext_rematch');
let admin: MonitoredConnection;
let worker: MonitoredConnection;

beforeAll(async () => {
  admin = await connect(db.name);
  worker = await connect(db.name, { appName: APP, retryWrites: false });
});

afterAll(async () => {
  await admin.connection.getClient().db('admin').command({ configureFailPoint: 'failCommand', mode: 'off' });
  await db.drop(admin.connection);
  await worker.close();
  await admin.close();
});

/** Holds back the worker's next `command` on `collection` for `ms`. */
const stall = (command: string, collection: string, ms: number) =>
  blockCommands(admin.connection, { appName: APP, namespace: `${db.name}.${collection}`, commands: [command], blockTimeMS: ms });

/** Resolves when the worker has sent its next `command` on `collection` (the server then holds it back). */
const sent = (command: string, collection: string) => nextCommandSent(worker, command, collection);

test('a document found not matching that matches again is still claimable by the same call: no false null', async () => {
  const Admin = await jobModel(admin.connection, { ttl: 30_000 }, 'Rematch');
  const Worker = await jobModel(worker.connection, { ttl: 30_000 }, 'Rematch');
  const raw = Admin.collection as unknown as mongo.Collection;
  const locks = Admin.lockModel().collection.collectionName;
  const jobs = Admin.collection.collectionName;
  const [x, y] = await Admin.insertMany([
    { priority: 2, payload: 'X' },
    { priority: 1, payload: 'Y' },
  ]);
  const heldY = await Admin.lock(y._id, 'w0');

  await stall('findAndModify', locks, 2_000);
  const acquisitionSent = sent('findAndModify', locks);
  const claim = Worker.lockNext({ status: 'queued' }, 'worker', { sort: { priority: -1 } });
  await acquisitionSent;
  // The acquisition of X is held back on the server. Y becomes free, then X stops matching.
  await heldY.unlock();
  await raw.updateOne({ _id: x._id }, { $set: { status: 'done' } });
  // Next: the worker's following candidate read (after it found X not matching and released it).
  await stall('aggregate', jobs, 2_000);
  const readSent = sent('aggregate', jobs);
  await readSent;
  // That read is held back. X is re-queued (free and matching), then w1 takes Y.
  await raw.updateOne({ _id: x._id }, { $set: { status: 'queued' } });
  expect(await Admin.isLocked(x._id)).toBe(false);
  const takenY = await Admin.lock(y._id, 'w1');

  const doc = await claim;
  // X is queued and free now, and at every instant of the call X or Y was queued and free.
  expect(await Admin.findOne({ _id: x._id, status: 'queued' })).not.toBeNull();
  expect(await Admin.isLocked(x._id)).toBe(doc !== null);
  expect(doc?.payload ?? null).toBe('X');
  await takenY.unlock();
});
