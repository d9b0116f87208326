/** The write guard on save() and saveAndUnlock(): PRODUCT.md properties 2, 5 and 6. */
import { mongo } from 'mongoose';
import { LockExpiredError, LockNotHeldError, LockedError } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';
import { staleLock } from '../support/stale-lock';

const db = testDatabase('guard');
let conn: MonitoredConnection;
let WorkItem: WorkItemModel;
let NoTxn: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  WorkItem = await workItemModel(conn.connection, { ttl: 5_000 });
  NoTxn = await workItemModel(conn.connection, { ttl: 5_000, transactions: 'never' });
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

/** The stored document's exact BSON bytes. */
async function storedBytes(model: WorkItemModel, id: unknown): Promise<Buffer> {
  const raw = await conn.connection.getClient().db(db.name).collection(model.collection.collectionName).findOne({ _id: id as never });
  return Buffer.from(mongo.BSON.serialize(raw!)); // the BSON of Mongoose's own driver
}

test('locking never changes the locked document: its bytes are identical before, during and after', async () => {
  const { _id: id } = await WorkItem.create({ title: 'untouched' });
  const before = await storedBytes(WorkItem, id);
  const item = await WorkItem.lock(id, 'session-a');
  expect((await storedBytes(WorkItem, id)).equals(before)).toBe(true);
  await item.unlock();
  expect((await storedBytes(WorkItem, id)).equals(before)).toBe(true);
});

for (const [label, model] of [
  ['with transactions where available', () => WorkItem],
  ["with transactions: 'never'", () => NoTxn],
] as const) {
  describe(`saveAndUnlock ${label}`, () => {
    test('writes the change and releases the lock', async () => {
      const M = model();
      const { _id: id } = await M.create({ title: 'before' });
      const item = await M.lock(id, 'session-a');
      item.title = 'after';
      await item.saveAndUnlock();
      expect((await M.findById(id).orFail()).title).toBe('after');
      expect(await M.isLocked(id)).toBe(false);
      expect(item.heldLock()).toBeNull();
      const again = await item.unlock().catch((e: unknown) => e);
      expect((again as LockNotHeldError).reason).toBe('released');
    });

    test('a failing save keeps the lock held so the caller can retry', async () => {
      const M = model();
      const { _id: id } = await M.create({ title: 'valid' });
      const item = await M.lock(id, 'session-a');
      item.title = 'x'.repeat(101); // violates maxlength
      const error = await item.saveAndUnlock().catch((e: unknown) => e);
      expect((error as Error).name).toBe('ValidationError');
      expect(await M.isLocked(id)).toBe(true);
      expect(item.heldLock()).not.toBeNull();
      item.title = 'fixed';
      await item.saveAndUnlock();
      expect((await M.findById(id).orFail()).title).toBe('fixed');
      expect(await M.isLocked(id)).toBe(false);
    });

    test('a holder whose lock expired and was taken over writes nothing; the new holder\'s data is intact', async () => {
      const M = model();
      const { _id: id } = await M.create({ title: 'original' });
      const stale = await staleLock(M, id, 'session-a');
      const fresh = await M.lock(id, 'session-b');
      fresh.title = 'written by b';
      await fresh.save();
      const bytes = await storedBytes(M, id);

      stale.title = 'written by a';
      const error = await stale.saveAndUnlock().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LockNotHeldError);
      expect((error as LockNotHeldError).reason).toBe('taken_over');
      expect((await storedBytes(M, id)).equals(bytes)).toBe(true);
      expect(await M.isLocked(id)).toBe(true);
      await fresh.unlock();
    });

    test('an expired lock nobody took: LockExpiredError and nothing written', async () => {
      const M = model();
      const { _id: id } = await M.create({ title: 'original' });
      const stale = await staleLock(M, id, 'session-a', 100);
      const bytes = await storedBytes(M, id);
      stale.title = 'late write';
      const error = await stale.saveAndUnlock().catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LockExpiredError);
      expect((await storedBytes(M, id)).equals(bytes)).toBe(true);
    });
  });
}

