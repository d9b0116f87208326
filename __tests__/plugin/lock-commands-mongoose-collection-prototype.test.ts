/**
 * Code that observes Mongoose's collection class itself (a patch or a `jest.spyOn` of
 * `mongoose.Collection.prototype.<method>`, the class every model's collection is an instance of:
 * mongoose lib/mongoose.js `Mongoose.prototype.Collection`, the driver's NativeCollection) sees every
 * call a model's collection makes, since the call goes through that method. The lock call's own
 * acquire (findOneAndUpdate on the lock collection), load (findOne) and release (updateOne) must
 * go through it too. A speed-up that sent them to the driver's collection whenever Mongoose's
 * wrapper "would only pass them on" (tried on a branch, commit 8ae6d75) dropped this observation
 * silently, on Mongoose 8 and 9 (found by an attack); it was not merged.
 */
import mongoose, { type Types } from 'mongoose';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('mongooseproto');
let conn: MonitoredConnection;
let M: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  M = await workItemModel(conn.connection, { ttl: 30_000 });
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

type Method = 'findOneAndUpdate' | 'findOne' | 'updateOne';

test("a patch of Mongoose's Collection class methods (mongoose.Collection.prototype) sees the acquire, the load and the release", async () => {
  const { _id: id } = await M.create({ title: 'prototype observed' });
  const proto = mongoose.Collection.prototype as unknown as Record<Method, (...args: unknown[]) => unknown>;
  // Sanity: the model's collections are instances of this class, so every call they make goes through these methods.
  expect(Object.getPrototypeOf(M.collection)).toBe(proto);
  expect(Object.getPrototypeOf(M.lockModel().collection)).toBe(proto);
  const seen: string[] = [];
  const originals = new Map<Method, (...args: unknown[]) => unknown>();
  for (const method of ['findOneAndUpdate', 'findOne', 'updateOne'] as const) {
    const original = proto[method];
    originals.set(method, original);
    proto[method] = function observed(this: { collectionName: string }, ...args: unknown[]) {
      seen.push(`${this.collectionName}.${method}`);
      return original.apply(this, args);
    };
  }
  try {
    const doc = await M.lock(id as Types.ObjectId, 'alice');
    await doc.unlock();
  } finally {
    for (const [method, original] of originals) proto[method] = original;
  }
  const item = M.collection.collectionName;
  expect(seen).toEqual([`${item}.locks.findOneAndUpdate`, `${item}.findOne`, `${item}.locks.updateOne`]);
});

test('jest.spyOn(mongoose.Collection.prototype, ...) counts the lock call\'s commands', async () => {
  const { _id: id } = await M.create({ title: 'prototype spied' });
  const acquire = jest.spyOn(mongoose.Collection.prototype, 'findOneAndUpdate');
  const release = jest.spyOn(mongoose.Collection.prototype, 'updateOne');
  try {
    const doc = await M.lock(id as Types.ObjectId, 'alice');
    expect(acquire).toHaveBeenCalledTimes(1);
    await doc.unlock();
    expect(release).toHaveBeenCalledTimes(1);
  } finally {
    acquire.mockRestore();
    release.mockRestore();
  }
});
