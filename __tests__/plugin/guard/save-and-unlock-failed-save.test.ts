/**
 * README "Document methods", `doc.saveAndUnlock()`: "If the save fails (validation, a server
 * error) the lock stays held, so you can fix and retry."
 *
 * Mongoose decides only after the collection call returned whether a save failed: an `update`
 * that matched nothing (the version in the filter no longer matches: VersionError with
 * `optimisticConcurrency`; the document is gone: DocumentNotFoundError) is a failed save. In the
 * guard's own transaction the release comes first (it is the check), so a write that matched
 * nothing must abort that transaction, release included. In the caller's transaction the guard
 * verifies, writes, and releases only after a write that touched the document, so a caller that
 * catches the failed save and commits anyway commits no release.
 *
 * Found by the attack on the guard: the release was committed although the save failed.
 */
import { Schema } from 'mongoose';
import { lockPlugin, runWithLockOwner, type LockableModel, type LockMethods } from '../../../src';
import { onReplicaSet } from '../../support/topology';
import { connect, testDatabase, type MonitoredConnection } from '../../support/db';
import { outcome } from './support';

interface Item {
  title: string;
}
type ItemModel = LockableModel<Item>;

const db = testDatabase('guard_sauversion');
let conn: MonitoredConnection;

beforeAll(async () => {
  conn = await connect(db.name);
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

describe.each([["transactions: 'auto'", 'auto'], ["transactions: 'never'", 'never']] as const)('%s', (_label, transactions) => {
  let M: ItemModel;
  beforeAll(async () => {
    const schema = new Schema<Item, ItemModel, LockMethods>({ title: String }, { optimisticConcurrency: true });
    schema.plugin(lockPlugin, { ttl: 30_000, transactions });
    M = conn.connection.model<Item, ItemModel>(`Versioned_${transactions}`, schema);
    await M.init();
    await M.lockModel().init();
  });

  /** Alice's second tab saves the same document in her owner context (allowed): version 1. */
  async function saveFromSecondTab(id: unknown): Promise<void> {
    await runWithLockOwner('alice', async () => {
      const tab2 = await M.findById(id).orFail();
      tab2.title = 'from tab 2';
      await tab2.save();
    });
  }

  test('a saveAndUnlock that fails with VersionError leaves the lock held, and a retry after reloading works', async () => {
    const { _id: id } = await M.create({ title: 'v0' });
    const tab1 = await M.lock(id, 'alice');
    await saveFromSecondTab(id);

    tab1.title = 'from tab 1';
    const result = await outcome(tab1.saveAndUnlock());
    expect(result.ok).toBe(false);
    expect((result as { error: Error }).error.name).toBe('VersionError');
    expect((await M.findById(id).lean())?.title).toBe('from tab 2'); // nothing written
    expect(tab1.heldLock()).not.toBeNull();
    expect(await M.isLocked(id)).toBe(true);
    await expect(M.tryLock(id, 'bob')).resolves.toBeNull();

    // Fix and retry: the same acquisition, a fresh copy of the document.
    const fresh = await M.lock(id, 'alice', { resume: tab1.heldLock()!.ticket });
    fresh.title = 'from tab 1, merged';
    await fresh.saveAndUnlock();
    expect(await M.isLocked(id)).toBe(false);
    expect((await M.findById(id).lean())?.title).toBe('from tab 1, merged');
  });

  test('a saveAndUnlock of a document deleted meanwhile leaves the lock held', async () => {
    const { _id: id } = await M.create({ title: 'v0' });
    const held = await M.lock(id, 'alice');
    await runWithLockOwner('alice', () => M.deleteOne({ _id: id }));
    held.title = 'edited';
    const result = await outcome(held.saveAndUnlock());
    // With optimisticConcurrency Mongoose reports a vanished document as a VersionError too.
    expect(['DocumentNotFoundError', 'VersionError']).toContain((result as { error: Error }).error?.name);
    expect(held.heldLock()).not.toBeNull();
    expect(await M.isLocked(id)).toBe(true);
    await held.unlock();
  });

  (onReplicaSet() ? test : test.skip)('in the caller\'s transaction: a failed save commits no release, even if the caller commits', async () => {
    const { _id: id } = await M.create({ title: 'v0' });
    const tab1 = await M.lock(id, 'alice');
    await saveFromSecondTab(id);
    tab1.title = 'from tab 1';
    const session = await conn.connection.startSession();
    try {
      session.startTransaction();
      const result = await outcome(tab1.saveAndUnlock({ session }));
      expect((result as { error: Error }).error?.name).toBe('VersionError');
      await session.commitTransaction(); // the caller carries on with its transaction
    } finally {
      await session.endSession();
    }
    expect(tab1.heldLock()).not.toBeNull();
    expect(await M.isLocked(id)).toBe(true);
    expect((await M.findById(id).lean())?.title).toBe('from tab 2');

    // ...and a successful one in the caller's transaction releases with its commit.
    const fresh = await M.lock(id, 'alice', { resume: tab1.heldLock()!.ticket });
    fresh.title = 'merged';
    await conn.connection.transaction(async (s) => {
      await fresh.saveAndUnlock({ session: s });
    });
    expect(await M.isLocked(id)).toBe(false);
    expect((await M.findById(id).lean())?.title).toBe('merged');
  });
});
