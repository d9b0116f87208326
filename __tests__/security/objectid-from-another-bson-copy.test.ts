/**
 * An ObjectId made by ANOTHER copy of js-bson (an application that bundles its own `bson`, or
 * loads the driver twice) fails the plain-ObjectId shortcut's prototype check (id-key.ts,
 * plainObjectIdArray: `Object.getPrototypeOf(id) !== mongo.ObjectId.prototype`) and is judged by
 * what the driver's serializer makes of it (id-value.ts, freshId): the same bytes lock the same
 * document, and a copy whose instance carries a query (`toBSON`, `_bsontype: undefined` with an
 * enumerable `$ne`) is refused before anything is sent, as for the driver's own class
 * (objectid-fast-path-forgeries.test.ts).
 *
 * The other copy is the driver's own `bson` package loaded a second time in an isolated module
 * registry (jest.isolateModules): a separate class with the same version tag, as two installed
 * copies of one major are (a nested `bson` of the app's own, pnpm layouts).
 *
 * Mongoose itself takes such an id as an ObjectId (lib/cast/objectid.js: `isBsonType(value,
 * 'ObjectId')` reads `_bsontype`), and so does the driver's serializer (same version tag). On perf2
 * (and before) the plugin refuses it before sending anything, with the message "expected the
 * document's _id (an ObjectId, string or number), got a ObjectId": arguments.ts claimedTypes asks
 * `value instanceof Types.ObjectId`, a class check, although docs/api.md says an id "is judged by
 * what it serializes to, not by its class". The forged variants are refused (those cases hold).
 */
import * as path from 'node:path';
import { Types, mongo } from 'mongoose';
import { InvalidLockArgumentError } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('oidothercopy');
let conn: MonitoredConnection;
let WorkItem: WorkItemModel;

// Typed as the driver's ObjectId (it is one to the caller: another copy of the same class).
type ObjectIdClass = new (hex?: string) => Types.ObjectId;
let Foreign: ObjectIdClass;

beforeAll(async () => {
  conn = await connect(db.name);
  WorkItem = await workItemModel(conn.connection);
  // The js-bson the driver itself uses (Mongoose 9: 7.x, Mongoose 8: 6.x), loaded once more.
  // Mongoose's own driver (Mongoose 8 may have its own nested mongodb 6 beside the project's 7).
  const driver = require.resolve('mongodb', { paths: [path.dirname(require.resolve('mongoose'))] });
  const driverBson = require.resolve('bson', { paths: [path.dirname(driver)] });
  jest.isolateModules(() => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    Foreign = (require(driverBson) as { ObjectId: ObjectIdClass }).ObjectId;
  });
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

test('the other copy is another class, serialized by the driver as the same ObjectId', () => {
  const hex = new Types.ObjectId().toHexString();
  const foreign = new Foreign(hex);
  expect(foreign).not.toBeInstanceOf(mongo.ObjectId);
  const bytes = mongo.BSON.serialize({ v: foreign } as mongo.Document);
  expect(bytes[4]).toBe(0x07);
  expect(Buffer.from(bytes.subarray(7, 19)).toString('hex')).toBe(hex);
});

test('Model.lock, isLocked, unlock and lockMany with an ObjectId of the other copy work on the document of those bytes', async () => {
  const { _id: id } = await WorkItem.create({ title: 'foreign class' });
  const foreign = new Foreign(id.toHexString());
  // What Mongoose makes of it: the document of those bytes.
  expect((await WorkItem.findById(foreign).orFail())._id.toHexString()).toBe(id.toHexString());
  const doc = await WorkItem.lock(foreign, 'alice');
  expect(doc._id.toHexString()).toBe(id.toHexString());
  expect(await WorkItem.isLocked(foreign)).toBe(true);
  expect(await WorkItem.isLocked(id)).toBe(true);
  await doc.unlock();
  const [again] = await WorkItem.lockMany([foreign], 'alice');
  expect(again!._id.toHexString()).toBe(id.toHexString());
  await expect(WorkItem.unlock(foreign, 'alice')).resolves.toBe(true);
  expect(await WorkItem.isLocked(id)).toBe(false);
});

test.each([
  ['with an own toBSON returning a query', (hex: string) => Object.assign(new Foreign(hex), { toBSON: () => ({ $ne: null }) })],
  [
    'with an own `_bsontype: undefined` and an enumerable $ne',
    (hex: string) => Object.defineProperties(new Foreign(hex), { _bsontype: { value: undefined }, $ne: { value: null, enumerable: true } }),
  ],
])('an ObjectId of the other copy %s is refused with InvalidLockArgumentError before any command', async (_name, make) => {
  const { _id: id } = await WorkItem.create({ title: 'forged foreign' });
  const other = await WorkItem.lock(id, 'bob');
  conn.resetCommands();
  for (const call of [() => WorkItem.lock(make(id.toHexString()), 'mallory'), () => WorkItem.forceUnlock(make(id.toHexString())), () => WorkItem.isLocked(make(id.toHexString()))]) {
    await expect(call()).rejects.toBeInstanceOf(InvalidLockArgumentError);
  }
  expect(conn.commands).toEqual([]);
  expect(other.heldLock()?.owner).toBe('bob');
  await other.unlock();
});
