/**
 * Attack 7 on the ordered-bulkWrite upsert `_id` change (src/guard/upsert-id.ts, write-guard.ts
 * `bulk()`): an upsert naming its `_id` in `$set` / `$setOnInsert`, or given one by the guard with
 * `$setOnInsert: { _id: new ObjectId() }`, adds that `_id` to the ids later operations of the bulk
 * are narrowed to.
 *
 *  1. Property 6: `$setOnInsert: { _id: L }` on an upsert that MATCHES another document inserts
 *     nothing, yet L is added to the narrowing unchecked. A later operation whose filter the
 *     server evaluates again at the write (`$$NOW`) then writes L, which someone else holds.
 *  2. Property 9 / 10: an update with `$rename` to `_id` gets `$setOnInsert._id` added; mongod
 *     refuses the two together (ConflictingUpdateOperators 40, UpdateObjectNode::parseAndMerge puts
 *     a RenameNode at the "to" path), where the unguarded upsert inserts.
 *  3. Property 10: a `$setOnInsert` the driver serializes (a Map) is dropped by the spread.
 *  4. Property 10: a filter naming a SUBDOCUMENT's `_id` counts as "mentions _id", so the
 *     inserted document is not reached by later operations (it is with the plugin off).
 */
import { Schema, mongo, type Model } from 'mongoose';
import { lockPlugin, type LockableModel, type LockMethods } from '../../src';
import { deploymentFacts, describeIf } from '../conformance/support/server';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { blockCommands, failPointOff, outcome } from '../plugin/guard/support';
import { usesPrivateServer } from '../support/private-server';

usesPrivateServer();

interface Task {
  title: string;
  deadline?: Date;
  note?: string;
  n?: number;
  items?: { _id?: unknown; name: string }[];
}
type TaskModel = LockableModel<Task>;

const db = testDatabase('attack7');
const APP_A = `mpl-attack7-a-${process.pid}`;
let connA: MonitoredConnection;
let connB: MonitoredConnection;
let admin: MonitoredConnection;
let A: TaskModel;
let B: TaskModel;
let Plain: Model<Task>;
const sent: Record<string, unknown>[] = [];

function schema(): Schema<Task, TaskModel, LockMethods> {
  return new Schema<Task, TaskModel, LockMethods>({ title: String, deadline: Date, note: String, n: Number, items: [{ name: String }] });
}

function raw() {
  return connB.connection.getClient().db(db.name).collection(B.collection.collectionName);
}

beforeAll(async () => {
  connA = await connect(db.name, { appName: APP_A, retryWrites: false });
  connB = await connect(db.name);
  admin = await connect(db.name);
  const sa = schema();
  sa.plugin(lockPlugin, { ttl: 60_000 });
  A = connA.connection.model<Task, TaskModel>('Task', sa);
  const sb = schema();
  sb.plugin(lockPlugin, { ttl: 60_000 });
  B = connB.connection.model<Task, TaskModel>('Task', sb);
  await A.init();
  await A.lockModel().init();
  await B.init();
  Plain = connA.connection.model<Task>('PlainTask', schema() as unknown as Schema<Task>, 'plaintasks');
  await Plain.init();
  connA.connection.getClient().on('commandStarted', (event) => {
    if (event.commandName === 'update' && event.command.update === A.collection.collectionName) sent.push(...(event.command.updates as Record<string, unknown>[]));
  });
});

afterAll(async () => {
  await failPointOff(admin.connection);
  await db.drop(admin.connection);
  await Promise.all([connA.close(), connB.close(), admin.close()]);
});

beforeEach(async () => {
  await failPointOff(admin.connection);
  await raw().deleteMany({});
  await connA.connection.getClient().db(db.name).collection('plaintasks').deleteMany({});
  sent.length = 0;
});

