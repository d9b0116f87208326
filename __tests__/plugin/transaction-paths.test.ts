/**
 * The two lock-collection commands of the write guard that only run inside a transaction with
 * more than the simplest input: the holder's own write to several locked documents (a lock check
 * before the batch, then in the batch's transaction one `find` of the targets' records and one
 * `update` claiming the existing ones; issue 10), and a locked document saved
 * inside the caller's own transaction (its lock record is written, so a takeover conflicts with
 * the transaction). docs/mongodb-compatibility.md documents both; these tests make the suite send
 * them, so the recorded command list (docs/lock-commands.json) covers them.
 * Both need transactions: on a standalone server they are skipped with a printed reason.
 */
import { LockNotHeldError } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('txnpaths');
let conn: MonitoredConnection;
let WorkItem: WorkItemModel;
let replicaSet = false;

beforeAll(async () => {
  conn = await connect(db.name);
  WorkItem = await workItemModel(conn.connection, { ttl: 10_000 });
  const hello = await conn.connection.getClient().db('admin').command({ hello: 1 });
  replicaSet = typeof hello.setName === 'string' || hello.msg === 'isdbgrid';
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

function needsTransactions(): boolean {
  if (!replicaSet) console.warn('transaction-paths: the backend has no transactions (standalone); skipped');
  return replicaSet;
}

test('the holder updates several locked documents: a lock check, then one find of the records and one update claiming them in the batch transaction', async () => {
  if (!needsTransactions()) return;
  const docs = await WorkItem.create([{ title: 'a' }, { title: 'b' }, { title: 'c' }]);
  const ids = docs.map((doc) => doc._id);
  for (const id of ids) await WorkItem.lock(id, 'holder');
  conn.resetCommands();
  const result = await WorkItem.updateMany({ _id: { $in: ids } }, { $set: { title: 'by the holder' } }).setOptions({ lockOwner: 'holder' });
  expect(result.modifiedCount).toBe(3);
  // The check before the batch (find), the batch: the records (find), their claim (update), the
  // write as one statement per document (update), the commit. Every target had a record (locked),
  // so nothing was inserted and nothing is deleted.
  expect(conn.commands).toEqual(['find', 'find', 'update', 'update', 'commitTransaction']);
  for (const id of ids) expect(await WorkItem.isLocked(id)).toBe(true);
  await WorkItem.releaseAllFor('holder');
});

test("a locked document saved inside the caller's transaction writes its lock record in that transaction", async () => {
  if (!needsTransactions()) return;
  const { _id: id } = await WorkItem.create({ title: 'before' });
  const item = await WorkItem.lock(id, 'holder');
  const session = await conn.connection.startSession();
  try {
    conn.resetCommands();
    await session.withTransaction(async () => {
      item.title = 'after';
      await item.save({ session });
    });
    // The guard's update of the lock record (verify), the document's update, the commit.
    expect(conn.commands).toEqual(['update', 'update', 'commitTransaction']);
  } finally {
    await session.endSession();
  }
  expect((await WorkItem.findById(id).orFail()).title).toBe('after');
  expect(item.heldLock()).not.toBeNull();
  await item.unlock();
  const again = await item.unlock().catch((e: unknown) => e);
  expect(again).toBeInstanceOf(LockNotHeldError);
});
