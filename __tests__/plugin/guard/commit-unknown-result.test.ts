/**
 * PRODUCT.md property 10 (guarded writes to unlocked documents succeed as they would without the
 * plugin), for the guard's commit retry (transaction.ts: "a commit that fails with
 * UnknownTransactionCommitResult is retried as a commit").
 *
 * The guard's commit executes on the server but its reply carries a write concern error
 * (`failCommand` with `writeConcernError`, which runs the command and then attaches the error:
 * src/mongo/db/commands.cpp, `CommandHelpers::evaluateFailCommandFailPoint` / the
 * `writeConcernError` branch). The driver labels such a commit UnknownTransactionCommitResult
 * (transactions spec, "Retrying commitTransaction"); the guard commits again. A `$inc` must be
 * applied exactly once, and the write must report success.
 * (Coverage written by the attack on the guard; it passed.)
 */
import { deploymentFacts, describeIf } from '../../conformance/support/server';
import { connect, testDatabase, type MonitoredConnection } from '../../support/db';
import { workItemModel, type WorkItemModel } from '../../support/work-item';
import { failPointOff, outcome, rawCollection } from './support';
import { usesPrivateServer } from '../../support/private-server';

// This file configures failCommand: on a server of its own where it can (support/private-server.ts).
usesPrivateServer();

const db = testDatabase('guard_commitunknown');
const APP = `mpl-guard-commit-${process.pid}`;
let conn: MonitoredConnection;
let admin: MonitoredConnection;
let M: WorkItemModel;

describeIf(deploymentFacts().setName !== undefined && deploymentFacts().failPoints, 'needs a replica set and fail points')('commit with an unknown result', () => {
  beforeAll(async () => {
    conn = await connect(db.name, { appName: APP });
    admin = await connect(db.name);
    M = await workItemModel(conn.connection, { ttl: 30_000 });
  });

  afterAll(async () => {
    await failPointOff(admin.connection);
    await db.drop(admin.connection);
    await Promise.all([conn.close(), admin.close()]);
  });

  test.each([
    ['updateOne by _id', (id: unknown) => M.updateOne({ _id: id }, { $inc: { edits: 1 } }).exec()],
    ['updateMany by a field', () => M.updateMany({ title: 'counter' }, { $inc: { edits: 1 } }).exec()],
    ['bulkWrite', (id: unknown) => M.bulkWrite([{ updateOne: { filter: { _id: id as never }, update: { $inc: { edits: 1 } } } }])],
  ] as [string, (id: unknown) => Promise<unknown>][])('%s: $inc applied once after a commit retried on UnknownTransactionCommitResult', async (_name, write) => {
    await rawCollection(M).deleteMany({});
    const { _id: id } = await M.create({ title: 'counter', edits: 0 });
    await admin.connection.getClient().db('admin').command({
      configureFailPoint: 'failCommand',
      mode: { times: 1 },
      data: { failCommands: ['commitTransaction'], appName: APP, writeConcernError: { code: 64, codeName: 'WriteConcernFailed', errmsg: 'waiting for replication timed out', errInfo: { wtimeout: true } } },
    });
    conn.resetCommands();
    const result = await outcome(write(id));
    const commits = conn.commands.filter((name) => name === 'commitTransaction').length;
    await failPointOff(admin.connection);
    expect(result.ok ? 'ok' : String((result as { error: unknown }).error)).toBe('ok');
    expect((await rawCollection(M).findOne({ _id: id }))?.edits).toBe(1);
    expect(commits).toBeGreaterThanOrEqual(2); // the fail point fired and the commit was retried
  });
});
