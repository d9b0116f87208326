/**
 * Defect 6 of issue 10, first half: the holder's own writes go through. `doc.deleteOne()` of a
 * document taken with `Model.lock` (its own acquisition), or of a plain document by an owner
 * named with `lockOwner` or the owner context, deletes it; anyone else is refused. Runs on both
 * guard paths.
 */
import { LockNotHeldError, LockedError, runWithLockOwner, type LockPluginOptions } from '../../../src';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../../support/db';
import { workItemModel, type WorkItemModel } from '../../support/work-item';
import { rawCollection } from './support';

const db = testDatabase('holderwrites');
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

  test('doc.deleteOne() of the document Model.lock returned deletes it', async () => {
    const { _id: id } = await M.create({ title: 'mine' });
    const item = await M.lock(id, 'holder');
    await item.deleteOne();
    expect(await rawCollection(M).findOne({ _id: id })).toBeNull();
  });

  test('doc.deleteOne({ lockOwner }) of a plain document by its holder deletes it', async () => {
    const { _id: id } = await M.create({ title: 'mine' });
    const plain = await M.findById(id).orFail();
    await M.lock(id, 'holder');
    await plain.deleteOne({ lockOwner: 'holder' } as never);
    expect(await rawCollection(M).findOne({ _id: id })).toBeNull();
  });

  test('doc.deleteOne() of a plain document in its holder\'s owner context deletes it', async () => {
    const { _id: id } = await M.create({ title: 'mine' });
    const plain = await M.findById(id).orFail();
    await M.lock(id, 'holder');
    // The query must run inside the callback (a Query is lazy: awaiting it later would run it outside).
    await runWithLockOwner('holder', async () => {
      await plain.deleteOne();
    });
    expect(await rawCollection(M).findOne({ _id: id })).toBeNull();
  });

  test('doc.deleteOne() by another owner, or anonymously, is refused', async () => {
    const { _id: id } = await M.create({ title: 'theirs' });
    const plain = await M.findById(id).orFail();
    await M.lock(id, 'holder');
    await expect(plain.deleteOne({ lockOwner: 'intruder' } as never)).rejects.toBeInstanceOf(LockedError);
    await expect(plain.deleteOne()).rejects.toBeInstanceOf(LockedError);
    expect(await rawCollection(M).findOne({ _id: id })).not.toBeNull();
  });

  test('doc.deleteOne() of a document whose lock expired and was taken over: LockNotHeldError (taken_over), nothing deleted', async () => {
    const { _id: id } = await M.create({ title: 'mine' });
    const stale = await M.lock(id, 'holder', { ttl: 100 });
    await sleep(200);
    await M.lock(id, 'newcomer');
    const error = await stale.deleteOne().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockNotHeldError);
    expect((error as LockNotHeldError).reason).toBe('taken_over');
    expect(await rawCollection(M).findOne({ _id: id })).not.toBeNull();
  });
});
