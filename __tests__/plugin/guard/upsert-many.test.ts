/**
 * `updateMany(filter, update, { upsert: true })` keeps its upsert (PRODUCT.md property 10: writes
 * to documents nobody has locked succeed as they would without the plugin).
 *
 * Under `transactions: 'auto'` the guard rewrote a multi-document write whose filter names its
 * `_id`s into per-document `updateOne` statements WITHOUT `upsert` and reported
 * `upsertedCount: 0`: when no such document existed, nothing was inserted. Now an upsert runs as
 * the write it is, in one transaction of the guard's own (named ids claimed, or the targets
 * searched inside it), so it inserts when nothing matches. `transactions: 'never'` sends the write
 * unchanged and is the control. (Found by the attack run, `__tests__/attack/upsert-many.test.ts`.)
 */
import { LockedError, type LockPluginOptions } from '../../../src';
import { connect, testDatabase, type MonitoredConnection } from '../../support/db';
import { workItemModel, type WorkItemModel } from '../../support/work-item';
import { rawCollection, rawLocks } from './support';

const db = testDatabase('upsertmany');
let conn: MonitoredConnection;

beforeAll(async () => {
  conn = await connect(db.name);
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

describe.each([
  ["transactions: 'auto'", { ttl: 10_000 }],
  ["transactions: 'never'", { ttl: 10_000, transactions: 'never' }],
] as [string, LockPluginOptions][])('%s', (_label, options) => {
  let M: WorkItemModel;
  beforeAll(async () => {
    M = await workItemModel(conn.connection, options);
  });

  test('updateMany({ _id: x }, update, { upsert: true }) on a document that does not exist inserts it', async () => {
    const id = new (conn.connection.base as typeof import('mongoose')).Types.ObjectId();
    const result = await M.updateMany({ _id: id }, { $set: { title: 'upserted', status: 'open', edits: 0 } }, { upsert: true });
    expect(result.upsertedCount).toBe(1);
    const stored = await rawCollection(M).findOne({ _id: id });
    expect(stored?.title).toBe('upserted');
    expect(await rawLocks(M).countDocuments({})).toBe(0);
  });

  test('Model.collection.updateMany({ _id: x }, ..., { upsert: true }) inserts it', async () => {
    const id = new (conn.connection.base as typeof import('mongoose')).Types.ObjectId();
    const result = (await (M.collection as unknown as { updateMany(...a: unknown[]): Promise<{ upsertedCount: number }> }).updateMany(
      { _id: id },
      { $set: { title: 'upserted raw' } },
      { upsert: true },
    ));
    expect(result.upsertedCount).toBe(1);
    expect((await rawCollection(M).findOne({ _id: id }))?.title).toBe('upserted raw');
  });

  test('updateMany({ _id: { $in: [x, y] } }, ..., { upsert: true }), neither exists: one document is inserted', async () => {
    const mongoose = conn.connection.base as typeof import('mongoose');
    const ids = [new mongoose.Types.ObjectId(), new mongoose.Types.ObjectId()];
    const marker = `in-upsert-${Date.now()}`;
    const result = await M.updateMany({ _id: { $in: ids } }, { $set: { title: marker } }, { upsert: true });
    expect(result.upsertedCount).toBe(1);
    expect(await rawCollection(M).countDocuments({ title: marker })).toBe(1);
  });
});

describe('an upsert that matches a locked document', () => {
  let M: WorkItemModel;
  beforeAll(async () => {
    M = await workItemModel(conn.connection, { ttl: 10_000 });
  });

  test('is refused, and writes nothing', async () => {
    const { _id: id } = await M.create({ title: 'held' });
    await M.lock(id, 'holder');
    const result = await M.updateMany({ _id: id }, { $set: { title: 'by another' } }, { upsert: true }).then(
      () => 'written',
      (error: unknown) => (error instanceof LockedError ? 'refused' : String(error)),
    );
    expect(result).toBe('refused');
    expect((await rawCollection(M).findOne({ _id: id }))?.title).toBe('held');
  });

  test('by a filter that does not name _id is refused too', async () => {
    const marker = `held-${Date.now()}`;
    const { _id: id } = await M.create({ title: marker });
    await M.lock(id, 'holder');
    await expect(M.updateMany({ title: marker }, { $set: { status: 'done' } }, { upsert: true })).rejects.toBeInstanceOf(LockedError);
    expect((await rawCollection(M).findOne({ _id: id }))?.status).toBe('open');
  });
});
