/**
 * Under a collation that compares strings otherwise than byte by byte, a write naming its `_id`
 * is not limited to that `_id` (PRODUCT.md property 6; README: query writes are guarded "with the
 * filter exactly as the write runs it, and its sort, collation, hint and let").
 *
 * The guard checked a write whose filter names its `_id` by equality against exactly those ids,
 * whatever its collation. With `{ locale: 'en', strength: 2 }` mongod matches `{ _id: 'ABC' }`
 * against the stored `'abc'` (string comparisons follow the operation's collation, whatever the
 * field: jstests/core/collation.js; no IDHACK with a non-simple collator: isIdHackEligibleQuery,
 * src/mongo/db/query/query_utils.h), so a non-holder's write claimed the free record `'ABC'` and
 * changed `'abc'`, which someone else holds. Now named ids holding strings are not trusted under
 * such a collation: the guard searches every matching document with the write's collation,
 * checks them all, and sends the write unpinned (targets.ts `trustedIds`, write-guard.ts).
 *
 * The emulator does not implement collation (README, "Known differences"): there the search is
 * answered NotImplemented and nothing is written. So the assertions hold on both: the document
 * keeps B's data, and no document write carrying the collation is sent unless the guard first
 * searched its targets with that very collation (or refused it). On mongod the refusal is a
 * LockedError. (Found by the attack run, `__tests__/attack/collation-ids.test.ts`.)
 */
import { Schema, type Connection } from 'mongoose';
import { LockedError, lockPlugin, type LockableModel, type LockMethods } from '../../../src';
import { connect, testDatabase, type MonitoredConnection } from '../../support/db';
import { outcome } from './support';

interface Item {
  _id: string;
  title: string;
}
type ItemModel = LockableModel<Item>;

const db = testDatabase('collationids');
let conn: MonitoredConnection;
let M: ItemModel;
const CI = { locale: 'en', strength: 2 };

function itemModel(connection: Connection): ItemModel {
  const schema = new Schema<Item, ItemModel, LockMethods>({ _id: String, title: String });
  schema.plugin(lockPlugin, { ttl: 30_000 });
  return connection.model<Item, ItemModel>('CollatedItem', schema);
}

interface Sent {
  name: string;
  target: unknown;
  collation: unknown;
}
const sent: Sent[] = [];

beforeAll(async () => {
  conn = await connect(db.name);
  M = itemModel(conn.connection);
  await M.init();
  await M.lockModel().init();
  conn.connection.getClient().on('commandStarted', (event) => {
    const c = event.command as Record<string, unknown>;
    const statements = (c.updates ?? c.deletes) as { collation?: unknown }[] | undefined;
    sent.push({ name: event.commandName, target: c[event.commandName], collation: c.collation ?? statements?.[0]?.collation });
  });
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

const writes: [string, () => Promise<unknown>][] = [
  ['updateOne', () => M.updateOne({ _id: 'ABC' }, { $set: { title: 'written by A' } }, { collation: CI }).exec()],
  ['findOneAndUpdate', () => M.findOneAndUpdate({ _id: 'ABC' }, { $set: { title: 'written by A' } }, { collation: CI }).exec()],
  ['updateMany with $in', () => M.updateMany({ _id: { $in: ['ABC'] } }, { $set: { title: 'written by A' } }, { collation: CI }).exec()],
  ['deleteOne', () => M.deleteOne({ _id: 'ABC' }, { collation: CI }).exec()],
  ['updateMany', () => M.updateMany({ _id: 'ABC' }, { $set: { title: 'written by A' } }, { collation: CI }).exec()],
  ['bulkWrite updateOne', () => M.bulkWrite([{ updateOne: { filter: { _id: 'ABC' }, update: { $set: { title: 'written by A' } }, collation: CI } }])],
];

test.each(writes)('%s({ _id: "ABC" }, { collation: strength 2 }) by a non-holder does not touch the locked "abc"', async (_name, write) => {
  await M.collection.deleteMany({}, { skipLockCheck: true } as never);
  await M.create({ _id: 'abc', title: 'held by B' });
  await M.lock('abc', 'holder-b');
  sent.length = 0;

  const result = await outcome(write());

  const stored = await conn.connection.getClient().db(db.name).collection<{ _id: string; title: string }>(M.collection.collectionName).findOne({ _id: 'abc' });
  expect(stored?.title).toBe('held by B');
  // The write carrying the collation may only be sent after a target search with that collation.
  const docCollection = M.collection.collectionName;
  const writeAt = sent.findIndex((s) => s.target === docCollection && ['update', 'delete', 'findAndModify'].includes(s.name) && s.collation !== undefined);
  const searchAt = sent.findIndex((s) => s.target === docCollection && s.name === 'find' && JSON.stringify(s.collation) === JSON.stringify(CI));
  if (writeAt !== -1) expect({ searchedWithCollationFirst: searchAt !== -1 && searchAt < writeAt, sent }).toMatchObject({ searchedWithCollationFirst: true });
  if (!result.ok && writeAt === -1 && searchAt === -1) expect(result.error).toBeInstanceOf(LockedError);
  await M.unlock('abc', 'holder-b');
});
