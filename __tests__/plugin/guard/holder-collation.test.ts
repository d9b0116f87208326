/**
 * Property 6 (writes by non-holders to a locked document are rejected on every guarded path), for
 * a holder's own document writes: `doc.updateOne` / `doc.replaceOne` / `doc.deleteOne` are sent
 * with the holder's `_id` as the filter after verifying its lock, unsearched. Under a collation
 * other than simple, `{ _id: 'abc' }` also matches `'ABC'` on mongod (no IDHACK, jstests/core/
 * collation.js), which someone else may hold. Such a write (string `_id`, non-simple collation) is
 * refused with InvalidLockOptionError naming `collation` before anything is sent (README, Limits).
 * The emulator does not implement collation, so the test checks that nothing reaches the document
 * collection (before the fix the collated write was sent, unsearched).
 */
import { Schema, type Connection } from 'mongoose';
import { InvalidLockOptionError, lockPlugin, type LockableModel, type LockMethods } from '../../../src';
import { connect, testDatabase, type MonitoredConnection } from '../../support/db';
import { outcome } from './support';

interface Item {
  _id: string;
  title: string;
}
type ItemModel = LockableModel<Item>;

const db = testDatabase('hcoll');
let conn: MonitoredConnection;
let M: ItemModel;
const CI = { locale: 'en', strength: 2 };

function itemModel(connection: Connection): ItemModel {
  const schema = new Schema<Item, ItemModel, LockMethods>({ _id: String, title: String });
  schema.plugin(lockPlugin, { ttl: 30_000 });
  return connection.model<Item, ItemModel>('HCollItem', schema);
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

type Held = Awaited<ReturnType<ItemModel['lock']>>;
const writes: [string, (doc: Held) => Promise<unknown>][] = [
  ['doc.updateOne', (doc) => doc.updateOne({ $set: { title: 'written by A' } }, { collation: CI }).exec()],
  ['doc.replaceOne', (doc) => doc.replaceOne({ title: 'written by A' }, { collation: CI }).exec()],
  ['doc.deleteOne', (doc) => doc.deleteOne({ collation: CI } as never).exec()],
];

test.each(writes)('holder %s with { collation: strength 2 } on a string _id is refused before anything is sent', async (_name, write) => {
  await M.collection.deleteMany({}, { skipLockCheck: true } as never);
  await M.create({ _id: 'ABC', title: 'held by B' });
  await M.create({ _id: 'abc', title: 'held by A' });
  await M.lock('ABC', 'holder-b');
  const docA = await M.lock('abc', 'holder-a');
  sent.length = 0;

  const result = await outcome(write(docA));

  expect(result.ok).toBe(false);
  const error = (result as { error: unknown }).error;
  expect(error).toBeInstanceOf(InvalidLockOptionError);
  expect((error as InvalidLockOptionError).option).toBe('collation');
  const docCollection = M.collection.collectionName;
  expect(sent.filter((s) => s.target === docCollection)).toEqual([]);
  const raw = conn.connection.getClient().db(db.name).collection<{ _id: string; title: string }>(docCollection);
  expect((await raw.findOne({ _id: 'ABC' }))?.title).toBe('held by B');
  expect((await raw.findOne({ _id: 'abc' }))?.title).toBe('held by A');
  await M.unlock('ABC', 'holder-b');
  await M.unlock('abc', 'holder-a');
});

test('holder doc.updateOne with { locale: simple } is not refused: the write is sent', async () => {
  await M.collection.deleteMany({}, { skipLockCheck: true } as never);
  await M.create({ _id: 'abc', title: 'held by A' });
  const docA = await M.lock('abc', 'holder-a');
  sent.length = 0;
  // The emulator answers any collation option NotImplemented; mongod writes the document.
  const result = await outcome(docA.updateOne({ $set: { title: 'written by A' } }, { collation: { locale: 'simple' } }).exec());
  if (!result.ok) expect(result.error).not.toBeInstanceOf(InvalidLockOptionError);
  expect(sent.some((s) => s.target === M.collection.collectionName && s.name === 'update')).toBe(true);
  await M.unlock('abc', 'holder-a');
});
