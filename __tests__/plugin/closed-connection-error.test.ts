/**
 * A connection the application closed itself (`connection.close(true)`, a shutdown that began) is
 * not a database fault: Mongoose refuses every operation on it with its own
 * `MongooseError: Connection was force closed`, and the plugin passes that error through unchanged
 * (docs/api.md, Errors: "Passed through unchanged: Mongoose's own errors"), as `Model.findOne`
 * would answer, before any command is sent. Nothing is half-done: no lock is taken, none released.
 */
import { MongooseError } from 'mongoose';
import { LockError } from '../../src';
import { connect, testDatabase } from '../support/db';
import { workItemModel } from '../support/work-item';

const db = testDatabase('closed_conn');

test('lock calls on a connection the app force-closed reject with Mongoose\'s own error, as findOne does, sending nothing', async () => {
  const observer = await connect(db.name);
  const conn = await connect(db.name);
  const WorkItem = await workItemModel(conn.connection, { ttl: 5_000 }, 'ClosedConnItem');
  const held = await WorkItem.create({ title: 'held' });
  await WorkItem.lock(held._id, 'alice');
  await conn.connection.close(true);
  conn.resetCommands();
  const outcomes = await Promise.all([
    WorkItem.findOne({ _id: held._id }).then(() => 'resolved', (e: unknown) => e),
    WorkItem.lock(held._id, 'bob').then(() => 'resolved', (e: unknown) => e),
    WorkItem.tryLock(held._id, 'bob').then(() => 'resolved', (e: unknown) => e),
    WorkItem.releaseAllFor('alice').then(() => 'resolved', (e: unknown) => e),
  ]);
  for (const outcome of outcomes) {
    expect(outcome).toBeInstanceOf(MongooseError);
    expect(outcome).not.toBeInstanceOf(LockError);
    expect((outcome as Error).message).toBe((outcomes[0] as Error).message);
  }
  expect(conn.commands).toEqual([]);
  // alice's lock is untouched on the server.
  const Observed = await workItemModel(observer.connection, { ttl: 5_000 }, 'ClosedConnItem');
  expect(await Observed.isLocked(held._id)).toBe(true);
  await Observed.forceUnlock(held._id);
  await db.drop(observer.connection);
  await observer.close();
  await conn.close().catch(() => undefined);
});
