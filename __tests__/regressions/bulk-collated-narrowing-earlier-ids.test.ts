/**
 * Attack 11, property 6: in an ordered bulkWrite, the ids of EARLIER operations (an upsert's
 * `$setOnInsert` / `$set` `_id`, a filter's named `_id`, an insertOne's `_id`) join the ids a later
 * operation is narrowed to (write-guard.ts `bulk()`, `before`). `withCollatedEquals` is applied to
 * the later operation's own search results only, not to `before`. A later operation under a
 * collation that compares strings otherwise than byte by byte (`{ locale: 'en', strength: 2 }`) is
 * then sent as `{ ...filter, _id: { $in: [..., 'abc'] } }` WITH that collation, which also matches
 * `'ABC'`: a document nobody searched for nor checked (README, Limits: "every `_id` the collation
 * makes equal to one of them is searched as well (one more find) and checked").
 *
 * On mongod: a `$$NOW` filter that matches 'ABC' only at the write (as in attack 7) makes the bulk
 * write 'ABC', which B holds (second test, needs a real server with collation and fail points).
 *
 * The emulator does not implement collation (FIDELITY.md, item 6). The first test therefore answers
 * the guard's collated searches itself (for the filter used there, `{ due: true }` on boolean
 * values, the collation changes nothing) and asserts on what the guard sends: a collated
 * statement narrowed to 'abc' with no collated search of the `_id`s equal to 'abc' before it.
 */
import { Schema, mongo } from 'mongoose';
import { lockPlugin, type LockableModel, type LockMethods } from '../../src';
import { testBackendKind } from '../../test-backend/test-env';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { blockCommands, failPointOff, outcome } from '../plugin/guard/support';
import { usesPrivateServer } from '../support/private-server';

usesPrivateServer();

interface Item {
  _id: string;
  title: string;
  due?: boolean;
  deadline?: Date;
  n?: number;
}
type ItemModel = LockableModel<Item>;

const db = testDatabase('attack11_coll');
const APP_A = `mpl-attack11-a-${process.pid}`;
const CI = { locale: 'en', strength: 2 };
let connA: MonitoredConnection;
let connB: MonitoredConnection;
let admin: MonitoredConnection;
let A: ItemModel;
let B: ItemModel;
const updates: { q: Record<string, unknown>; collation?: unknown }[] = [];

function schema(): Schema<Item, ItemModel, LockMethods> {
  const s = new Schema<Item, ItemModel, LockMethods>({ _id: String, title: String, due: Boolean, deadline: Date, n: Number });
  s.plugin(lockPlugin, { ttl: 60_000 });
  return s;
}

function raw() {
  return connB.connection.getClient().db(db.name).collection(B.collection.collectionName);
}

