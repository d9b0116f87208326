/**
 * A hand-made unique index on a lock collection is told as a LockConfigurationError by a group
 * acquisition too (lockMany, acquireLocks, lockAll), whatever the index is called: the group's
 * `update` is a bulk write, whose write errors lose `keyPattern` in the driver (mongodb
 * lib/bulk/common.js mergeBatchResults keeps index, code, errmsg, errInfo, op), so
 * LockStore.takeGroup (src/lock-store.ts, foreignIndexOf) tells the index by the name in mongod's
 * message, and a duplicate on `_id` (an upsert that lost an insert race, R25) by that name being
 * `_id_`.
 *
 * mongod's message (buildDupKeyErrorStatus, src/mongo/db/storage/index_entry_comparison.cpp, 6.0
 * and later): "E11000 duplicate key error collection: <ns> index: <name>[ collation: <c>] dup key: ...".
 * mongod reserves only the exact name `_id_` (and `*`) for the `_id` index
 * (src/mongo/db/catalog/index_key_validate.cpp: "The index name '_id_' is reserved for the _id
 * index"; any other string is a valid name, spaces included). foreignIndexOf took every name that
 * merely STARTS with "_id_ " for the `_id` index (`index.startsWith('_id_ ')`): a unique
 * `{ owner: 1 }` index named "_id_ per owner" was then counted as an insert race, the group was
 * refused as if a document were locked (LockedError naming no blocker) and the configuration
 * fault was never told. The single-lock path reads `keyPattern` (a findAndModify's error keeps
 * it) and is not affected.
 * Runs on a replica set and on a standalone server.
 */
import type { Connection } from 'mongoose';
import { LockConfigurationError } from '../../src';
import { connect, operatorConnection, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('groupforeignnames');
let conn: MonitoredConnection;
let operator: Connection;

beforeAll(async () => {
  conn = await connect(db.name);
  operator = await operatorConnection(db.name);
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
  await operator.close();
});

let counter = 0;
/** A model whose lock collection carries a hand-made unique index, partial on held records. */
async function withIndex(key: Record<string, 1>, name: string): Promise<WorkItemModel> {
  const M = await workItemModel(conn.connection, { ttl: 30_000 }, `GroupIndexName${++counter}`);
  await operator.db!.collection(M.lockModel().collection.collectionName).createIndex(key, { unique: true, name, partialFilterExpression: { owner: { $type: 'string' } } });
  return M;
}

async function heldRecords(M: WorkItemModel): Promise<number> {
  return operator.db!.collection(M.lockModel().collection.collectionName).countDocuments({ token: { $type: 'string' }, $expr: { $gt: ['$expiresAt', '$$NOW'] } });
}

const outcome = (promise: Promise<unknown>) =>
  promise.then(
    () => ({ error: 'none', message: '' }),
    (e: Error) => ({ error: e.constructor.name, message: e.message }),
  );

test.each([
  ['a name that starts with "_id_ " (not the _id index: mongod reserves only "_id_")', '_id_ per owner'],
  ['a name of "_id_" and more, no space', '_id_owner'],
  ['quotes, a colon and non-ASCII', 'owner "ü": one'],
  ['a dot and a dollar', 'owner.$u'],
])('lockMany: unique { owner: 1 } named with %s: LockConfigurationError naming it, nothing held', async (_what, name) => {
  const M = await withIndex({ owner: 1 }, name);
  const [a, b] = await M.create([{ title: 'a' }, { title: 'b' }]);
  const got = await outcome(M.lockMany([a._id, b._id], 'alice'));
  expect(got.error).toBe(LockConfigurationError.name);
  expect(got.message).toContain(JSON.stringify(name));
  expect(await heldRecords(M)).toBe(0);
});

test('lockMany: a compound unique index that starts with owner is told too', async () => {
  const M = await withIndex({ owner: 1, ttl: 1 }, 'owner_ttl_u');
  const [a, b] = await M.create([{ title: 'a' }, { title: 'b' }]);
  const got = await outcome(M.lockMany([a._id, b._id], 'bob'));
  expect(got.error).toBe(LockConfigurationError.name);
  expect(got.message).toContain('"owner_ttl_u"');
  expect(await heldRecords(M)).toBe(0);
});

test('the single-lock path with an index named "_id_ per owner": LockConfigurationError too (keyPattern)', async () => {
  const M = await withIndex({ owner: 1 }, '_id_ per owner, single');
  const [a, b] = await M.create([{ title: 'a' }, { title: 'b' }]);
  await M.lock(a._id, 'carol');
  const got = await outcome(M.lock(b._id, 'carol'));
  expect(got.error).toBe(LockConfigurationError.name);
  await M.forceUnlock(a._id);
});

test("a duplicate on the _id index itself (an upsert that lost an insert race) is no configuration error: the round is refused and retried", async () => {
  const M = await workItemModel(conn.connection, { ttl: 30_000 }, `GroupIndexName${++counter}`);
  const [a, b] = await M.create([{ title: 'a' }, { title: 'b' }]);
  await (await M.lock(a._id, 'dave')).unlock(); // a's lock record exists now
  // The first group `update` is answered as a lost insert race on `_id` is: a write error with
  // mongod's own message for the `_id_` index, produced here by the server itself (an insert of a's
  // existing record), since one server cannot be made to lose that race on demand. The driver's
  // error is the one the plugin's own driver throws (Mongoose's `mongo`, one driver for both).
  const locks = M.lockModel().collection as unknown as { bulkWrite: (...args: unknown[]) => Promise<unknown> };
  const original = locks.bulkWrite;
  let raced = 0;
  locks.bulkWrite = async function lostRace(this: unknown, ...args: unknown[]) {
    if (raced++ > 0) return original.apply(this, args);
    // Through the operator's connection: not a command of the plugin's.
    return operator.db!.collection(M.lockModel().collection.collectionName).bulkWrite([{ insertOne: { document: { _id: a._id } } }], { ordered: false });
  };
  try {
    const docs = await M.lockMany([a._id, b._id], 'dave');
    expect(raced).toBe(2);
    expect(docs.map((d) => String(d._id))).toEqual([String(a._id), String(b._id)]);
    await M.unlockMany(docs);
  } finally {
    locks.bulkWrite = original;
  }
});
