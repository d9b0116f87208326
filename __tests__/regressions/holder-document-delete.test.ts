/**
 * Attack: PRODUCT.md property 10 ("the guard refuses writes only because of someone else's lock")
 * and the README's write-path table (`doc.deleteOne()`: guarded by document middleware).
 *
 * The document middleware for `doc.deleteOne()` asks only the owner context
 * (`currentLockOwner()`), never the lock the document instance carries. So the holder, deleting
 * the very document `Model.lock` returned to it, is refused with "locked by another owner": its own
 * lock. `doc.save()` of the same instance is allowed (the save guard reads `heldLockState`).
 * `Model.bulkSave([doc])` of the holder's own locked instance is refused loudly instead
 * (InvalidLockArgumentError: a bulk write cannot check the instance's acquisition; running it as
 * the instance's owner let a stale instance write, see bulksave-locked-instances.test.ts); the
 * holder bulk-saves a copy as its owner (`lockOwner`).
 */
import { InvalidLockArgumentError, LockedError } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('atk_holderdelete');
let conn: MonitoredConnection;
let Txn: WorkItemModel;
let NoTxn: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  Txn = await workItemModel(conn.connection, { ttl: 10_000 });
  NoTxn = await workItemModel(conn.connection, { ttl: 10_000, transactions: 'never' });
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

describe.each([
  ["transactions: 'auto'", () => Txn],
  ["transactions: 'never'", () => NoTxn],
])('%s', (_mode, model) => {
  test('the holder deletes the document it locked (doc.deleteOne() on the instance from Model.lock)', async () => {
    const M = model();
    const { _id: id } = await M.create({ title: 'delete me' });
    const item = await M.lock(id, 'alice');
    const error = await item.deleteOne().then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).not.toBeInstanceOf(LockedError);
    expect(error).toBeUndefined();
    expect(await M.collection.findOne({ _id: id })).toBeNull();
  });

  test('Model.bulkSave([doc]) of the instance Model.lock returned is refused; the holder bulk-saves a copy as its owner', async () => {
    const M = model();
    const { _id: id } = await M.create({ title: 'original' });
    const item = await M.lock(id, 'alice');
    item.title = 'bulk saved by the holder';
    await expect(M.bulkSave([item])).rejects.toBeInstanceOf(InvalidLockArgumentError);
    expect((await M.collection.findOne({ _id: id }))!.title).toBe('original');
    expect(item.heldLock()).not.toBeNull();

    const copy = await M.findById(id).orFail();
    copy.title = 'bulk saved by the holder';
    const error = await M.bulkSave([copy], { lockOwner: 'alice' } as never).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(error).toBeUndefined();
    expect((await M.collection.findOne({ _id: id }))!.title).toBe('bulk saved by the holder');
  });

  test('control: another owner is still refused', async () => {
    const M = model();
    const { _id: id } = await M.create({ title: 'keep me' });
    await M.lock(id, 'alice');
    const plain = await M.findById(id).orFail();
    await expect(plain.deleteOne()).rejects.toBeInstanceOf(LockedError);
    expect(await M.collection.findOne({ _id: id })).not.toBeNull();
  });
});
