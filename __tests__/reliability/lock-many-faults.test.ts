/**
 * Faults inside Model.lockMany (issue 17 item 2: all or nothing "also when a fault interrupts
 * it"): each of its commands is failed with the `failCommand` fail point, and afterwards either
 * nothing is held, or, when the release itself failed, the round's locks free themselves at their
 * ttl. A retried acquisition (`onPrimaryTransactionalWrite`: the write commits, the reply is
 * lost) is answered by the server from the stored outcome and grants the group once.
 *
 * Sources: failCommand (src/mongo/db/commands/fail_point_cmd.cpp; `data.namespace`, `errorCode`,
 * `closeConnection`, modes `times` and `skip`); onPrimaryTransactionalWrite
 * (src/mongo/db/transaction/transaction_participant.cpp, see __tests__/reliability/retried-acquire.test.ts);
 * a retried update statement that already ran is answered from its oplog entry, the others run
 * (performUpdates, src/mongo/db/query/write_ops/write_ops_exec.cpp: checkStatementExecutedAndFetchOplogEntry,
 * parseOplogEntryForUpdate); the driver retries a retryable write once after a retryable error
 * (retryable-writes specification).
 */
import type { Document } from 'mongodb';
import type { Types } from 'mongoose';
import { LockDatabaseError, LockedError } from '../../src';
import { startPrivateBackend, testTopology, testUri } from '../../test-backend/test-env';
import { connectTo, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { usesFailPointsOn } from '../support/fail-point-lock';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const TTL_MS = 1_500;
const MARGIN_MS = 3_000;

const db = testDatabase('lockmany_faults');
let server: { uri: string; stop(): Promise<void> } | undefined;
/** The server this file runs on: its private one, or the shared deployment. */
let serverUri: string | undefined;
/** Setup, fail point control and checks: never faulted. */
let clean: MonitoredConnection;
/** The connection lockMany runs on. */
let faulty: MonitoredConnection;
let Clean: WorkItemModel;
let Faulty: WorkItemModel;
const onReplicaSet = testTopology() === 'replset';

beforeAll(async () => {
  const started = await startPrivateBackend(testTopology());
  let uri = testUri();
  if ('unsupported' in started) console.log(`lock-many faults: no private server (${started.unsupported}); using the shared deployment`);
  else {
    server = started;
    uri = started.uri;
  }
  serverUri = uri;
  clean = await connectTo(uri, db.name);
  faulty = await connectTo(uri, db.name, { retryWrites: true });
  Clean = await workItemModel(clean.connection, { ttl: TTL_MS }, 'ManyFaultItem');
  Faulty = await workItemModel(faulty.connection, { ttl: TTL_MS }, 'ManyFaultItem');
}, 60_000);

// Configures failCommand: on the shared server (when no private one can be started, or the
// deployment is the shared one) no other such file runs meanwhile.
usesFailPointsOn(() => serverUri);

afterAll(async () => {
  await failPointOff().catch(() => undefined);
  await clean.connection.getClient().db('admin').command({ configureFailPoint: 'onPrimaryTransactionalWrite', mode: 'off' }).catch(() => undefined);
  await db.drop(clean.connection).catch(() => undefined);
  await Promise.all([clean, faulty].map((c) => c?.close().catch(() => undefined)));
  await server?.stop();
});

const lockCollection = () => Clean.lockModel().collection.collectionName;

function failPoint(collection: string, mode: unknown, data: Document): Promise<Document> {
  return clean.connection.getClient().db('admin').command({ configureFailPoint: 'failCommand', mode, data: { namespace: `${db.name}.${collection}`, ...data } });
}

function failPointOff(): Promise<Document> {
  return clean.connection.getClient().db('admin').command({ configureFailPoint: 'failCommand', mode: 'off' });
}

const itemsOf = async (count: number): Promise<Types.ObjectId[]> =>
  (await Clean.insertMany(Array.from({ length: count }, (_, i) => ({ title: `f${i}` })))).map((d) => d._id);

/** The ids whose lock is held (unexpired), read on the clean connection. */
const held = async (ids: Types.ObjectId[]) => (await Clean.lockStatus(ids)).filter((s) => s !== null).length;

/** Asserts that nobody holds any of `ids` and that another owner gets all of them at once. */
async function expectAllFree(ids: Types.ObjectId[]): Promise<void> {
  expect(await held(ids)).toBe(0);
  const docs = await Clean.lockMany(ids, 'next-owner');
  await Clean.unlockMany(docs);
}

afterEach(async () => {
  await failPointOff();
});

test('the acquisition update fails (non-retryable): a typed error, nothing held', async () => {
  const ids = await itemsOf(5);
  await failPoint(lockCollection(), { times: 1 }, { failCommands: ['update'], errorCode: 2 });
  const error = await Faulty.lockMany(ids, 'faulted').catch((e: unknown) => e);
  expect(error).toBeInstanceOf(LockDatabaseError);
  expect((error as LockDatabaseError).retryable).toBe(false);
  await failPointOff();
  await expectAllFree(ids);
});

test('the connection closes at the acquisition update, twice (the retry too): a retryable typed error, nothing held', async () => {
  const ids = await itemsOf(5);
  await failPoint(lockCollection(), { times: 2 }, { failCommands: ['update'], closeConnection: true });
  const error = await Faulty.lockMany(ids, 'faulted').catch((e: unknown) => e);
  expect(error).toBeInstanceOf(LockDatabaseError);
  expect((error as LockDatabaseError).retryable).toBe(true);
  await failPointOff();
  await expectAllFree(ids);
});

test('the update took the locks, the find of the grants fails: everything is released', async () => {
  const ids = await itemsOf(5);
  await failPoint(lockCollection(), { times: 1 }, { failCommands: ['find'], errorCode: 2 });
  const error = await Faulty.lockMany(ids, 'faulted').catch((e: unknown) => e);
  expect(error).toBeInstanceOf(LockDatabaseError);
  await failPointOff();
  await expectAllFree(ids);
});

test('the load of the documents fails: everything is released', async () => {
  const ids = await itemsOf(5);
  await failPoint(Clean.collection.collectionName, { times: 1 }, { failCommands: ['find'], errorCode: 2 });
  const error = await Faulty.lockMany(ids, 'faulted').catch((e: unknown) => e);
  expect(error).toBeInstanceOf(LockDatabaseError);
  await failPointOff();
  await expectAllFree(ids);
});

test('the find of the grants and the release both fail: the locks stay held by nobody who can use them, and free themselves at their ttl', async () => {
  const ids = await itemsOf(5);
  // skip: 1 lets the acquisition update through; then the find and the release fail.
  await failPoint(lockCollection(), { skip: 1 }, { failCommands: ['update', 'find'], errorCode: 2 });
  const failedAt = Date.now();
  const error = await Faulty.lockMany(ids, 'faulted').catch((e: unknown) => e);
  expect(error).toBeInstanceOf(LockDatabaseError);
  await failPointOff();
  // Still held (the release failed) ...
  expect(await held(ids)).toBe(5);
  const refused = await Clean.lockMany(ids, 'next-owner').catch((e: unknown) => e);
  expect(refused).toBeInstanceOf(LockedError);
  // ... until their ttl passes (server time): then another owner takes all of them.
  const docs = await Clean.lockMany(ids, 'next-owner', { wait: TTL_MS + MARGIN_MS });
  expect(Date.now() - failedAt).toBeLessThan(TTL_MS + MARGIN_MS + 2_000);
  await Clean.unlockMany(docs);
});

test('the release after a refusal fails: the refusal is reported as the fault, and the taken locks free themselves at their ttl', async () => {
  const ids = await itemsOf(4);
  const holder = await Clean.lock(ids[3], 'holder');
  await failPoint(lockCollection(), { skip: 1 }, { failCommands: ['update'], errorCode: 2 });
  const error = await Faulty.lockMany(ids, 'faulted').catch((e: unknown) => e);
  expect(error).toBeInstanceOf(LockDatabaseError);
  await failPointOff();
  await holder.unlock();
  const docs = await Clean.lockMany(ids, 'next-owner', { wait: TTL_MS + MARGIN_MS });
  await Clean.unlockMany(docs);
});

const replicaSetTest = onReplicaSet ? test : test.skip;
if (!onReplicaSet) console.log('[skipped on standalone] retryable writes (the acquisition retried after a lost reply) need a replica set');

replicaSetTest('the update commits but its reply is lost: the driver retries it, the server answers from the stored outcome, the group is granted once', async () => {
  const ids = await itemsOf(5);
  const updates: Document[] = [];
  const listener = (event: { commandName: string; command: Document }) => {
    if (event.commandName === 'update' && event.command.update === lockCollection()) updates.push(event.command);
  };
  faulty.connection.getClient().on('commandStarted', listener);
  await clean.connection.getClient().db('admin').command({ configureFailPoint: 'onPrimaryTransactionalWrite', mode: { times: 1 } });
  try {
    const docs = await Faulty.lockMany(ids, 'retried');
    expect(docs.map((d) => d.heldLock()!.owner)).toEqual(Array(5).fill('retried'));
    expect(new Set(docs.map((d) => d.heldLock()!.token)).size).toBe(1);
    expect((await Clean.lockStatus(ids, { owner: 'retried' })).map((s) => s?.mine)).toEqual(Array(5).fill(true));
    // The same command twice (same txnNumber): the driver's one retry.
    expect(updates).toHaveLength(2);
    expect(String(updates[1].txnNumber)).toBe(String(updates[0].txnNumber));
    await Faulty.unlockMany(docs);
  } finally {
    faulty.connection.getClient().off('commandStarted', listener);
    await clean.connection.getClient().db('admin').command({ configureFailPoint: 'onPrimaryTransactionalWrite', mode: 'off' });
  }
  await sleep(0);
});

replicaSetTest('the update commits but the caller only sees network errors: the release by token frees what was taken', async () => {
  const ids = await itemsOf(5);
  // The first attempt meets a closed connection before it runs (failCommand acts before the
  // command); the driver's retry runs and commits, and onPrimaryTransactionalWrite closes the
  // connection before its reply. The locks were taken; the caller got a network error.
  await failPoint(lockCollection(), { times: 1 }, { failCommands: ['update'], closeConnection: true });
  await clean.connection.getClient().db('admin').command({ configureFailPoint: 'onPrimaryTransactionalWrite', mode: { times: 1 } });
  try {
    const error = await Faulty.lockMany(ids, 'faulted').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockDatabaseError);
    expect((error as LockDatabaseError).retryable).toBe(true);
  } finally {
    await clean.connection.getClient().db('admin').command({ configureFailPoint: 'onPrimaryTransactionalWrite', mode: 'off' });
  }
  await failPointOff();
  // The retry did write every lock record (they exist, with a fence), and the release freed them.
  expect(await Clean.lockModel().countDocuments({ _id: { $in: ids }, fence: { $gt: 0 } })).toBe(5);
  await expectAllFree(ids);
});
