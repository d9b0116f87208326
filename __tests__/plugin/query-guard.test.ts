/** Writes that bypass save() are guarded too: query writes, bulkWrite, doc.deleteOne(). */
import type { Types } from 'mongoose';
import { InvalidLockArgumentError, LockedError, runWithLockOwner } from '../../src';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('queryguard');
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

type Write = (M: WorkItemModel, id: Types.ObjectId, options: Record<string, unknown>) => Promise<unknown>;

const writes: [string, Write][] = [
  ['updateOne', (M, id, o) => M.updateOne({ _id: id }, { $set: { title: 'changed' } }, o).exec()],
  ['updateMany', (M, id, o) => M.updateMany({ _id: id }, { $set: { title: 'changed' } }, o).exec()],
  ['findOneAndUpdate', (M, id, o) => M.findOneAndUpdate({ _id: id }, { $set: { title: 'changed' } }, o).exec()],
  ['findOneAndReplace', (M, id, o) => M.findOneAndReplace({ _id: id }, { title: 'changed', status: 'open', edits: 0 }, o).exec()],
  ['replaceOne', (M, id, o) => M.replaceOne({ _id: id }, { title: 'changed', status: 'open', edits: 0 }, o).exec()],
  ['deleteOne', (M, id, o) => M.deleteOne({ _id: id }, o).exec()],
  ['deleteMany', (M, id, o) => M.deleteMany({ _id: id }, o).exec()],
  ['findOneAndDelete', (M, id, o) => M.findOneAndDelete({ _id: id }, o).exec()],
  ['bulkWrite', (M, id, o) => M.bulkWrite([{ updateOne: { filter: { _id: id }, update: { $set: { title: 'changed' } } } }], o)],
];

async function stored(M: WorkItemModel, id: Types.ObjectId) {
  return M.collection.findOne({ _id: id });
}

describe.each([
  ['with transactions where available', () => Txn],
  ["with transactions: 'never'", () => NoTxn],
])('%s', (_mode, model) => {
  describe.each(writes)('%s', (_name, write) => {
    test('by a non-holder is refused with LockedError and changes nothing', async () => {
      const M = model();
      const { _id: id } = await M.create({ title: 'original' });
      const holder = await M.lock(id, 'holder');
      const before = await stored(M, id);
      const error = await write(M, id, {}).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(LockedError);
      expect((error as LockedError).expiresAt?.getTime()).toBe(holder.heldLock()!.expiresAt.getTime());
      expect(await stored(M, id)).toEqual(before);
      await holder.unlock();
    });

    test('by the holder (lockOwner option) goes through', async () => {
      const M = model();
      const { _id: id } = await M.create({ title: 'original' });
      const holder = await M.lock(id, 'holder');
      await write(M, id, { lockOwner: 'holder' });
      const after = await stored(M, id);
      expect(after === null || after.title === 'changed').toBe(true);
      await holder.unlock().catch(() => undefined);
    });

    test('by the holder through the owner context goes through', async () => {
      const M = model();
      const { _id: id } = await M.create({ title: 'original' });
      await M.lock(id, 'ctx-holder');
      await runWithLockOwner('ctx-holder', () => write(M, id, {}));
      const after = await stored(M, id);
      expect(after === null || after.title === 'changed').toBe(true);
    });

    test('on an unlocked document goes through, and skipLockCheck skips the check', async () => {
      const M = model();
      const { _id: id } = await M.create({ title: 'original' });
      await write(M, id, {});
      const { _id: id2 } = await M.create({ title: 'original' });
      await M.lock(id2, 'holder');
      await write(M, id2, { skipLockCheck: true }); // explicitly unguarded
      const after = await stored(M, id2);
      expect(after === null || after.title === 'changed').toBe(true);
    });
  });

  test('a multi-document write touching one locked document is refused as a whole', async () => {
    const M = model();
    const docs = await M.create([{ title: 'm1' }, { title: 'm2' }, { title: 'm3' }]);
    const holder = await M.lock(docs[1]._id, 'holder');
    await expect(M.updateMany({ _id: { $in: docs.map((d) => d._id) } }, { $set: { title: 'bulk' } })).rejects.toBeInstanceOf(LockedError);
    const titles = (await M.find({ _id: { $in: docs.map((d) => d._id) } }).sort({ title: 1 })).map((d) => d.title);
    expect(titles).toEqual(['m1', 'm2', 'm3']);
    await holder.unlock();
  });

  test('doc.deleteOne() by a non-holder is refused', async () => {
    const M = model();
    const { _id: id } = await M.create({ title: 'keep me' });
    const plain = await M.findById(id).orFail();
    const holder = await M.lock(id, 'holder');
    await expect(plain.deleteOne()).rejects.toBeInstanceOf(LockedError);
    expect(await M.exists({ _id: id })).not.toBeNull();
    await holder.unlock();
  });
});

