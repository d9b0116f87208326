/**
 * README "The save guard" and option `requireLock`, for `Model.bulkSave`:
 *  - "a document from `Model.lock` saves only while that exact acquisition is current ... Once its
 *    lock is gone (released, expired, taken over) that instance stays refused" (PRODUCT.md
 *    properties 5 and 12). `bulkSave` builds one bulkWrite from its documents, so no instance's
 *    acquisition can be checked; it used to run that bulk write as the instances' owner, so an
 *    instance whose acquisition was renewed in another tab was refused by `save()` but written by
 *    `bulkSave()`, overwriting the current acquisition's work. Documents carrying a lock are now
 *    refused (InvalidLockArgumentError, before anything is sent): save them one by one.
 *  - `requireLock: true`: "saving an existing document requires that it carries a current lock".
 *    `bulkSave` of an existing document loaded without a lock was written while `save()` was
 *    refused. Now refused with LockNotHeldError (`reason: 'not_locked'`), unless the bulk write's
 *    owner (`lockOwner`, owner context) holds the lock of every existing document, as for `save()`.
 *
 * Found by the attack on the guard.
 */
import { InvalidLockArgumentError, LockNotHeldError, runWithLockOwner } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';
import { outcome } from '../plugin/guard/support';

const db = testDatabase('reg_bulksave');
let conn: MonitoredConnection;

beforeAll(async () => {
  conn = await connect(db.name);
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

describe.each([["transactions: 'auto'", 'auto'], ["transactions: 'never'", 'never']] as const)('%s', (_label, transactions) => {
  let M: WorkItemModel;
  let Required: WorkItemModel;
  beforeAll(async () => {
    M = await workItemModel(conn.connection, { ttl: 30_000, transactions });
    Required = await workItemModel(conn.connection, { ttl: 30_000, requireLock: true, transactions });
  });

  test('control: save() of an instance whose acquisition was renewed elsewhere is refused', async () => {
    const { _id: id } = await M.create({ title: 'original' });
    const tab1 = await M.lock(id, 'alice');
    const tab2 = await M.lock(id, 'alice'); // renewal: tab1's acquisition is gone
    tab2.title = 'saved by tab 2';
    await tab2.save();
    tab1.title = 'stale tab 1';
    await expect(tab1.save()).rejects.toBeInstanceOf(LockNotHeldError);
    expect((await M.findById(id).lean())?.title).toBe('saved by tab 2');
    await tab2.unlock();
  });

  test('Model.bulkSave of an instance whose acquisition was renewed elsewhere is refused, nothing sent', async () => {
    const { _id: id } = await M.create({ title: 'original' });
    const tab1 = await M.lock(id, 'alice');
    const tab2 = await M.lock(id, 'alice');
    tab2.title = 'saved by tab 2';
    await tab2.save();
    tab1.title = 'stale tab 1';
    conn.resetCommands();
    const result = await outcome(M.bulkSave([tab1]));
    expect((result as { error: unknown }).error).toBeInstanceOf(InvalidLockArgumentError);
    expect(conn.commands).toEqual([]);
    expect((await M.findById(id).lean())?.title).toBe('saved by tab 2');
    await tab2.unlock();
  });

  test('Model.bulkSave of a current locked instance is refused too (save it with save() / saveAndUnlock()), beside new documents', async () => {
    const { _id: id } = await M.create({ title: 'original' });
    const held = await M.lock(id, 'alice');
    held.title = 'bulk';
    const error = (await outcome(M.bulkSave([new M({ title: 'new' }), held]))) as { error: Error };
    expect(error.error).toBeInstanceOf(InvalidLockArgumentError);
    expect(error.error.message).toMatch(/saveAndUnlock/);
    expect(await M.countDocuments({ title: 'new' })).toBe(0);
    await held.saveAndUnlock();
    expect((await M.findById(id).lean())?.title).toBe('bulk');
  });

  test('requireLock: save() of a document loaded without a lock is refused (control)', async () => {
    const { _id: id } = await Required.create({ title: 'original' });
    const plain = await Required.findById(id).orFail();
    plain.title = 'saved without a lock';
    await expect(plain.save()).rejects.toBeInstanceOf(LockNotHeldError);
  });

  test('requireLock: Model.bulkSave of a document loaded without a lock is refused with not_locked, nothing sent', async () => {
    const { _id: id } = await Required.create({ title: 'original' });
    const plain = await Required.findById(id).orFail();
    plain.title = 'bulk saved without a lock';
    conn.resetCommands();
    const result = (await outcome(Required.bulkSave([plain]))) as { error: LockNotHeldError };
    expect(result.error).toBeInstanceOf(LockNotHeldError);
    expect(result.error.reason).toBe('not_locked');
    expect(conn.commands).toEqual([]);
    expect((await Required.findById(id).lean())?.title).toBe('original');
  });

  test('requireLock: as an owner that does not hold the lock, refused with not_locked; as the holder, written; new documents always', async () => {
    const { _id: id } = await Required.create({ title: 'original' });
    const plain = await Required.findById(id).orFail();
    plain.title = 'by bob';
    const refused = (await outcome(Required.bulkSave([plain], { lockOwner: 'bob' } as never))) as { error: LockNotHeldError };
    expect(refused.error).toBeInstanceOf(LockNotHeldError);
    expect(refused.error.reason).toBe('not_locked');
    expect((await Required.findById(id).lean())?.title).toBe('original');

    const held = await Required.lock(id, 'alice');
    const copy = await Required.findById(id).orFail();
    copy.title = 'by alice';
    await runWithLockOwner('alice', () => Required.bulkSave([copy, new Required({ title: 'new one' })]));
    expect((await Required.findById(id).lean())?.title).toBe('by alice');
    expect(await Required.countDocuments({ title: 'new one' })).toBe(1);
    await held.unlock();

    await expect(Required.bulkSave([new Required({ title: 'only new' })])).resolves.toBeDefined();
  });
});
