/**
 * An explicit abort that lands while a waiting call's command is in flight still rejects with the
 * signal's reason (issue 18, item 5: one documented behaviour; only a timeout ends a wait as
 * `wait` running out does). The command is held back by a fail point (mongod:
 * src/mongo/db/commands/fail_point_cmd.cpp configures `failCommand`; `blockConnection`, limited by
 * appName and namespace, is applied by CommandHelpers::evaluateFailCommandFailPoint,
 * src/mongo/db/commands.cpp, before the command runs), and the abort is sent once the command
 * has been sent. Before the fix, lockNext resolved null here (its empty read ended the call as a
 * timeout does).
 */
import type { mongo } from 'mongoose';
import { lockErrorHandler } from '../../src';
import { usesPrivateServer } from '../support/private-server';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { jobModel, type JobModel } from '../support/job';
import { workItemModel } from '../support/work-item';

usesPrivateServer();

// Fail-point stalls of a second or so: generous bounds for a loaded machine.
jest.setTimeout(60_000);

const APP = 'abort-during-command';
const db = testDatabase('abort_during_command');
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

/**
 * Holds back the worker's next `command` on `collection` for a while; `sent` resolves once it was
 * sent (wrapped in an object: an async function returning a promise would wait for it).
 */
async function stallNext(command: string, collection: string): Promise<{ sent: Promise<void> }> {
  const client = worker.connection.getClient();
  const sent = new Promise<void>((resolve) => {
    const listener = (event: { commandName: string; command: mongo.Document }) => {
      if (event.commandName === command && event.command[command] === collection) {
        client.off('commandStarted', listener);
        resolve();
      }
    };
    client.on('commandStarted', listener);
  });
  await admin.connection.getClient().db('admin').command({
    configureFailPoint: 'failCommand',
    mode: { times: 1 },
    data: { failCommands: [command], appName: APP, namespace: `${db.name}.${collection}`, blockConnection: true, blockTimeMS: 1_000 },
  });
  return { sent };
}

test('lockNext: an abort during the candidate read that then finds nothing rejects with the reason, not null', async () => {
  const Queue: JobModel = await jobModel(worker.connection, { ttl: 30_000 }, 'AbortedReadQueue');
  const { sent } = await stallNext('aggregate', Queue.collection.collectionName);
  const controller = new AbortController();
  const claim = Queue.lockNext({ status: 'queued' }, 'worker', { wait: 20_000, signal: controller.signal });
  await sent;
  controller.abort();
  await expect(claim).rejects.toBe(controller.signal.reason);
});

test('lock: an abort during an acquisition that is then refused rejects with the reason; lockErrorHandler answers 499', async () => {
  const Items = await workItemModel(worker.connection, { ttl: 30_000 });
  const { _id: id } = await Items.create({ title: 'held' });
  await Items.lock(id, 'alice-session', { label: 'Alice' });
  const { sent } = await stallNext('findAndModify', Items.lockModel().collection.collectionName);
  const controller = new AbortController();
  const waiting = Items.lock(id, 'bob-session', { wait: 20_000, signal: controller.signal });
  await sent;
  controller.abort();
  const error = await waiting.then(() => undefined, (e: unknown) => e);
  expect(error).toBe(controller.signal.reason);
  let status: number | undefined;
  lockErrorHandler()(error, {}, { headersSent: false, status: (code) => (status = code), setHeader: () => undefined, json: () => undefined }, () => undefined);
  expect(status).toBe(499);
});

test('lockMany: an abort during a take that is then refused rejects with the reason', async () => {
  const Items = await workItemModel(worker.connection, { ttl: 30_000 });
  const [{ _id: held }, { _id: free }] = await Items.create([{ title: 'held' }, { title: 'free' }]);
  await Items.lock(held, 'alice-session', { label: 'Alice' });
  const { sent } = await stallNext('update', Items.lockModel().collection.collectionName);
  const controller = new AbortController();
  const waiting = Items.lockMany([free, held], 'bob-session', { wait: 20_000, signal: controller.signal });
  await sent;
  controller.abort();
  await expect(waiting).rejects.toBe(controller.signal.reason);
  // Nothing taken is kept: the free document is not Bob's, the held one still Alice's.
  expect(await Items.releaseAllFor('bob-session')).toBe(0);
  expect(await Items.isLocked(free)).toBe(false);
  expect(await Items.isLocked(held)).toBe(true);
});