describe('save()', () => {
  test('a holder saves while its lock is current, and the lock stays held', async () => {
    const { _id: id } = await WorkItem.create({ title: 'a' });
    const item = await WorkItem.lock(id, 'session-a');
    item.edits = 1;
    await item.save();
    item.edits = 2;
    await item.save();
    expect((await WorkItem.findById(id).orFail()).edits).toBe(2);
    expect(await WorkItem.isLocked(id)).toBe(true);
    await item.unlock();
  });

  test('a document loaded without the lock cannot be saved while someone else holds it', async () => {
    const { _id: id } = await WorkItem.create({ title: 'guarded' });
    const plain = await WorkItem.findById(id).orFail();
    const holder = await WorkItem.lock(id, 'session-a');
    const bytes = await storedBytes(WorkItem, id);
    plain.title = 'sneaky';
    const error = await plain.save().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockedError);
    expect((error as LockedError).expiresAt?.getTime()).toBe(holder.heldLock()!.expiresAt.getTime());
    expect((await storedBytes(WorkItem, id)).equals(bytes)).toBe(true);
    await holder.unlock();
    await plain.save();
    expect((await WorkItem.findById(id).orFail()).title).toBe('sneaky');
  });

  test('a stale holder\'s plain save is rejected after a takeover', async () => {
    const { _id: id } = await NoTxn.create({ title: 'orig' });
    const stale = await staleLock(NoTxn, id, 'session-a', 100);
    const fresh = await NoTxn.lock(id, 'session-b');
    const bytes = await storedBytes(NoTxn, id);
    stale.title = 'stale';
    const error = await stale.save().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockNotHeldError);
    expect((error as LockNotHeldError).reason).toBe('taken_over');
    expect((await storedBytes(NoTxn, id)).equals(bytes)).toBe(true);
    await fresh.unlock();
  });

  test('new documents save normally', async () => {
    const created = await new WorkItem({ title: 'brand new' }).save();
    expect((await WorkItem.findById(created._id).orFail()).title).toBe('brand new');
  });

  test('requireLock: an existing document can only be saved through its lock', async () => {
    const Strict = await workItemModel(conn.connection, { requireLock: true });
    const { _id: id } = await Strict.create({ title: 'strict' }); // creating needs no lock
    const plain = await Strict.findById(id).orFail();
    plain.title = 'no lock';
    const error = await plain.save().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockNotHeldError);
    expect((error as LockNotHeldError).reason).toBe('not_locked');
    expect((await Strict.findById(id).orFail()).title).toBe('strict');
    const locked = await Strict.lock(id, 'session-a');
    locked.title = 'with lock';
    await locked.saveAndUnlock();
    expect((await Strict.findById(id).orFail()).title).toBe('with lock');
  });
});

test('a rejected stale save stays rejected: retrying it cannot slip through once the lock looks free', async () => {
  const { _id: id } = await WorkItem.create({ title: 'original' });
  const stale = await staleLock(WorkItem, id, 'session-a', 100);
  stale.title = 'late write';
  await expect(stale.save()).rejects.toBeInstanceOf(LockExpiredError);
  expect(await WorkItem.isLocked(id)).toBe(false); // nobody holds it now
  const retry = await stale.save().catch((e: unknown) => e);
  expect(retry).toBeInstanceOf(LockExpiredError);
  expect((await WorkItem.findById(id).orFail()).title).toBe('original');
});

test('after unlock(), the same instance cannot save; a reloaded copy can', async () => {
  const { _id: id } = await WorkItem.create({ title: 'original' });
  const item = await WorkItem.lock(id, 'session-a');
  await item.unlock();
  item.title = 'after unlock';
  const error = await item.save().catch((e: unknown) => e);
  expect(error).toBeInstanceOf(LockNotHeldError);
  expect((error as LockNotHeldError).reason).toBe('released');
  const fresh = await WorkItem.findById(id).orFail();
  fresh.title = 'reloaded';
  await fresh.save();
  expect((await WorkItem.findById(id).orFail()).title).toBe('reloaded');
});
