/**
 * Property 6 (writes by non-holders to a locked document are rejected on every guarded path) and
 * property 10 (writes nobody's lock concerns behave as without the plugin), for filters the server
 * evaluates again at the write: `$expr` with `$$NOW`, `$rand`, `$sampleRate`, or any document that
 * changes between the guard's search and the write. The write the guard sends is narrowed to
 * exactly the `_id`s it searched and checked (none: it touches nothing), on every path (single-
 * document writes, updateMany / deleteMany sent as one write, each bulkWrite operation, upserts),
 * so the re-evaluated filter can never select a document someone else holds.
 *
 * First block: document L (locked by B) has a deadline a moment ahead by the server's clock; A's
 * "mark overdue" write `{ $expr: { $lt: ['$deadline', '$$NOW'] } }` is held by a fail point until
 * the deadline passed. The search found nothing, the write then matches L: it must not change it.
 * (Before the fix the write was sent un-narrowed and changed L on every path below.)
 *
 * Second block: upserts keep the unguarded semantics when nothing matches (the inserted document
 * carries the filter's equality fields, no `_id` of the guard's), and bulkWrite operations still
 * reach documents an earlier operation of the same ordered bulk made match.
 */
import { Schema, type Connection } from 'mongoose';
import { lockPlugin, type LockableModel, type LockMethods } from '../../../src';
import { deploymentFacts, describeIf } from '../../conformance/support/server';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../../support/db';
import { blockCommands, failPointOff, outcome } from './support';
import { workItemModel, type WorkItemModel } from '../../support/work-item';
import { usesPrivateServer } from '../../support/private-server';

// This file configures failCommand: on a server of its own where it can (support/private-server.ts).
usesPrivateServer();

interface Task {
  title: string;
  deadline: Date;
}
type TaskModel = LockableModel<Task>;

const db = testDatabase('ndfilter');
const APP_A = `mpl-ndfilter-a-${process.pid}`;
let connA: MonitoredConnection;
let connB: MonitoredConnection;
let admin: MonitoredConnection;
let A: TaskModel;
let B: TaskModel;

function taskModel(connection: Connection): TaskModel {
  const schema = new Schema<Task, TaskModel, LockMethods>({ title: String, deadline: Date });
  schema.plugin(lockPlugin, { ttl: 60_000 });
  return connection.model<Task, TaskModel>('Task', schema);
}

const OVERDUE = { $expr: { $lt: ['$deadline', '$$NOW'] } };
const DELAY_MS = 800;
const BLOCK_MS = 2_000;

function raw() {
  return connB.connection.getClient().db(db.name).collection(B.collection.collectionName);
}

const paths: [string, string, () => Promise<unknown>][] = [
  ['updateOne', 'update', () => A.updateOne(OVERDUE, { $set: { title: 'overdue by A' } }).exec()],
  ['updateMany', 'update', () => A.updateMany(OVERDUE, { $set: { title: 'overdue by A' } }).exec()],
  ['findOneAndUpdate', 'findAndModify', () => A.findOneAndUpdate(OVERDUE, { $set: { title: 'overdue by A' } }).exec()],
  ['bulkWrite updateMany', 'update', () => A.bulkWrite([{ updateMany: { filter: OVERDUE, update: { $set: { title: 'overdue by A' } } } }])],
  ['deleteMany', 'delete', () => A.deleteMany(OVERDUE).exec()],
];

describeIf(deploymentFacts().failPoints, 'needs fail points')('a $$NOW filter the server evaluates again at the write', () => {
  beforeAll(async () => {
    connA = await connect(db.name, { appName: APP_A, retryWrites: false });
    connB = await connect(db.name);
    admin = await connect(db.name);
    A = taskModel(connA.connection);
    B = taskModel(connB.connection);
    await A.init();
    await A.lockModel().init();
    await B.init();
  });

  afterAll(async () => {
    await failPointOff(admin.connection);
    await db.drop(admin.connection);
    await Promise.all([connA.close(), connB.close(), admin.close()]);
  });

  afterEach(async () => {
    await failPointOff(admin.connection);
  });

  test.each(paths)('%s by a non-holder leaves the locked document alone', async (_name, command, write) => {
    await B.collection.deleteMany({}, { skipLockCheck: true } as never);
    const { _id: id } = await B.create({ title: 'held by B', deadline: new Date(8.64e15) });
    // deadline = server now + DELAY_MS, by the server's clock
    await raw().updateOne({ _id: id }, [{ $set: { deadline: { $add: ['$$NOW', DELAY_MS] } } }]);
    await B.lock(id, 'holder-b');
    await blockCommands(admin.connection, {
      appName: APP_A,
      namespace: `${db.name}.${A.collection.collectionName}`,
      commands: [command],
      blockTimeMS: BLOCK_MS,
    });
    const result = await outcome(write());
    await sleep(50);
    const stored = await raw().findOne({ _id: id });
    // The search found nothing, so the write was narrowed to no _id: it touches nothing.
    expect({ ok: result.ok, stored: stored?.title ?? '(deleted)', stillLockedByB: await B.isLocked(id) }).toEqual({ ok: true, stored: 'held by B', stillLockedByB: true });
  }, 20_000);
});


