/**
 * lockNext returns a document only if it matches the filter AFTER the lock was taken (issue 17,
 * PRODUCT.md property 14): a candidate that stops matching (or is deleted) between the candidate
 * read and the acquisition is released and skipped, and the call goes on to the next one.
 * The window is opened with a fail point: the acquisition (`findAndModify` on the lock collection,
 * from this test's worker connection only) is stalled, and the document is changed meanwhile by
 * another connection (mongod: src/mongo/db/commands/fail_point_cmd.cpp, `failCommand` with
 * `blockConnection`, limited by appName and namespace; the block happens before the command runs).
 */
import type { mongo } from 'mongoose';
import { LockExpiredError } from '../../src';
import { usesPrivateServer } from '../support/private-server';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { jobModel, jobSchema, type Job, type JobModel } from '../support/job';

usesPrivateServer();

// Waits and fail-point stalls of several seconds each: generous bounds for a loaded machine.
jest.setTimeout(120_000);

const APP = 'locknext-stale-candidate';
const db = testDatabase('locknext_stale');
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

/** The same queue compiled on both connections: the worker's calls are the ones the fail point stalls. */
async function twoViews(name: string): Promise<{ Worker: JobModel; Admin: JobModel }> {
  const Admin = await jobModel(admin.connection, { ttl: 30_000 }, name);
  const Worker = await jobModel(worker.connection, { ttl: 30_000 }, name);
  return { Worker, Admin };
}

/** Stalls the worker's next acquisition; `sent` resolves when it has been sent (and is being held back by the server). */
async function stallNextAcquisition(model: JobModel): Promise<{ sent: Promise<void> }> {
  const namespace = `${db.name}.${model.lockModel().collection.collectionName}`;
  await admin.connection.getClient().db('admin').command({
    configureFailPoint: 'failCommand',
    mode: { times: 1 },
    data: { failCommands: ['findAndModify'], appName: APP, namespace, blockConnection: true, blockTimeMS: 1_500 },
  });
  const sent = new Promise<void>((resolve) => {
    const client = worker.connection.getClient();
    const listener = (event: { commandName: string; command: mongo.Document }) => {
      if (event.commandName === 'findAndModify' && event.command.findAndModify === model.lockModel().collection.collectionName) {
        client.off('commandStarted', listener);
        resolve();
      }
    };
    client.on('commandStarted', listener);
  });
  return { sent };
}

test('a candidate that stops matching between the read and the lock is released and skipped; the next one is returned', async () => {
  const { Worker, Admin } = await twoViews('StaleMatch');
  const [first, second] = await Admin.insertMany([
    { priority: 2, payload: 'first' },
    { priority: 1, payload: 'second' },
  ]);
  const stalled = await stallNextAcquisition(Worker);
  const claim = Worker.lockNext({ status: 'queued' }, 'worker', { sort: { priority: -1 } });
  await stalled.sent;
  // The candidate read proposed `first`; its acquisition is held back. Another process finishes it.
  await (Admin.collection as unknown as mongo.Collection).updateOne({ _id: first._id }, { $set: { status: 'done' } });
  const doc = await claim;
  expect(doc!.payload).toBe('second');
  expect(doc!.heldLock()!.owner).toBe('worker');
  // The lock the call took on `first` was given back at once, not left to expire.
  expect(await Admin.isLocked(first._id)).toBe(false);
  const record = await Admin.lockModel().collection.findOne({ _id: first._id });
  expect(record).toMatchObject({ owner: null, token: null });
  expect(await Admin.isLocked(second._id)).toBe(true);
});

test('a candidate deleted between the read and the lock is skipped; with nothing else free the call answers null', async () => {
  const { Worker, Admin } = await twoViews('StaleDelete');
  const [only] = await Admin.insertMany([{ payload: 'gone soon' }]);
  const stalled = await stallNextAcquisition(Worker);
  const claim = Worker.lockNext({ status: 'queued' }, 'worker');
  await stalled.sent;
  await (Admin.collection as unknown as mongo.Collection).deleteOne({ _id: only._id });
  expect(await claim).toBeNull();
  expect(await Admin.isLocked(only._id)).toBe(false);
});