test('a bad lockOwner is refused before anything is sent', async () => {
  const { _id: id } = await Txn.create({ title: 'x' });
  conn.resetCommands();
  await expect(Txn.updateOne({ _id: id }, { $set: { title: 'y' } }).setOptions({ lockOwner: { $ne: null } as never })).rejects.toBeInstanceOf(InvalidLockArgumentError);
  expect(conn.commands).toEqual([]);
});

test("Mongoose's collection (Model.collection) is guarded; the driver's collection under it is not (documented)", async () => {
  const { _id: id } = await Txn.create({ title: 'raw' });
  const holder = await Txn.lock(id, 'holder');
  await expect(Txn.collection.updateOne({ _id: id }, { $set: { title: 'through mongoose' } })).rejects.toBeInstanceOf(LockedError);
  expect((await stored(Txn, id))!.title).toBe('raw');
  const driverCollection = Txn.db.getClient().db(Txn.db.name).collection(Txn.collection.collectionName);
  await driverCollection.updateOne({ _id: id }, { $set: { title: 'raw write' } });
  expect((await stored(Txn, id))!.title).toBe('raw write');
  await holder.unlock();
});

test('with transactions, no non-holder write lands while a holder holds the lock (randomized race)', async () => {
  const hello = await conn.connection.getClient().db('admin').command({ hello: 1 });
  if (typeof hello.setName !== 'string') {
    console.warn('query-guard race: the backend has no transactions; the atomic path is not exercised');
    return;
  }
  let violations = 0;
  for (let round = 0; round < 25; round++) {
    const { _id: id } = await Txn.create({ title: `race ${round}`, edits: 0 });
    const writer = (async () => {
      await sleep(Math.random() * 4);
      await Txn.updateOne({ _id: id }, { $inc: { edits: 1 } }).catch((error: unknown) => {
        if (!(error instanceof LockedError) && !(error as { hasErrorLabel?: (l: string) => boolean }).hasErrorLabel?.('TransientTransactionError')) throw error;
      });
    })();
    const locker = (async () => {
      await sleep(Math.random() * 4);
      const item = await Txn.lock(id, 'holder');
      const first = (await Txn.collection.findOne({ _id: id }))!.edits;
      await sleep(5);
      const second = (await Txn.collection.findOne({ _id: id }))!.edits;
      if (first !== second) violations++;
      await item.unlock();
    })();
    await Promise.all([writer, locker]);
  }
  expect(violations).toBe(0);
}, 60_000);

test('the cost README states: commands per guarded single-document write', async () => {
  const hello = await conn.connection.getClient().db('admin').command({ hello: 1 });
  const replicaSet = typeof hello.setName === 'string';
  const { _id: id } = await Txn.create({ title: 'counted' });
  conn.resetCommands();
  await Txn.updateOne({ _id: id }, { $set: { title: 'never locked' } });
  // _id filter, no lock record: claim (inserts one), write, delete the claim record, commit.
  expect(conn.commands).toEqual(replicaSet ? ['findAndModify', 'update', 'delete', 'commitTransaction'] : ['find', 'update']);
  await (await Txn.lock(id, 'someone')).unlock(); // now the document has a (released) lock record
  conn.resetCommands();
  await Txn.updateOne({ _id: id }, { $set: { title: 'has a record' } });
  expect(conn.commands).toEqual(replicaSet ? ['findAndModify', 'update', 'commitTransaction'] : ['find', 'update']);
  conn.resetCommands();
  await Txn.updateOne({ title: 'has a record' }, { $set: { title: 'by a field' } });
  expect(conn.commands).toEqual(replicaSet ? ['find', 'findAndModify', 'update', 'commitTransaction'] : ['find', 'find', 'update']);

  const { _id: other } = await NoTxn.create({ title: 'counted' });
  conn.resetCommands();
  await NoTxn.updateOne({ _id: other }, { $set: { title: 'counted twice' } });
  expect(conn.commands).toEqual(['find', 'update']);
  conn.resetCommands();
  await NoTxn.updateOne({ _id: other }, { $set: { title: 'unchecked' } }).setOptions({ skipLockCheck: true });
  expect(conn.commands).toEqual(['update']);
});
