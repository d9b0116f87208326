/**
 * A failing setup of the lock collection is reported "once" (README "The lock collection": "a
 * process warning (MPL_LOCK_COLLECTION_SETUP) says why, once, and it is retried in the background").
 *
 * lock-collection-setup.ts de-duplicates warnings by their full text, and the text embeds the
 * driver's error message. A network error's message names the connection, whose number grows with
 * every new connection ("connection 3 to 127.0.0.1:27017 closed", then "connection 5 ..."), so
 * each background retry during one outage emits a new warning: a failover or a flaky link floods
 * the log (every retry: 1 s, 2 s, 4 s, ... then every 10 minutes for as long as it lasts). Here
 * the emulator's failCommand closes the connection of every createIndexes of the plugin's
 * connection, and the retries are made frequent.
 */
import type { Connection } from 'mongoose';
import { LOCK_SETUP_WARNING_CODE, setupTiming } from '../../src/lock-collection-setup';
import { connect, operatorConnection, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { usesPrivateServer } from '../support/private-server';
import { workItemSchema, type WorkItem, type WorkItemModel } from '../support/work-item';

// This file configures failCommand: on a server of its own where it can (support/private-server.ts).
usesPrivateServer();

const db = testDatabase('setupwarnonce');
const APP = `mpl-setup-warn-once-${process.pid}`;
let conn: MonitoredConnection;
let operator: Connection;
const warnings: string[] = [];
const defaults = { ...setupTiming };

beforeAll(async () => {
  conn = await connect(db.name, { appName: APP });
  operator = await operatorConnection(db.name);
  jest.spyOn(process, 'emitWarning').mockImplementation(((message: string, options?: { code?: string }) => {
    if (options?.code === LOCK_SETUP_WARNING_CODE) warnings.push(message);
  }) as typeof process.emitWarning);
});

afterAll(async () => {
  jest.restoreAllMocks();
  Object.assign(setupTiming, defaults);
  await closeOnCreateIndexes('off');
  await operator.dropDatabase();
  await operator.close();
  await conn.close();
});

async function closeOnCreateIndexes(mode: 'alwaysOn' | 'off'): Promise<void> {
  await operator.getClient().db('admin').command({
    configureFailPoint: 'failCommand',
    mode,
    data: { appName: APP, failCommands: ['createIndexes'], closeConnection: true },
  });
}

test('one outage that closes the connection of every createIndexes gives one warning, not one per retry', async () => {
  setupTiming.firstRetryMs = 10;
  setupTiming.maxRetryMs = 40;
  await closeOnCreateIndexes('alwaysOn');
  const M = conn.connection.model<WorkItem, WorkItemModel>('WarnOnceItem', workItemSchema({ ttl: 10_000 }));
  const { insertedId: id } = await operator.db!.collection(M.collection.collectionName).insertOne({ title: 'x', status: 'open', edits: 0 });
  // An application keeps locking meanwhile; each call may start a due retry in the background.
  for (let i = 0; i < 20; i++) {
    await M.lock(id, 'alice')
      .then((doc) => doc.unlock())
      .catch(() => undefined); // a lock command may meet the pool the closed connection cleared
    await sleep(60);
  }
  await closeOnCreateIndexes('off');
  expect(warnings.length).toBeGreaterThanOrEqual(1);
  expect(warnings[0]).toMatch(/setting up the collection or its indexes failed/);
  expect(warnings).toHaveLength(1);
}, 60_000);