beforeAll(async () => {
  connA = await connect(db.name, { appName: APP_A, retryWrites: false });
  connB = await connect(db.name);
  admin = await connect(db.name);
  A = connA.connection.model<Item, ItemModel>('CollItem', schema());
  B = connB.connection.model<Item, ItemModel>('CollItem', schema());
  await A.init();
  await A.lockModel().init();
  await B.init();
  connA.connection.getClient().on('commandStarted', (event) => {
    if (event.commandName === 'update' && event.command.update === A.collection.collectionName) updates.push(...(event.command.updates as typeof updates));
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
  updates.length = 0;
});

const idsIn = (q: unknown): unknown[] => {
  const id = (q as { _id?: unknown })?._id;
  if (id === undefined) return [];
  const inList = (id as { $in?: unknown[] })?.$in;
  return Array.isArray(inList) ? inList : [id];
};

const firstOps: [string, Record<string, unknown>][] = [
  // Matches u1, names 'abc' (checked: free), which joins the later operations' narrowing.
  ["an upsert's $setOnInsert _id", { updateOne: { filter: { title: 'matched by the upsert' }, update: { $set: { n: 1 }, $setOnInsert: { _id: 'abc' } }, upsert: true } }],
  ["a replaceOne upsert's replacement _id", { replaceOne: { filter: { title: 'nothing' }, replacement: { _id: 'abc', title: 'r' }, upsert: true } }],
  ["an updateOne's filter _id (no collation)", { updateOne: { filter: { _id: 'abc' }, update: { $set: { n: 1 } } } }],
  ["an insertOne's _id", { insertOne: { document: { _id: 'abc', title: 'new' } } }],
];

test.each(firstOps)("a later collated operation is narrowed to %s 'abc' without searching the _ids the collation makes equal ('ABC', held by B)", async (_name, first) => {
  await raw().insertMany([
    { _id: 'u1', title: 'matched by the upsert' } as never,
    { _id: 'ABC', title: 'held by B', due: false } as never,
  ]);
  await B.lock('ABC', 'holder-b');
  // The emulator refuses collation: answer the guard's collated finds as mongod would for these
  // filters, and record them.
  const collatedFinds: Record<string, unknown>[] = [];
  const original = mongo.Collection.prototype.find;
  const spy = jest.spyOn(mongo.Collection.prototype, 'find').mockImplementation(function (this: mongo.Collection, filter?: mongo.Filter<mongo.Document>, options?: mongo.FindOptions) {
    if (options?.collation && this.collectionName === A.collection.collectionName) {
      collatedFinds.push(filter as Record<string, unknown>);
      const { collation: _c, ...rest } = options;
      return original.call(this, filter as mongo.Filter<mongo.Document>, rest) as never;
    }
    return original.call(this, filter as mongo.Filter<mongo.Document>, options) as never;
  });
  try {
    await outcome(
      A.bulkWrite([
        first as never,
        { updateMany: { filter: { due: true }, update: { $set: { title: 'written by A' } }, collation: CI } },
      ]),
    );
  } finally {
    spy.mockRestore();
  }
  const collatedStatements = updates.filter((u) => u.collation !== undefined);
  const narrowedToAbc = collatedStatements.some((u) => JSON.stringify(u.q).includes('"abc"'));
  const searchedEqualsOfAbc = collatedFinds.some((f) => idsIn(f).includes('abc'));
  // A collated statement that can match 'abc' must come after a collated search of 'abc''s equals.
  expect({ narrowedToAbc, searchedEqualsOfAbc }).toEqual({ narrowedToAbc, searchedEqualsOfAbc: narrowedToAbc });
});

const onMongod = testBackendKind() === 'emulator' ? describe.skip : describe;
onMongod('on mongod (collation, $$NOW, failCommand)', () => {
  test("a later collated $$NOW operation writes 'ABC', which B holds, through the earlier upsert's $setOnInsert _id 'abc'", async () => {
    await raw().insertMany([{ _id: 'u1', title: 'matched by the upsert' } as never, { _id: 'ABC', title: 'held by B', deadline: new Date(8.64e15) } as never]);
    await raw().updateOne({ _id: 'ABC' } as never, [{ $set: { deadline: { $add: ['$$NOW', 800] } } }]);
    await B.lock('ABC', 'holder-b');
    await blockCommands(admin.connection, { appName: APP_A, namespace: `${db.name}.${A.collection.collectionName}`, commands: ['update'], blockTimeMS: 2_000 });
    await outcome(
      A.bulkWrite([
        { updateOne: { filter: { title: 'matched by the upsert' }, update: { $set: { n: 1 }, $setOnInsert: { _id: 'abc' } }, upsert: true } },
        { updateMany: { filter: { $expr: { $lt: ['$deadline', '$$NOW'] } }, update: { $set: { title: 'overdue by A' } }, collation: CI } },
      ]),
    );
    await sleep(50);
    expect({ stored: (await raw().findOne({ _id: 'ABC' } as never))?.title, lockedByB: await B.isLocked('ABC') }).toEqual({ stored: 'held by B', lockedByB: true });
  }, 20_000);
});
