/**
 * A waiting lock call on a database that answers every grant later than the ttl allows (lease.ts:
 * such a grant is released again, LockExpiredOnArrivalError). lock-waiter.ts used to try again at
 * once after each such round, without any pause, for the whole wait: it took and released the
 * lock as fast as the slow database answered. It must back off as polling does (README, Waiting:
 * 20 ms doubling to 1 s, jittered).
 *
 * The stall: `failCommand` blockConnection on this client's findAndModify of the lock collection
 * (every grant is on time on the server, its reply arrives later than the ttl after the send).
 * Runs on a replica set and on a standalone server.
 */
import { LockExpiredOnArrivalError } from '../../src';
import { blockCommands, failPointOff } from '../plugin/guard/support';
import { deploymentFacts, describeIf } from '../conformance/support/server';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { usesPrivateServer } from '../support/private-server';
import { workItemModel, type WorkItemModel } from '../support/work-item';

usesPrivateServer();

const db = testDatabase('latebackoff');
const APP = `mpl-late-backoff-${process.pid}`;
let conn: MonitoredConnection;
let admin: MonitoredConnection;
let M: WorkItemModel;

describeIf(deploymentFacts().failPoints, 'needs fail points')('a waiting lock call whose grants all arrive too late', () => {
  beforeAll(async () => {
    conn = await connect(db.name, { appName: APP });
    admin = await connect(db.name);
    M = await workItemModel(conn.connection, { ttl: 30_000 }, 'LateBackoff');
  });

  afterAll(async () => {
    await failPointOff(admin.connection);
    await db.drop(admin.connection);
    await Promise.all([conn.close(), admin.close()]);
  });

  test('backs off between rounds instead of asking again at once', async () => {
    const { _id: id } = await M.create({ title: 'slow grants' });
    const namespace = `${db.name}.${M.lockModel().collection.collectionName}`;
    // Every grant of this client is held 20 ms, longer than its 10 ms ttl.
    await blockCommands(admin.connection, { appName: APP, namespace, commands: ['findAndModify'], blockTimeMS: 20, times: 10_000 });
    conn.resetCommands();
    const error = await M.lock(id, 'alice', { ttl: 10, wait: 2_000 }).catch((e: unknown) => e);
    await failPointOff(admin.connection);
    const grants = conn.commands.filter((name) => name === 'findAndModify').length;
    process.stdout.write(`late-grants-back-off: ${grants} grants asked for in a 2 s wait\n`);
    expect(error).toBeInstanceOf(LockExpiredOnArrivalError);
    // Without a pause: a grant every ~25 ms for 2 s (about 80). With the
    // backoff (at least half of 20 ms doubling, 3 grants of >= 20 ms per round): at most 8 rounds fit in 2 s, 24 grants.
    expect(grants).toBeLessThanOrEqual(27);
    expect(await M.isLocked(id)).toBe(false);
  }, 30_000);
});
