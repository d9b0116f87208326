/**
 * `lockStatus` and `listLocks` answer for every lock also when the lock records together pass one
 * 16 MiB reply batch (ids of a few MiB each, up to MAX_ID_BYTES).
 *
 * Both read in one batch (`singleBatch`), and mongod stops filling a batch at 16 MiB
 * (FindCommon::haveSpaceForNext, src/mongo/db/query/find_common.cpp): `listLocks` answered a short
 * page with `next: null` before the end (README, Limits, said so), and `lockStatus` refused such
 * ids as "together too large" for one reply. Now both read to the end of the cursor (a getMore
 * follows a cut batch), and `lockStatus` is bounded only by its one `find` command (16 MiB + 16 KiB).
 */
import { Schema } from 'mongoose';
import { lockPlugin, type LockableModel } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';

const db = testDatabase('largerecords');
let conn: MonitoredConnection;
let Pages: LockableModel<{ _id: string; title: string }>;
/**
 * Five ids of almost 4 MiB: 20 MiB of lock records, more than one 16 MiB batch. Four of them are
 * exactly as much as one `find` may carry (16 MiB of ids as BSON, each 4 + length + 1 bytes plus
 * its 5 bytes in the `$in` array), while their four records (the id and about 130 bytes of dates,
 * label and `now` each) pass 16 MiB: the fourth comes in a second batch.
 */
const ids = ['a', 'b', 'c', 'd', 'e'].map((c) => c.repeat(4 * 1024 * 1024 - 10));

beforeAll(async () => {
  conn = await connect(db.name);
  const schema = new Schema<{ _id: string; title: string }>({ _id: String, title: String });
  schema.plugin(lockPlugin);
  Pages = conn.connection.model<{ _id: string; title: string }, LockableModel<{ _id: string; title: string }>>('LargeRecordPage', schema);
  await Pages.init();
  await Pages.lockModel().init();
  for (const id of ids) {
    await Pages.create({ _id: id, title: 't' });
    await Pages.lock(id, 'alice', { ttl: 120_000 });
  }
}, 120_000);

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

const short = (id: unknown) => String(id).slice(0, 1);

test('listLocks returns a whole page, and next, when its records pass one batch', async () => {
  const first = await Pages.listLocks({ owner: 'alice', limit: 4 });
  expect(first.locks.map((lock) => short(lock.documentId))).toEqual(['a', 'b', 'c', 'd']);
  expect(first.next).not.toBeNull();
  const second = await Pages.listLocks({ owner: 'alice', limit: 4, after: first.next! });
  expect(second.locks.map((lock) => short(lock.documentId))).toEqual(['e']);
  expect(second.next).toBeNull();
  const all = await Pages.listLocks({ limit: 5 });
  expect(all.locks.map((lock) => short(lock.documentId))).toEqual(['a', 'b', 'c', 'd', 'e']);
  expect(all.next).toBeNull();
}, 120_000);

test('lockStatus answers for ids whose records pass one batch', async () => {
  conn.resetCommands();
  const status = await Pages.lockStatus(ids.slice(0, 4), { owner: 'alice' });
  expect(status.map((lock) => lock && short(lock.documentId))).toEqual(['a', 'b', 'c', 'd']);
  expect(status.every((lock) => lock?.mine === true)).toBe(true);
  expect(conn.commands).toEqual(['find', 'getMore']);
  // One byte more than one find may carry is refused before anything is sent.
  conn.resetCommands();
  await expect(Pages.lockStatus([...ids.slice(0, 3), `${ids[3]}x`])).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', argument: 'ids' });
  expect(conn.commands).toEqual([]);
}, 120_000);