describeIf(deploymentFacts().failPoints, 'needs fail points')('property 6: an upsert that matched adds its $setOnInsert _id to the narrowing unchecked', () => {
  test('a later $$NOW operation of the ordered bulk writes a document B holds, never searched nor checked', async () => {
    // U: an unlocked document the upsert matches. L: held by B, deadline a moment ahead.
    const { _id: u } = await B.create({ title: 'matched by the upsert' });
    const { _id: l } = await B.create({ title: 'held by B', deadline: new Date(8.64e15) });
    await raw().updateOne({ _id: l }, [{ $set: { deadline: { $add: ['$$NOW', 800] } } }]);
    await B.lock(l, 'holder-b');
    // The bulk's write waits until L's deadline passed (its search, in the transaction, saw it in the future).
    await blockCommands(admin.connection, { appName: APP_A, namespace: `${db.name}.${A.collection.collectionName}`, commands: ['update'], blockTimeMS: 2_000 });
    const result = await outcome(
      A.bulkWrite([
        // Matches U: $setOnInsert is not applied, nothing is inserted, but L joins `before`.
        { updateOne: { filter: { title: 'matched by the upsert' }, update: { $set: { note: 'u' }, $setOnInsert: { _id: l } }, upsert: true } },
        { updateMany: { filter: { $expr: { $lt: ['$deadline', '$$NOW'] } }, update: { $set: { title: 'overdue by A' } } } },
      ]),
    );
    await sleep(50);
    const stored = await raw().findOne({ _id: l });
    expect((await raw().findOne({ _id: u }))?.note).toBe(result.ok ? 'u' : undefined);
    expect({ stored: stored?.title, stillLockedByB: await B.isLocked(l) }).toEqual({ stored: 'held by B', stillLockedByB: true });
  }, 20_000);
});

describe('property 9/10: what the guard adds must be accepted where the unguarded update is', () => {
  test('an upsert with $rename to _id is not sent with $setOnInsert._id (mongod: ConflictingUpdateOperators 40)', async () => {
    const ops = () => [{ updateOne: { filter: { title: 'r1' }, update: { $rename: { old: '_id' }, $set: { n: 1 } }, upsert: true } }];
    // Unguarded on mongod: `old` does not exist on the inserted document, so the rename is a no-op
    // (RenameNode::apply, "The element we want to rename does not exist ... a no-op") and the
    // upsert inserts. (The emulator answers 66 here instead: see conformance/upsert-id-seeded-by-canonical-query.test.ts.)
    await A.collection.bulkWrite(ops() as never).catch(() => undefined);
    const statement = sent.find((s) => (s.q as Record<string, unknown>)?.title === 'r1' || JSON.stringify(s.q).includes('r1'));
    const u = statement?.u as Record<string, Record<string, unknown>>;
    // mongod parses $rename {old: '_id'} into a RenameNode at '_id'; another update of '_id' conflicts.
    expect({ rename: u?.$rename, setOnInsertId: u?.$setOnInsert?._id }).toEqual({ rename: { old: '_id' }, setOnInsertId: undefined });
  });
});

describe("property 10: the caller's update reaches the server as written", () => {
  test('a $setOnInsert given as a Map (the driver serializes it as a document) keeps its fields', async () => {
    const ops = () => [{ updateOne: { filter: { title: 'm1' }, update: { $set: { n: 1 }, $setOnInsert: new Map([['note', 'from the map']]) }, upsert: true } }];
    await Plain.collection.bulkWrite(ops() as never);
    const plain = await Plain.collection.findOne({ title: 'm1' });
    await A.collection.bulkWrite(ops() as never);
    const guarded = await raw().findOne({ title: 'm1' });
    expect({ plain: plain?.note, guarded: guarded?.note }).toEqual({ plain: 'from the map', guarded: 'from the map' });
  });

  test("an upsert whose filter names a subdocument's _id ($elemMatch) is reached by a later operation, as without the plugin", async () => {
    const itemId = new mongo.ObjectId();
    const run = async (model: Model<Task>) => {
      await model.bulkWrite([
        { updateOne: { filter: { title: 'e1', items: { $elemMatch: { _id: itemId } } }, update: { $set: { n: 1 } }, upsert: true } },
        { updateMany: { filter: { title: 'e1' }, update: { $inc: { n: 10 } } } },
      ]);
      return (await model.find({ title: 'e1' }).lean()).map((d) => d.n);
    };
    expect({ plain: await run(Plain), guarded: await run(A as unknown as Model<Task>) }).toEqual({ plain: [11], guarded: [11] });
  });

  test('an upsert whose filter names a subdocument by equality ({ "items": { _id, name } }-style embedded doc) is reached too', async () => {
    const sub = { _id: new mongo.ObjectId(), name: 'x' };
    const run = async (model: Model<Task>) => {
      await model.collection.bulkWrite([
        { updateOne: { filter: { title: 'e2', owner: sub }, update: { $set: { n: 1 } }, upsert: true } },
        { updateMany: { filter: { title: 'e2' }, update: { $inc: { n: 10 } } } },
      ] as never);
      return (await model.collection.find({ title: 'e2' }).toArray()).map((d) => d.n);
    };
    expect({ plain: await run(Plain), guarded: await run(A as unknown as Model<Task>) }).toEqual({ plain: [11], guarded: [11] });
  });
});
