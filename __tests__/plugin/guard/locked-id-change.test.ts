/**
 * A locked instance holds the lock on the document it was locked as, and on nothing else
 * (PRODUCT.md properties 5 and 6). Mongoose sends an instance's write to its CURRENT `_id`; the
 * guard used to recognise the holder's write by that current `_id` too, and then checked the
 * instance's own lock (on X). So Alice, holding X, could set `doc._id = Y` (a document Bob holds)
 * and `save()` or `deleteOne()` it: her lock on X was verified and the write went to Y.
 *
 * Now the holder's write is keyed by the locked `_id` (`heldLock().documentId`), and a locked
 * instance whose `_id` was changed is refused with InvalidLockArgumentError (argument `_id`)
 * before anything is sent, on every document write path; the lock on X stays held. Runs on both
 * guard paths. (Found by the attack run, `__tests__/attack/holder-changes-id.test.ts`.)
 */
import { InvalidLockArgumentError, type LockPluginOptions } from '../../../src';
import { connect, testDatabase, type MonitoredConnection } from '../../support/db';
import { workItemModel, type WorkItemModel } from '../../support/work-item';
import { outcome, rawCollection } from './support';

const db = testDatabase('lockedidchange');
let conn: MonitoredConnection;

beforeAll(async () => {
  conn = await connect(db.name);
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

describe.each([
  ["transactions: 'auto'", { ttl: 30_000 }],
  ["transactions: 'never'", { ttl: 30_000, transactions: 'never' }],
] as [string, LockPluginOptions][])('%s', (_label, options) => {
  let M: WorkItemModel;
  beforeAll(async () => {
    M = await workItemModel(conn.connection, options);
  });

  async function setup() {
    const { _id: x } = await M.create({ title: 'X, held by Alice' });
    const { _id: y } = await M.create({ title: 'Y, held by Bob' });
    await M.lock(y, 'bob');
    const alices = await M.lock(x, 'alice');
    return { x, y, alices };
  }

  const writes: [string, (doc: Awaited<ReturnType<WorkItemModel['lock']>>) => Promise<unknown>][] = [
    ['save()', (doc) => doc.save()],
    ['saveAndUnlock()', (doc) => doc.saveAndUnlock()],
    ['deleteOne()', (doc) => doc.deleteOne()],
    ['updateOne()', (doc) => doc.updateOne({ $set: { title: 'overwritten by Alice' } }).exec()],
    ['replaceOne()', (doc) => doc.replaceOne({ title: 'overwritten by Alice' }).exec()],
  ];

  test.each(writes)('%s of a locked instance whose _id was changed to a document someone else holds is refused; nothing is written', async (_name, write) => {
    const { x, y, alices } = await setup();
    alices._id = y;
    alices.title = 'overwritten by Alice';
    const commandsBefore = conn.commands.length;
    const result = await outcome(write(alices));

    expect(result.ok).toBe(false);
    const error = (result as { error: unknown }).error;
    expect(error).toBeInstanceOf(InvalidLockArgumentError);
    expect((error as InvalidLockArgumentError).argument).toBe('_id');
    expect(conn.commands.slice(commandsBefore).filter((name) => ['update', 'delete', 'findAndModify'].includes(name))).toEqual([]);
    expect((await rawCollection(M).findOne({ _id: y }))?.title).toBe('Y, held by Bob');
    expect((await rawCollection(M).findOne({ _id: x }))?.title).toBe('X, held by Alice');
    expect(await M.isLocked(x)).toBe(true); // Alice's lock stays held
  });

  test('changing the _id to a document nobody holds is refused too (the lock does not cover it)', async () => {
    const { x, alices } = await setup();
    const { _id: z } = await M.create({ title: 'Z, free' });
    alices._id = z;
    alices.title = 'overwritten by Alice';
    const result = await outcome(alices.save());
    expect((result as { error: unknown }).error).toBeInstanceOf(InvalidLockArgumentError);
    expect((await rawCollection(M).findOne({ _id: z }))?.title).toBe('Z, free');
    expect((await rawCollection(M).findOne({ _id: x }))?.title).toBe('X, held by Alice');
  });

  test('setting the _id back to the locked one saves as the holder', async () => {
    const { x, y, alices } = await setup();
    alices._id = y;
    alices._id = x;
    alices.title = 'edited by Alice';
    await alices.saveAndUnlock();
    expect((await rawCollection(M).findOne({ _id: x }))?.title).toBe('edited by Alice');
  });
});
