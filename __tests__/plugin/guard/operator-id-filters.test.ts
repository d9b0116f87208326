/**
 * Property 6 (writes by non-holders to a locked document are rejected on every guarded path), for
 * filters that reach the locked document through operators inside `_id` (`$in`, `$eq`, `$gte`,
 * `$nin`, `$and`), Query chaining and upserts. Document L is locked by B; an anonymous writer A
 * tries each form below: refused with LockedError, L unchanged. (Coverage: these held already.)
 */
/* eslint-disable @typescript-eslint/no-explicit-any */
import { LockedError } from '../../../src';
import { connect, testDatabase, type MonitoredConnection } from '../../support/db';
import { workItemModel, type WorkItemModel } from '../../support/work-item';
import { outcome } from './support';

const db = testDatabase('opsids');
let conn: MonitoredConnection;
let M: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  M = await workItemModel(conn.connection, { ttl: 30_000 }, 'OpsItem');
});
afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

const set = { $set: { title: 'written by A' } };
const forms: [string, (id: any) => Promise<unknown>][] = [
  ['{ _id: { $in: [free, L] } } updateOne', (id) => M.updateOne({ _id: { $in: [id] } }, set).exec()],
  ['{ _id: { $eq: L } } updateMany', (id) => M.updateMany({ _id: { $eq: id } }, set).exec()],
  ['{ $and: [{ _id: L }] } findOneAndUpdate', (id) => M.findOneAndUpdate({ $and: [{ _id: id }] }, set).exec()],
  ['{ _id: { $gte: L } } deleteMany', (id) => M.deleteMany({ _id: { $gte: id } }).exec()],
  ['{ _id: { $nin: [] } } replaceOne upsert', () => M.replaceOne({ _id: { $nin: [] } }, { title: 'written by A', status: 'open', edits: 0 }, { upsert: true }).exec()],
  ['Model.where().updateOne()', (id) => M.where({ _id: id }).updateOne({}, set).exec()],
  ['Model.find().findOneAndDelete()', (id) => M.find({ _id: id }).findOneAndDelete().exec()],
  ['updateMany upsert', (id) => M.updateMany({ _id: id }, set, { upsert: true }).exec()],
];

test.each(forms)('%s by a non-holder is refused', async (_name, write) => {
  await M.collection.deleteMany({}, { skipLockCheck: true } as never);
  const { _id: id } = await M.create({ title: 'held by B' });
  await M.lock(id, 'holder-b');
  const result = await outcome(write(id));
  const stored = await conn.connection.getClient().db(db.name).collection(M.collection.collectionName).findOne({ _id: id });
  expect({ title: stored?.title, refused: !result.ok && result.error instanceof LockedError }).toEqual({ title: 'held by B', refused: true });
});
