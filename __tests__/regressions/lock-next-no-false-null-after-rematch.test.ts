/**
 * Model finding F4 (spec/README.md, `finding-F4-false-null`; `next-null-fix` is the fix, which
 * holds). PRODUCT.md property 14: lockNext "answers 'none' only if at some instant during the call
 * no matching free document existed" (docs/job-workers.md, "What `null` means").
 *
 * lock-next.ts leaves out of a call's later candidate reads (`$nin`) a document it found not
 * matching MISS_LIMIT (2) times after locking it (so that a document a `find` hook hides cannot keep
 * the call going for ever). A document that stops matching and matches again twice (a job finished
 * and re-queued twice, a status that flips back) is then invisible to that call, and the call
 * answered null while that very document was free and matching, and while at every instant of the
 * call some matching document was free. (lock-next-rematching-candidate.test.ts is the same with one
 * miss, fixed by MISS_LIMIT; this is the same schedule played twice.)
 *
 * The schedule, forced with fail-point stalls on the worker's own connection (mongod:
 * src/mongo/db/commands/fail_point_cmd.cpp, `failCommand` with `blockConnection`, limited by appName
 * and namespace; the block happens before the command runs, src/mongo/db/commands.cpp
 * evaluateFailCommandFailPoint):
 *   1. X (priority 2) is queued and free; Y (priority 1) is queued and held by w0. The worker's
 *      candidate read finds X only.
 *   2. The worker's acquisition of X is held back. Meanwhile w0 releases Y, THEN X is finished.
 *      The worker takes X, finds it not matching, releases it (miss 1).
 *   3. Its next candidate read is held back. Meanwhile X is re-queued, THEN w1 takes Y. The read
 *      finds X only.
 *   4. Its acquisition of X is held back. Meanwhile w1 releases Y, THEN X is finished. The worker
 *      takes X, finds it not matching, releases it (miss 2: X is now left out of its reads).
 *   5. Its next candidate read (`_id: { $nin: [X] }`) is held back. Meanwhile X is re-queued, THEN
 *      w2 takes Y. That read finds nothing.
 * At every instant X or Y was queued and free, and X is queued and free at the end: the call must
 * not answer null (it returns X, from a read that leaves nothing out).
 */
import type { mongo } from 'mongoose';
import { usesPrivateServer } from '../support/private-server';
import { connect, nextCommandSent, testDatabase, type MonitoredConnection } from '../support/db';
import { blockCommands } from '../plugin/guard/support';
import { jobModel } from '../support/job';

usesPrivateServer();
jest.setTimeout(120_000);

const APP = 'locknext-rematch-twice';
const db = testDatabase('locknext_rematch2');
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

test('a document found not matching twice that matches again is found by the same call before it answers null', async () => {
  const Admin = await jobModel(admin.connection, { ttl: 30_000 }, 'RematchTwice');
  const Worker = await jobModel(worker.connection, { ttl: 30_000 }, 'RematchTwice');
  const raw = Admin.collection as unknown as mongo.Collection;
  const locks = Admin.lockModel().collection.collectionName;
  const jobs = Admin.collection.collectionName;
  const [x, y] = await Admin.insertMany([
    { priority: 2, payload: 'X' },
    { priority: 1, payload: 'Y' },
  ]);
  const setX = (status: string) => raw.updateOne({ _id: x._id }, { $set: { status } });
  let heldY = await Admin.lock(y._id, 'w0');

  // 2. The first acquisition of X is held back; Y becomes free, then X stops matching.
  await stall('findAndModify', locks, 2_000);
  const firstClaim = sent('findAndModify', locks);
  const claim = Worker.lockNext({ status: 'queued' }, 'worker', { sort: { priority: -1 } });
  await firstClaim;
  await heldY.unlock();
  await setX('done');
  // 3. The next candidate read is held back; X is re-queued, then w1 takes Y.
  await stall('aggregate', jobs, 2_000);
  await sent('aggregate', jobs);
  await setX('queued');
  heldY = await Admin.lock(y._id, 'w1');
  // 4. The second acquisition of X is held back; Y becomes free, then X stops matching.
  await stall('findAndModify', locks, 2_000);
  await sent('findAndModify', locks);
  await heldY.unlock();
  await setX('done');
  // 5. The next candidate read (which leaves X out) is held back; X is re-queued, then w2 takes Y.
  await stall('aggregate', jobs, 2_000);
  await sent('aggregate', jobs);
  await setX('queued');
  expect(await Admin.isLocked(x._id)).toBe(false);
  heldY = await Admin.lock(y._id, 'w2');

  const doc = await claim;
  expect(await Admin.findOne({ _id: x._id, status: 'queued' })).not.toBeNull();
  expect(await Admin.isLocked(x._id)).toBe(doc !== null);
  expect(doc?.payload ?? null).toBe('X');
  await doc?.unlock();
  await heldY.unlock();
});
