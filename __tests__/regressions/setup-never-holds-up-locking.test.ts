/**
 * Locking is never taken down, nor held up, by the lock collection's setup (issue 16 setup
 * corrections; README "The lock collection": "Locking never depends on them").
 *
 * Every lock call awaits the FIRST setup attempt (`runtime.ready`, lock-collection-setup.ts
 * `ready()` returns `firstAttempt` while the phase is 'first'), and that attempt is Mongoose's
 * `lockModel.init()` with no bound: createCollection, then one createIndexes per index. A
 * createIndexes that hangs holds every lock call of the process for as long, `tryLock` included
 * (which promises to fail at once rather than wait). On mongod this happens for real: on a
 * replica set an index build on a non-empty collection waits for its commit quorum (all
 * data-bearing voting members by default; manual, createIndexes "commitQuorum"), so one secondary
 * down while a process starts against a lock collection missing an index (dropped by hand, or an
 * upgrade that adds one) stalls all of that process's locking until the secondary returns.
 * Here the emulator's failCommand blocks createIndexes on the plugin's connection for 15 s.
 */
import type { Connection } from 'mongoose';
import { connect, operatorConnection, testDatabase, type MonitoredConnection } from '../support/db';
import { usesPrivateServer } from '../support/private-server';
import { workItemSchema, type WorkItem, type WorkItemModel } from '../support/work-item';

// This file configures failCommand: on a server of its own where it can (support/private-server.ts).
usesPrivateServer();

const db = testDatabase('setupstall');
const APP = `mpl-setup-stall-${process.pid}`;
const BLOCK_MS = 15_000;
let conn: MonitoredConnection;
let operator: Connection;

beforeAll(async () => {
  conn = await connect(db.name, { appName: APP });
  operator = await operatorConnection(db.name);
});

afterAll(async () => {
  await failCreateIndexes('off');
  await operator.dropDatabase();
  await operator.close();
  await conn.close();
});

async function failCreateIndexes(mode: 'alwaysOn' | 'off'): Promise<void> {
  await operator.getClient().db('admin').command({
    configureFailPoint: 'failCommand',
    mode,
    data: { appName: APP, failCommands: ['createIndexes'], blockConnection: true, blockTimeMS: BLOCK_MS },
  });
}

test('tryLock answers while the first createIndexes of the lock collection hangs', async () => {
  // The document exists before the model's lock collection is set up.
  const { insertedId: id } = await operator.db!.collection('stalls').insertOne({ title: 'x', status: 'open', edits: 0 });
  await failCreateIndexes('alwaysOn');
  const M = conn.connection.model<WorkItem, WorkItemModel>('StallItem', workItemSchema({ ttl: 10_000 }), 'stalls');
  const started = performance.now();
  const doc = await M.tryLock(id, 'alice');
  const tookMs = performance.now() - started;
  expect(doc?.heldLock()?.owner).toBe('alice');
  // A lock call takes milliseconds; a third of one blocked command is generous on a loaded machine.
  expect(tookMs).toBeLessThan(BLOCK_MS / 3);
  await failCreateIndexes('off');
  await doc!.unlock();
  // Let the setup's blocked command finish before the connection closes (no leak into teardown).
  await M.lockModel().init().catch(() => undefined);
}, 5 * BLOCK_MS);
