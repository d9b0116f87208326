/**
 * Attack: PRODUCT.md property 10 ("writes to documents nobody has locked succeed as they would
 * without the plugin") on a connection whose read preference is not primary, a common setting
 * for read scaling (issue 8 made every lock read go to the primary; the guard was not covered).
 *
 * On a replica set the query guard and the bulkWrite guard start their own transaction with
 * `session.startTransaction()` and no options, so the transaction inherits the client's read
 * preference; a transaction may only read from the primary (transactions spec: "Transactions may
 * only read from the primary"), and the guard's target search inside it is refused. Every guarded
 * write then fails, although nobody holds a lock and the same write succeeds without the plugin.
 */
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { replicaSetOnly } from '../support/topology';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('atk_guardreadpref');
let conn: MonitoredConnection;
let M: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name, { readPreference: 'secondaryPreferred' });
  M = await workItemModel(conn.connection, { ttl: 10_000 });
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

const describeError = (error: unknown) => `${(error as Error).name}: ${(error as Error).message}`.slice(0, 160);

replicaSetOnly('the guard uses transactions only on replica sets')('updateOne and bulkWrite on an unlocked document succeed on a connection that prefers secondaries', async () => {
  const { _id: id } = await M.create({ title: 'nobody locks me' });
  const update = await M.updateOne({ _id: id }, { $set: { status: 'done' } }).exec().then(() => 'ok', describeError);
  const bulk = await M.bulkWrite([{ updateOne: { filter: { _id: id }, update: { $set: { title: 'bulk' } } } }]).then(() => 'ok', describeError);
  const item = await M.lock(id, 'alice');
  item.title = 'saved and unlocked';
  const saveAndUnlock = await item.saveAndUnlock().then(() => 'ok', describeError);
  const control = await M.updateOne({ _id: id }, { $set: { edits: 1 } }).setOptions({ skipLockCheck: true }).exec().then(() => 'ok', describeError);
  expect({ update, bulk, saveAndUnlock, control }).toEqual({ update: 'ok', bulk: 'ok', saveAndUnlock: 'ok', control: 'ok' });
});
