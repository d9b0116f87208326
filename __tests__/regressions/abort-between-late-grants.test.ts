/**
 * A lock call's `signal` aborted while its grant is on the way, on a server that answers later than
 * the ttl. README, Statics: "`signal` (an AbortSignal) ends the wait with the signal's reason".
 * takeLease (src/plugin.ts) asks for up to 3 grants when they arrive too late (lease.ts) and never
 * looks at the signal between them; lock-waiter.ts checks it only between rounds. So after the
 * abort the call still sends two more grants (and their releases) to the slow server, each as slow
 * as the first, before it ends with the signal's reason: an aborted call keeps loading the very
 * server that is too slow, and answers only after three stalls instead of one.
 *
 * The stall: `failCommand` blockConnection on this client's findAndModify of the lock collection
 * (the server reads `$$NOW` after the block, so each grant is on time on the server; the reply
 * still arrives later than the ttl after the send: tests of grants-behind-stalls.test.ts).
 * Runs on a replica set and on a standalone server.
 */
import { blockCommands, failPointOff } from '../plugin/guard/support';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { deploymentFacts, describeIf } from '../conformance/support/server';
import { usesPrivateServer } from '../support/private-server';
import { workItemModel, type WorkItemModel } from '../support/work-item';

usesPrivateServer();

const db = testDatabase('abortlate');
const APP = `mpl-abort-late-${process.pid}`;
let conn: MonitoredConnection;
let admin: MonitoredConnection;
let M: WorkItemModel;

describeIf(deploymentFacts().failPoints, 'needs fail points')('an abort while grants arrive too late', () => {
  beforeAll(async () => {
    conn = await connect(db.name, { appName: APP });
    admin = await connect(db.name);
    M = await workItemModel(conn.connection, { ttl: 30_000 }, 'AbortLate');
  });

  afterAll(async () => {
    await failPointOff(admin.connection);
    await db.drop(admin.connection);
    await Promise.all([conn.close(), admin.close()]);
  });

  test('no grant is asked for after the signal aborted', async () => {
    const { _id: id } = await M.create({ title: 'slow server' });
    const namespace = `${db.name}.${M.lockModel().collection.collectionName}`;
    await blockCommands(admin.connection, { appName: APP, namespace, commands: ['findAndModify'], blockTimeMS: 1_500, times: 3 });
    const controller = new AbortController();
    const reason = new Error('the request was closed');
    const sentAfterAbort: string[] = [];
    const listener = (event: { commandName: string }) => {
      if (controller.signal.aborted && event.commandName === 'findAndModify') sentAfterAbort.push(event.commandName);
    };
    conn.connection.getClient().on('commandStarted', listener);
    try {
      setTimeout(() => controller.abort(reason), 300);
      const outcome = await M.lock(id, 'alice', { ttl: 1_000, wait: 20_000, signal: controller.signal }).catch((e: unknown) => e);
      expect(outcome).toBe(reason);
      expect(sentAfterAbort).toEqual([]);
      expect(await M.isLocked(id)).toBe(false);
    } finally {
      conn.connection.getClient().off('commandStarted', listener);
    }
  }, 30_000);
});