test('a candidate the load keeps finding not matching, though the read sees it match, is given up: bounded commands', async () => {
  // The document matches the cast filter of the candidate read but not the load's: the read is an
  // aggregate, the load runs the model's find middleware, which here excludes it. A call tries such
  // a document MISS_LIMIT (2) times (it may have matched again: a job re-queued), then excludes it
  // from its reads; before answering null it reads without that exclusion (model finding F4) and
  // re-admits it, at most REVISIT_LIMIT (2) times: at most four tries per call.
  const Admin = await jobModel(admin.connection, { ttl: 30_000 }, 'StaleHook');
  const hooked = jobSchema({ ttl: 30_000 });
  hooked.pre('find', function hideOne() {
    void this.where({ payload: { $ne: 'hidden by a hook' } });
  });
  const Worker = worker.connection.model<Job, JobModel>('StaleHook', hooked);
  await Worker.init();
  const hidden = await Admin.create({ payload: 'hidden by a hook' });
  await Admin.create({ payload: 'visible' });
  worker.resetCommands();
  const docs = [await Worker.lockNext({}, 'worker', { sort: { payload: 1 } }), await Worker.lockNext({}, 'worker', { sort: { payload: 1 } })];
  expect(docs.map((d) => d?.payload ?? null)).toEqual(['visible', null]);
  expect(await Admin.isLocked(hidden._id)).toBe(false);
  // No loop. The first call: at most two tries of the hidden document (acquisition, load, release
  // each) and a read after each, a first read, the claim of the visible one (acquisition, load).
  // The second: at most four tries and a read after each, a first read, and two reads without the
  // exclusion (each re-admits it; after the second re-admission it stays out).
  expect(worker.commands.length).toBeLessThanOrEqual(2 * 4 + 1 + 2 + (4 * 4 + 1 + 2));
});

/** Holds back the worker's next `times` loads of documents from `model`'s collection for `ms` each. */
async function stallLoads(model: JobModel, times: number, ms: number): Promise<void> {
  await admin.connection.getClient().db('admin').command({
    configureFailPoint: 'failCommand',
    mode: { times },
    data: { failCommands: ['find'], appName: APP, namespace: `${db.name}.${model.collection.collectionName}`, blockConnection: true, blockTimeMS: ms },
  });
}

describe('leases are timed from when the acquisition was sent (issue 16 item 3)', () => {
  test('a grant whose lease ran out while its document loaded is given back, and the next candidate is returned', async () => {
    const Admin = await jobModel(admin.connection, { ttl: 400 }, 'LateLoad');
    const Worker = await jobModel(worker.connection, { ttl: 400 }, 'LateLoad');
    const [first] = await Admin.insertMany([{ priority: 2, payload: 'slow load' }, { priority: 1, payload: 'second' }]);
    await stallLoads(Worker, 1, 1_000);
    const doc = await Worker.lockNext({}, 'worker', { sort: { priority: -1 } });
    expect(doc!.payload).toBe('second');
    // The first grant is not held by anyone (released by its token, or already expired).
    expect(await Admin.isLocked(first._id)).toBe(false);
    expect(doc!.heldLock()!.owner).toBe('worker');
  });

  test('grants that keep arriving too late end the call with LockExpiredError after three tries, holding nothing', async () => {
    const Admin = await jobModel(admin.connection, { ttl: 400 }, 'LateAlways');
    const Worker = await jobModel(worker.connection, { ttl: 400 }, 'LateAlways');
    const docs = await Admin.insertMany([{ payload: 'a' }, { payload: 'b' }, { payload: 'c' }, { payload: 'd' }]);
    await stallLoads(Worker, 3, 1_000);
    await expect(Worker.lockNext({}, 'worker')).rejects.toBeInstanceOf(LockExpiredError);
    expect((await Admin.lockStatus(docs.map((d) => d._id))).filter((s) => s !== null)).toEqual([]);
  });
});
