/**
 * A waiting `lockNext` call that lost the race for a candidate (its read found the document free,
 * its claim found it held) claims that document as soon as the change feed reports its lock record
 * changed, without reading first: one command after the release, not a read and then a claim.
 * Beside waiters that reserve the document (a waiting group's find + step) a worker that read first
 * after every release always arrived second and was never served
 * (reliability/single-waiter-beside-waiting-groups, lockNext case).
 *
 * The race is made deterministic with a fail point (failCommand blockConnection on the worker's
 * connection; mongod src/mongo/db/commands/fail_point_cmd.cpp): the worker's claim is held back
 * while another owner locks the document, so the claim is refused. The feed needs change streams:
 * replica sets only.
 */
import type { mongo } from 'mongoose';
import { usesFailPoints } from '../support/fail-point-lock';
import { connect, sleep, testDatabase, waitUntil, type MonitoredConnection } from '../support/db';
import { replicaSetOnly } from '../support/topology';
import { workItemModel } from '../support/work-item';

usesFailPoints();
jest.setTimeout(120_000);

const APP = 'next-contested-release';
const db = testDatabase('next_contested');
let admin: MonitoredConnection;
let worker: MonitoredConnection;

beforeAll(async () => {
  admin = await connect(db.name);
  worker = await connect(db.name, { appName: APP });
});
afterAll(async () => {
  await admin.connection.getClient().db('admin').command({ configureFailPoint: 'failCommand', mode: 'off' });
  await db.drop(admin.connection);
  await worker.close();
  await admin.close();
});

replicaSetOnly('the lockNext feed is a change stream')('after losing the race for a document, a waiting worker claims it on its release without reading first', async () => {
  const Admin = await workItemModel(admin.connection, { ttl: 30_000 }, 'NextContested');
  const Worker = await workItemModel(worker.connection, { ttl: 30_000 }, 'NextContested');
  const [d] = (await Admin.insertMany([{ title: 'only job' }])).map((x) => x._id);
  const locks = Admin.lockModel().collection.collectionName;
  const items = Admin.collection.collectionName;
  // The worker's first claim (findAndModify on the lock collection) is held back 1.5 s.
  await admin.connection.getClient().db('admin').command({
    configureFailPoint: 'failCommand',
    mode: { times: 1 },
    data: { failCommands: ['findAndModify'], appName: APP, namespace: `${db.name}.${locks}`, blockConnection: true, blockTimeMS: 1_500 },
  });
  const sent: string[] = [];
  let releasedAt = Infinity;
  const listener = (event: { commandName: string; command: mongo.Document }) => {
    if (performance.now() < releasedAt) return;
    if (event.commandName === 'findAndModify' && event.command.findAndModify === locks) sent.push('claim');
    if (event.commandName === 'aggregate' && event.command.aggregate === items && !event.command.pipeline?.[0]?.$changeStream) sent.push('read');
  };
  worker.connection.getClient().on('commandStarted', listener);
  try {
    const claimed = Worker.lockNext({ _id: d }, 'worker', { wait: 30_000 });
    // The worker's read found d free; its claim is on its way, held back: another owner takes d first.
    await sleep(400);
    const holder = await Admin.lock(d!, 'holder');
    // Its claim refused, the worker reads (d held: none) and waits on the feed (opened by now).
    await sleep(3_000);
    releasedAt = performance.now();
    await holder.unlock();
    const got = await claimed;
    expect(String(got?._id)).toBe(String(d));
    await waitUntil(() => sent.length > 0, 5_000, 50);
    // Before the fix: ['read', 'claim'] (a read first, every time).
    expect(sent[0]).toBe('claim');
    await got!.unlock();
  } finally {
    worker.connection.getClient().off('commandStarted', listener);
  }
});
