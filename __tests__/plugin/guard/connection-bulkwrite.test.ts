/**
 * `connection.bulkWrite()` (Mongoose 8.9+ / 9: the driver's client-level `bulkWrite`, MongoDB
 * 8.0+) bypasses every collection method, so the README refuses it for guarded models (Write
 * paths; PRODUCT.md property 6). The refusal was installed only on the connection the guarded
 * model was compiled on, while Mongoose accepts a Model object from anywhere as an operation's
 * `model` and sends it through whichever connection `bulkWrite` is called on: through
 * `conn.useDb(...)` or any other connection the operation was sent (on MongoDB 8.0+ it writes the
 * locked document; the emulator answers NotImplemented). The refusal now sits on
 * Connection.prototype.bulkWrite, for every connection. Operations on models without the plugin
 * still go through. (Found by the attack run,
 * `__tests__/attack/connection-bulkwrite-elsewhere.test.ts`.)
 */
import mongoose from 'mongoose';
import { InvalidLockArgumentError } from '../../../src';
import { connect, testDatabase, type MonitoredConnection } from '../../support/db';
import { workItemModel, type WorkItemModel } from '../../support/work-item';
import { outcome, rawCollection } from './support';

const db = testDatabase('connbulk');
let conn: MonitoredConnection;
let second: MonitoredConnection;
let M: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  second = await connect(db.name);
  M = await workItemModel(conn.connection, { ttl: 30_000 });
});

afterAll(async () => {
  await db.drop(conn.connection);
  await Promise.all([conn.close(), second.close()]);
});

type BulkConnection = { bulkWrite?: (ops: unknown[], options?: unknown) => Promise<unknown> };

const via: [string, () => BulkConnection][] = [
  ['the connection the model was compiled on (control)', () => conn.connection as unknown as BulkConnection],
  ['conn.useDb(same database)', () => conn.connection.useDb(db.name) as unknown as BulkConnection],
  ['conn.useDb(another database), same client', () => conn.connection.useDb(`${db.name}_other`) as unknown as BulkConnection],
  ['another connection to the same deployment', () => second.connection as unknown as BulkConnection],
];

const hasConnectionBulkWrite = typeof (mongoose.Connection.prototype as unknown as BulkConnection).bulkWrite === 'function';

(hasConnectionBulkWrite ? test.each(via) : test.skip.each(via))('%s: bulkWrite with an operation on the guarded model is refused', async (_name, connection) => {
  const { _id: id } = await M.create({ title: 'held by B' });
  await M.lock(id, 'holder-b');
  const result = await outcome(
    connection().bulkWrite!([{ model: M, name: 'updateOne', filter: { _id: id }, update: { $set: { title: 'written by A' } } }]),
  );
  expect((await rawCollection(M).findOne({ _id: id }))?.title).toBe('held by B');
  expect(result.ok).toBe(false);
  expect((result as { error: unknown }).error).toBeInstanceOf(InvalidLockArgumentError);
});

(hasConnectionBulkWrite ? test : test.skip)('an operation on a model without the plugin is not refused, on any connection', async () => {
  const Plain = second.connection.model('PlainForConnectionBulkWrite', new mongoose.Schema({ title: String }));
  for (const connection of [conn.connection, second.connection, conn.connection.useDb(db.name)]) {
    const result = await outcome(
      (connection as unknown as BulkConnection).bulkWrite!([{ model: Plain, name: 'insertOne', document: { title: 'plain' } }]),
    );
    // Sent (a server without client-level bulkWrite, like the emulator, answers with its own error).
    if (!result.ok) expect((result as { error: unknown }).error).not.toBeInstanceOf(InvalidLockArgumentError);
  }
});
