/**
 * A unique index made by hand on a lock collection (a unique `{ owner: 1 }`: "one lock per owner")
 * makes the lock records of different documents collide. The single-lock path tells it as the
 * configuration fault it is (LockStore.acquire, foreignUniqueIndex: LockConfigurationError;
 * __tests__/regressions/foreign-unique-index-typed-error.test.ts); a group (`lockMany`,
 * `acquireLocks`, `lockAll`) must too, having released everything the call took.
 *
 * LockStore.takeGroup (src/lock-store.ts) counted every duplicate-key write error of its `update`
 * as "not taken" (an `_id` upsert that lost an insert race, R25), so the group was refused as if a
 * document were locked: LockedError naming no blocker after three quick rounds, or, with `wait`,
 * rounds repeated until the deadline, and never a word about the index. The driver drops the
 * write error's `keyPattern` (mongodb/lib/bulk/common.js mergeBatchResults keeps index, code,
 * errmsg, errInfo and op), so the index is told by the name in mongod's message.
 *
 * What the call took is released by its token, as after any fault. A unique index on a field the
 * release writes (`owner` is set to null) can refuse that release too once another released
 * record exists: then the lock stays until its ttl, as after any failed release (lock-group.ts),
 * and the caller still gets the configuration error. Someone who wants "one lock per owner" makes
 * the index partial on held records (`owner` a string), which releases pass; most tests use that.
 * lockGroup's round (src/lock-group.ts) also released as soon as the first lock collection's
 * command failed (Promise.all), while another lock collection's command could still be on its
 * way: a statement applied after that release stayed held until its ttl. The last test holds that
 * command back on the server (failCommand blockConnection, src/mongo/db/commands/fail_point_cmd.cpp;
 * `data.namespace`, mode `times`).
 * Runs on a replica set and on a standalone server.
 */
import type { Connection } from 'mongoose';
import { LockConfigurationError, lockAll } from '../../src';
import { connect, operatorConnection, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { usesPrivateServer } from '../support/private-server';
import { workItemModel, type WorkItemModel } from '../support/work-item';

// One test holds the other lock collection's acquisition back with failCommand's blockConnection.
usesPrivateServer();

const db = testDatabase('groupforeignunique');
let conn: MonitoredConnection;
let operator: Connection;
/** Its lock collection carries a hand-made unique { owner: 1 }, partial on held records. */
let Unique: WorkItemModel;
/** Its lock collection carries a hand-made unique { owner: 1 } over every record. */
let Total: WorkItemModel;
/** A model with a plain lock collection. */
let Plain: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  operator = await operatorConnection(db.name);
  Unique = await workItemModel(conn.connection, { ttl: 30_000 }, 'GroupUniqueOwner');
  Plain = await workItemModel(conn.connection, { ttl: 30_000 }, 'GroupUniquePlain');
  Total = await workItemModel(conn.connection, { ttl: 30_000 }, 'GroupUniqueOwnerTotal');
  await operator.db!.collection(Unique.lockModel().collection.collectionName).createIndex({ owner: 1 }, { unique: true, name: 'owner_u', partialFilterExpression: { owner: { $type: 'string' } } });
  await operator.db!.collection(Total.lockModel().collection.collectionName).createIndex({ owner: 1 }, { unique: true, name: 'owner_total' });
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
  await operator.close();
});

/** Lock records that are held now, read without the plugin. */
async function heldRecords(M: WorkItemModel): Promise<number> {
  return operator.db!.collection(M.lockModel().collection.collectionName).countDocuments({ token: { $type: 'string' }, $expr: { $gt: ['$expiresAt', '$$NOW'] } });
}

const reject = (promise: Promise<unknown>) => promise.then(() => 'resolved', (e: unknown) => e);

test('lockMany of two documents for one owner: LockConfigurationError naming the index, and nothing held', async () => {
  const [a, b] = await Unique.create([{ title: 'a' }, { title: 'b' }]);
  const error = await reject(Unique.lockMany([a._id, b._id], 'alice'));
  expect(error).toBeInstanceOf(LockConfigurationError);
  expect((error as Error).message).toMatch(/owner_u/);
  expect(await heldRecords(Unique)).toBe(0);
});

