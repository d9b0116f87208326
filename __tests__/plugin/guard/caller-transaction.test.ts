/**
 * Defect 2 of issue 10 (and the first part of defect 7): a guarded write made inside the caller's
 * own transaction commits or aborts with that transaction (PRODUCT.md property 10), also when the
 * caller's session reaches the write only through Mongoose's `transactionAsyncLocalStorage`; and a
 * `saveAndUnlock()` whose transaction aborts leaves the lock held, on the server and on the
 * instance alike. Transactions need a replica set: skipped on a standalone server.
 */
import mongoose from 'mongoose';
import { LockNotHeldError } from '../../../src';
import { deploymentFacts, describeIf } from '../../conformance/support/server';
import { connect, testDatabase, type MonitoredConnection } from '../../support/db';
import { workItemModel, type WorkItemModel } from '../../support/work-item';
import { rawCollection } from './support';

const db = testDatabase('callertxn');
let conn: MonitoredConnection;
let WorkItem: WorkItemModel;

class Rollback extends Error {}

describeIf(deploymentFacts().setName !== undefined, 'transactions need a replica set')('inside the caller\'s transaction', () => {
  beforeAll(async () => {
    conn = await connect(db.name);
    WorkItem = await workItemModel(conn.connection, { ttl: 10_000 });
  });

  afterAll(async () => {
    mongoose.set('transactionAsyncLocalStorage', false);
    await db.drop(conn.connection);
    await conn.close();
  });

  /** Runs `body` in `connection.transaction()`, then throws so the transaction aborts. */
  async function abortedTransaction(body: () => Promise<unknown>): Promise<void> {
    const error = await conn.connection.transaction(async () => {
      await body();
      throw new Rollback('roll back');
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(Rollback);
  }

  describe('with transactionAsyncLocalStorage (no session passed explicitly)', () => {
    beforeAll(() => {
      mongoose.set('transactionAsyncLocalStorage', true);
    });
    afterAll(() => {
      mongoose.set('transactionAsyncLocalStorage', false);
    });

    test.each([
      ['updateOne', (id: unknown) => WorkItem.updateOne({ _id: id }, { $set: { title: 'escaped' } }).exec()],
      ['findOneAndUpdate', (id: unknown) => WorkItem.findOneAndUpdate({ _id: id }, { $set: { title: 'escaped' } }).exec()],
      ['updateMany by a field', (id: unknown) => WorkItem.updateMany({ _id: id, status: 'open' }, { $set: { title: 'escaped' } }).exec()],
      ['deleteMany', (id: unknown) => WorkItem.deleteMany({ _id: id }).exec()],
      ['bulkWrite', (id: unknown) => WorkItem.bulkWrite([{ updateOne: { filter: { _id: id }, update: { $set: { title: 'escaped' } } } }])],
      ['save', async (id: unknown) => {
        const doc = await WorkItem.findById(id).orFail();
        doc.title = 'escaped';
        await doc.save();
      }],
    ])('%s rolls back with the transaction', async (_name, write) => {
      const { _id: id } = await WorkItem.create({ title: 'original' });
      await abortedTransaction(() => write(id));
      const stored = await rawCollection(WorkItem).findOne({ _id: id });
      expect(stored?.title).toBe('original');
    });

    test('saveAndUnlock() rolls back with the transaction: the write is undone and the lock stays held, also on the instance', async () => {
      const { _id: id } = await WorkItem.create({ title: 'original' });
      const item = await WorkItem.lock(id, 'holder');
      item.title = 'escaped';
      await abortedTransaction(() => item.saveAndUnlock());
      expect((await rawCollection(WorkItem).findOne({ _id: id }))?.title).toBe('original');
      expect(await WorkItem.isLocked(id)).toBe(true);
      expect(item.heldLock()).not.toBeNull();
      await item.unlock(); // still the holder: releasing works
      expect(await WorkItem.isLocked(id)).toBe(false);
    });
  });

  test('saveAndUnlock({ session }) in a transaction that aborts: the lock stays held and the instance says so', async () => {
    const { _id: id } = await WorkItem.create({ title: 'original' });
    const item = await WorkItem.lock(id, 'holder');
    item.title = 'not kept';
    const error = await conn.connection.transaction(async (session) => {
      await item.saveAndUnlock({ session });
      throw new Rollback('roll back');
    }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(Rollback);
    expect(await WorkItem.isLocked(id)).toBe(true);
    expect(item.heldLock()).not.toBeNull();
    await item.unlock();
  });

  test('saveAndUnlock({ session }) in a transaction that commits: released, on the server and on the instance', async () => {
    const { _id: id } = await WorkItem.create({ title: 'original' });
    const item = await WorkItem.lock(id, 'holder');
    item.title = 'kept';
    await conn.connection.transaction(async (session) => {
      await item.saveAndUnlock({ session });
    });
    expect((await rawCollection(WorkItem).findOne({ _id: id }))?.title).toBe('kept');
    expect(await WorkItem.isLocked(id)).toBe(false);
    expect(item.heldLock()).toBeNull();
    const again = await item.unlock().catch((e: unknown) => e);
    expect(again).toBeInstanceOf(LockNotHeldError);
    expect((again as LockNotHeldError).reason).toBe('released');
  });
});
