/**
 * `lockAll` refuses a document listed twice before anything is sent (InvalidLockArgumentError
 * naming both positions), as `lockMany` does. lock-all.ts told "one document" by the lock model
 * (one per connection and lock collection): the same document reached through two connections
 * (two models bound to one collection on different connections, or one model name on two
 * connections to one database) was two targets. The group then took the one lock record twice in
 * two commands under one token, the second raising its fence, and handed out two instances of
 * one document, one of them with a fence the record no longer has.
 * A document is one by its database name, its collection name and its `_id` (by BSON value, as
 * mongod's `_id` index tells them: id-key.ts); its lock is one by the lock collection's database
 * and name and the `_id`.
 * Runs on a replica set and on a standalone server.
 */
import { Types } from 'mongoose';
import { InvalidLockArgumentError, lockAll } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('lockall_two_conns');
const otherDb = testDatabase('lockall_two_conns_other');
let first: MonitoredConnection;
let second: MonitoredConnection;
let elsewhere: MonitoredConnection;
/** One model name on two connections to one database. */
let A1: WorkItemModel;
let A2: WorkItemModel;
/** Another model name bound to A's collection, on the second connection. */
let B2: WorkItemModel;
/** A's model name and collection in another database. */
let A3: WorkItemModel;

beforeAll(async () => {
  [first, second, elsewhere] = await Promise.all([connect(db.name), connect(db.name), connect(otherDb.name)]);
  A1 = await workItemModel(first.connection, { ttl: 20_000 }, 'TwoConnItem');
  A2 = await workItemModel(second.connection, { ttl: 20_000 }, 'TwoConnItem');
  A3 = await workItemModel(elsewhere.connection, { ttl: 20_000 }, 'TwoConnItem');
  const schema = A1.schema.clone();
  B2 = second.connection.model('TwoConnAlias', schema, A1.collection.collectionName) as unknown as WorkItemModel;
  await B2.init();
  for (const M of [A1, A2, A3, B2]) await M.lockModel().init();
});

afterAll(async () => {
  await db.drop(first.connection);
  await otherDb.drop(elsewhere.connection);
  await Promise.all([first.close(), second.close(), elsewhere.close()]);
});

/** Calls `fn` and returns what it rejected with, and the commands the three connections sent meanwhile. */
async function refused(fn: () => Promise<unknown>): Promise<{ error: unknown; sent: string[] }> {
  for (const c of [first, second, elsewhere]) c.resetCommands();
  const error = await fn().then(() => 'resolved', (e: unknown) => e);
  return { error, sent: [...first.commands, ...second.commands, ...elsewhere.commands] };
}

test('the same model name on two connections to one database: refused as one document, nothing sent', async () => {
  const { _id: id } = await A1.create({ title: 'one document' });
  const { error, sent } = await refused(() => lockAll([[A1, id], [A2, id]], 'alice'));
  expect(error).toBeInstanceOf(InvalidLockArgumentError);
  expect((error as Error).message).toContain('targets[0] and targets[1] are the same document');
  expect(sent).toEqual([]);
  expect(await A1.isLocked(id)).toBe(false);
});

test('two model names bound to one collection on different connections: refused, nothing sent', async () => {
  const { _id: id } = await A1.create({ title: 'one document' });
  const other = await A1.create({ title: 'another' });
  const { error, sent } = await refused(() => lockAll([[A1, other._id], [B2, id], [A1, String(id)]], 'bob'));
  expect(error).toBeInstanceOf(InvalidLockArgumentError);
  expect((error as Error).message).toContain('targets[1] and targets[2] are the same document');
  expect(sent).toEqual([]);
});

test('the same collection and _id in another database is another document: locked together', async () => {
  const id = new Types.ObjectId();
  await A1.create({ _id: id, title: 'here' });
  await A3.create({ _id: id, title: 'there' });
  const [here, there] = await lockAll([[A1, id], [A3, id]], 'carol');
  expect([here.title, there.title]).toEqual(['here', 'there']);
  await Promise.all([here.unlock(), there.unlock()]);
});