describe('narrowed writes keep the unguarded semantics', () => {
  const db2 = testDatabase('ndnarrow');
  let conn: MonitoredConnection;
  let M: WorkItemModel;
  const sent: { name: string; command: Record<string, unknown> }[] = [];

  beforeAll(async () => {
    conn = await connect(db2.name);
    M = await workItemModel(conn.connection, { ttl: 30_000 }, 'NarrowItem');
    conn.connection.getClient().on('commandStarted', (event) => {
      if (event.command[event.commandName] === M.collection.collectionName) sent.push({ name: event.commandName, command: event.command as Record<string, unknown> });
    });
  });
  afterAll(async () => {
    await db2.drop(conn.connection);
    await conn.close();
  });
  beforeEach(async () => {
    await M.collection.deleteMany({}, { skipLockCheck: true } as never);
    sent.length = 0;
  });

  function writeStatements(): Record<string, unknown>[] {
    return sent.filter((s) => s.name === 'update' || s.name === 'findAndModify').flatMap((s) => (s.command.updates as Record<string, unknown>[] | undefined) ?? [{ q: s.command.query }]);
  }

  test('an upsert that matched nothing inserts the filter\'s equality fields, with no _id of the guard\'s', async () => {
    await M.updateOne({ title: 'fresh', status: 'done' }, { $set: { edits: 3 } }, { upsert: true }).exec();
    const docs = await M.find({}).lean();
    expect(docs.map((d) => ({ title: d.title, status: d.status, edits: d.edits }))).toEqual([{ title: 'fresh', status: 'done', edits: 3 }]);
    // Narrowed with a condition that is no equality (an empty $in would make the whole query $alwaysFalse on mongod).
    expect(JSON.stringify(writeStatements()[0].q)).toContain('"$exists":false');
  });

  test('an upsert that found its target updates it, and inserts nothing', async () => {
    const { _id: id } = await M.create({ title: 'there' });
    const result = await M.findOneAndUpdate({ title: 'there' }, { $set: { edits: 5 } }, { upsert: true, new: true }).exec();
    expect(String(result?._id)).toBe(String(id));
    expect(await M.countDocuments({})).toBe(1);
  });

  test('updateMany / deleteMany that found nothing touch nothing; what they found is named in the write', async () => {
    const { _id: id } = await M.create({ title: 'one', edits: 1 });
    await M.updateMany({ edits: { $gte: 1 } }, { $inc: { edits: 1 } }).exec();
    expect((await M.findById(id).lean())?.edits).toBe(2);
    const q = JSON.stringify(writeStatements().at(-1)?.q);
    expect(q).toContain(String(id));
    const none = await M.deleteMany({ edits: { $gte: 100 } }).exec();
    expect(none.deletedCount).toBe(0);
    expect(await M.countDocuments({})).toBe(1);
  });

  test('a bulkWrite operation still reaches a document an earlier operation of the same bulk made match', async () => {
    const { _id: id } = await M.create({ title: 'flag me' });
    await M.bulkWrite([
      { updateOne: { filter: { _id: id }, update: { $set: { status: 'done' } } } },
      { updateMany: { filter: { status: 'done' }, update: { $set: { title: 'seen' } } } },
    ]);
    expect((await M.findById(id).lean())?.title).toBe('seen');
  });

  test('without transactions, an updateMany / deleteMany over more than 1,000 documents is narrowed per 1,000 and writes them all', async () => {
    const N = await workItemModel(conn.connection, { ttl: 30_000, transactions: 'never' }, 'NarrowNever');
    await N.collection.deleteMany({}, { skipLockCheck: true } as never);
    await N.insertMany(Array.from({ length: 1_001 }, (_, i) => ({ title: `t${i}` })));
    const updated = await N.updateMany({ edits: 0 }, { $inc: { edits: 1 } }).exec();
    expect({ matched: updated.matchedCount, modified: updated.modifiedCount, left: await N.countDocuments({ edits: 0 }) }).toEqual({ matched: 1_001, modified: 1_001, left: 0 });
    const deleted = await N.deleteMany({ edits: 1 }).exec();
    expect({ deleted: deleted.deletedCount, left: await N.countDocuments({}) }).toEqual({ deleted: 1_001, left: 0 });
  }, 30_000);

  test('a bulkWrite upsert that matched nothing inserts from its filter', async () => {
    await M.bulkWrite([{ updateOne: { filter: { title: 'bulk-new' }, update: { $set: { edits: 7 } }, upsert: true } }]);
    const docs = await M.find({}).lean();
    expect(docs.map((d) => ({ title: d.title, edits: d.edits }))).toEqual([{ title: 'bulk-new', edits: 7 }]);
  });
});
