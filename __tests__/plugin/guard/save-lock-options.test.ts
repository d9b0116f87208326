/**
 * Property 7 (bad input gets a clear, typed error before anything touches the database) and the
 * README's owner rules: only the documented entry points name a writer (`lockOwner` /
 * `skipLockCheck` on query writes and `Model.bulkWrite` / `Model.bulkSave`, or the owner
 * context). `save()`, `$save()` and `saveAndUnlock()` take neither: Mongoose passes only a few known
 * save options on to the collection (`_createSaveOptions` in mongoose/lib/model.js), so the guard
 * would never see them; a malformed one was accepted without a word and a well-formed one silently
 * ignored. They are refused with InvalidLockOptionError before anything is sent.
 *
 * Found by the attack on the guard.
 */
import { InvalidLockOptionError } from '../../../src';
import { connect, testDatabase, type MonitoredConnection } from '../../support/db';
import { workItemModel, type WorkItemModel } from '../../support/work-item';
import { outcome } from './support';

const db = testDatabase('guard_saveopts');
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

const OPTIONS: [string, Record<string, unknown>][] = [
  ['{ lockOwner: 42 }', { lockOwner: 42 }],
  ['{ lockOwner: { $ne: null } }', { lockOwner: { $ne: null } }],
  ["{ lockOwner: 'alice' }", { lockOwner: 'alice' }],
  ["{ skipLockCheck: 'yes' }", { skipLockCheck: 'yes' }],
  ['{ skipLockCheck: true }', { skipLockCheck: true }],
];

test.each(OPTIONS)('save(%s) of an existing document is refused with InvalidLockOptionError before anything is sent', async (_name, options) => {
  const { _id: id } = await M.create({ title: 'original' });
  const doc = await M.findById(id).orFail();
  doc.title = 'changed';
  conn.resetCommands();
  const result = await outcome(doc.save(options as never));
  expect((result as { error: unknown }).error).toBeInstanceOf(InvalidLockOptionError);
  expect(conn.commands).toEqual([]);
  expect((await M.findById(id).lean())?.title).toBe('original');
});

test.each(OPTIONS)('$save(%s) and save of a new document are refused too', async (_name, options) => {
  const { _id: id } = await M.create({ title: 'original' });
  const doc = await M.findById(id).orFail();
  doc.title = 'changed';
  await expect((doc as unknown as { $save(o: unknown): Promise<unknown> }).$save(options)).rejects.toBeInstanceOf(InvalidLockOptionError);
  const fresh = new M({ title: 'new' });
  conn.resetCommands();
  await expect(fresh.save(options as never)).rejects.toBeInstanceOf(InvalidLockOptionError);
  expect(conn.commands).toEqual([]);
});

test.each(OPTIONS)('saveAndUnlock(%s) is refused, and the lock stays held', async (_name, options) => {
  const { _id: id } = await M.create({ title: 'original' });
  const held = await M.lock(id, 'alice');
  held.title = 'changed';
  conn.resetCommands();
  await expect(held.saveAndUnlock(options as never)).rejects.toBeInstanceOf(InvalidLockOptionError);
  expect(conn.commands).toEqual([]);
  expect(held.heldLock()).not.toBeNull();
  await held.unlock();
});

test('control: ordinary save options still work', async () => {
  const { _id: id } = await M.create({ title: 'original' });
  const held = await M.lock(id, 'alice');
  held.title = 'changed';
  await held.save({ validateBeforeSave: true });
  await held.saveAndUnlock({ validateModifiedOnly: true });
  expect((await M.findById(id).lean())?.title).toBe('changed');
});