test('a unique index over every record: the same error, the first time with nothing held; later releases collide on owner null too', async () => {
  const [a, b, c, d] = await Total.create([{ title: 'a' }, { title: 'b' }, { title: 'c' }, { title: 'd' }]);
  const first = await reject(Total.lockMany([a._id, b._id], 'alice'));
  expect(first).toBeInstanceOf(LockConfigurationError);
  expect((first as Error).message).toMatch(/owner_total/);
  expect(await heldRecords(Total)).toBe(0);
  // A released record (owner null) now exists: the release of the next call's first lock collides with it.
  const second = await reject(Total.lockMany([c._id, d._id], 'bob', { ttl: 1_000 }));
  expect(second).toBeInstanceOf(LockConfigurationError);
});

test('with wait: refused at once with the same error (no rounds until the deadline)', async () => {
  const [a, b] = await Unique.create([{ title: 'a' }, { title: 'b' }]);
  const error = await reject(Unique.lockMany([a._id, b._id], 'bob', { wait: 5_000 }));
  expect(error).toBeInstanceOf(LockConfigurationError);
  expect(await heldRecords(Unique)).toBe(0);
}, 30_000);

test('acquireLocks: the same error', async () => {
  const [a, b] = await Unique.create([{ title: 'a' }, { title: 'b' }]);
  const error = await reject(Unique.acquireLocks([a._id, b._id], 'carol', { autoExtend: false }));
  expect(error).toBeInstanceOf(LockConfigurationError);
  expect(await heldRecords(Unique)).toBe(0);
});

test('lockAll across two lock collections: the same error, and the other collection\'s locks released too', async () => {
  const [a, b] = await Unique.create([{ title: 'a' }, { title: 'b' }]);
  const [c, d] = await Plain.create([{ title: 'c' }, { title: 'd' }]);
  const error = await reject(
    lockAll(
      [
        [Plain, c._id],
        [Unique, a._id],
        [Plain, d._id],
        [Unique, b._id],
      ],
      'dave',
    ),
  );
  expect(error).toBeInstanceOf(LockConfigurationError);
  expect(await heldRecords(Unique)).toBe(0);
  expect(await heldRecords(Plain)).toBe(0);
  // Nothing of that call stays: another owner gets the plain documents at once.
  const docs = await Plain.lockMany([c._id, d._id], 'erin');
  await Plain.unlockMany(docs);
});

test("lockAll: the other lock collection's acquisition, held back on the server, is released after it applied", async () => {
  const [a, b] = await Unique.create([{ title: 'a' }, { title: 'b' }]);
  const [c] = await Plain.create([{ title: 'c' }]);
  const admin = operator.getClient().db('admin');
  // Every `update` of the plain lock collection answered (the held-back acquisition, and the release).
  const plainLocks = Plain.lockModel().collection.collectionName;
  let answered = 0;
  const sent = new Set<number>();
  const count = (event: { commandName: string; requestId: number }) => {
    if (event.commandName === 'update' && sent.has(event.requestId)) answered++;
  };
  const started = (event: { commandName: string; requestId: number; command: Record<string, unknown> }) => {
    if (event.commandName === 'update' && event.command.update === plainLocks) sent.add(event.requestId);
  };
  const client = conn.connection.getClient();
  client.on('commandStarted', started);
  client.on('commandSucceeded', count);
  client.on('commandFailed', count);
  await admin.command({
    configureFailPoint: 'failCommand',
    mode: { times: 1 },
    data: { failCommands: ['update'], namespace: `${db.name}.${Plain.lockModel().collection.collectionName}`, blockConnection: true, blockTimeMS: 600 },
  });
  try {
    const error = await reject(
      lockAll(
        [
          [Plain, c._id],
          [Unique, a._id],
          [Unique, b._id],
        ],
        'frank',
      ),
    );
    expect(error).toBeInstanceOf(LockConfigurationError);
    // The release must not be answered before the held-back acquisition applied: wait for both.
    for (const deadline = Date.now() + 20_000; answered < 2 && Date.now() < deadline; ) await sleep(50);
    expect(answered).toBe(2);
  } finally {
    client.off('commandStarted', started);
    client.off('commandSucceeded', count);
    client.off('commandFailed', count);
    await admin.command({ configureFailPoint: 'failCommand', mode: 'off' });
  }
  expect(await heldRecords(Plain)).toBe(0);
  expect(await heldRecords(Unique)).toBe(0);
});
