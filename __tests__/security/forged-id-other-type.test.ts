/**
 * An id is judged by what it serializes to (issue 16 item 5, README "Statics": "an object that
 * passes `instanceof ObjectId` but serializes to anything other than an ObjectId ... is refused").
 *
 * freshId (src/id-value.ts) accepts any scalar BSON type (string, number, Date, ...) whatever the
 * schema's `_id` type, and idCaster returns that value. So on an ObjectId model, an ObjectId
 * look-alike whose `toBSON()` returns a string, a number or a Date passes: `lock()` upserts a lock
 * record with a string `_id` in the lock collection of an ObjectId model, then `findById` throws a
 * raw Mongoose CastError (not a LockError), after a findAndModify and a release were sent; the
 * other entry points send their command with the wrong-typed id. Property 7: bad input gets a
 * clear typed error before anything touches the database.
 */
import { Types, type Connection } from 'mongoose';
import { InvalidLockArgumentError } from '../../src';
import { connect, operatorConnection, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('forgedidtype');
let conn: MonitoredConnection;
let WorkItem: WorkItemModel;
/** Reads the lock collection without being recorded as one of the plugin's commands. */
let operator: Connection;

beforeAll(async () => {
  conn = await connect(db.name);
  operator = await operatorConnection(db.name);
  WorkItem = await workItemModel(conn.connection);
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
  await operator.close();
});

/** Passes `instanceof ObjectId`; serializes to `value`, a scalar that is not an ObjectId. */
function serializingTo(value: unknown): Types.ObjectId {
  return Object.assign(Object.create(Types.ObjectId.prototype) as Types.ObjectId, { toBSON: () => value });
}

const disguises: [string, unknown][] = [
  ['a string', 'not-an-object-id'],
  ['a number', 12345],
  ['a Date', new Date(0)],
];

const calls: [string, (id: Types.ObjectId) => Promise<unknown>][] = [
  ['lock', (id) => WorkItem.lock(id, 'mallory')],
  ['tryLock', (id) => WorkItem.tryLock(id, 'mallory')],
  ['withLock', (id) => WorkItem.withLock(id, 'mallory', () => 1)],
  ['unlock', (id) => WorkItem.unlock(id, 'mallory')],
  ['isLocked', (id) => WorkItem.isLocked(id)],
  ['getLock', (id) => WorkItem.getLock(id)],
  ['forceUnlock', (id) => WorkItem.forceUnlock(id)],
  ['lockStatus', (id) => WorkItem.lockStatus([id])],
];

describe.each(disguises)('an ObjectId look-alike that serializes to %s', (_label, value) => {
  test.each(calls)('%s refuses it with InvalidLockArgumentError before sending anything', async (_name, call) => {
    conn.resetCommands();
    const error = await call(serializingTo(value)).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(InvalidLockArgumentError);
    expect((error as InvalidLockArgumentError).argument).toBe('id');
    expect(conn.commands).toEqual([]);
  });
});

test('no lock record with a non-ObjectId _id is ever written to the lock collection of an ObjectId model', async () => {
  await WorkItem.lock(serializingTo('stray'), 'mallory').catch(() => undefined);
  const stray = await operator.db!.collection(WorkItem.lockModel().collection.collectionName).findOne({ _id: 'stray' } as never);
  expect(stray).toBeNull();
});
