/**
 * Bad input gets a typed error before anything reaches the server (PRODUCT.md property 7):
 * proven with the driver's command monitoring. An owner or id can never act as a query.
 */
import { Schema, Types } from 'mongoose';
import { InvalidLockArgumentError, InvalidLockOptionError, LockError, lockPlugin, type LockableModel } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('badinput');
let conn: MonitoredConnection;
let WorkItem: WorkItemModel;
let StringIds: LockableModel<{ _id: string; title: string }>;
let realId: Types.ObjectId;

beforeAll(async () => {
  conn = await connect(db.name);
  WorkItem = await workItemModel(conn.connection);
  const schema = new Schema<{ _id: string; title: string }>({ _id: String, title: String });
  schema.plugin(lockPlugin);
  StringIds = conn.connection.model<{ _id: string; title: string }, LockableModel<{ _id: string; title: string }>>('StringIdItem', schema);
  await StringIds.init();
  await StringIds.lockModel().init();
  realId = (await WorkItem.create({ title: 'target' }))._id;
  await StringIds.create({ _id: 'doc-1', title: 'target' });
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

const badOwners: [string, unknown][] = [
  ['a query object', { $ne: null }],
  ['a $gt operator', { $gt: '' }],
  ['an array', ['session']],
  ['a number', 42],
  ['null', null],
  ['undefined', undefined],
  ['an empty string', ''],
  ['a huge string', 'x'.repeat(100_000)],
  ['a boolean', true],
  ['a String object', new String('session')],
];

const badIds: [string, unknown][] = [
  ['a query object', { $ne: null }],
  ['a $gt operator', { $gt: '' }],
  ['an empty object', {}],
  ['an array', [new Types.ObjectId()]],
  ['null', null],
  ['undefined', undefined],
  ['a malformed ObjectId string', 'not-an-object-id'],
  ['NaN', NaN],
  ['a function', () => 1],
  ['a document-like object with _id', { _id: new Types.ObjectId() }],
];

const badTtls: [string, unknown][] = [
  ['NaN', NaN],
  ['negative', -5],
  ['Infinity', Infinity],
  ['a string', '1000'],
  ['zero', 0],
];

async function expectRejectedWithoutCommands(call: () => Promise<unknown>, errorClass: typeof LockError, code: string): Promise<void> {
  conn.resetCommands();
  const error = await call().then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(errorClass);
  expect((error as LockError).code).toBe(code);
  expect(conn.commands).toEqual([]);
}

describe.each(badOwners)('owner: %s', (_label, owner) => {
  test('Model.lock refuses it', () => expectRejectedWithoutCommands(() => WorkItem.lock(realId, owner as string), InvalidLockArgumentError, 'INVALID_ARGUMENT'));
  test('Model.releaseAllFor refuses it', () => expectRejectedWithoutCommands(() => WorkItem.releaseAllFor(owner as string), InvalidLockArgumentError, 'INVALID_ARGUMENT'));
});

describe.each(badIds)('id: %s', (_label, id) => {
  for (const call of ['lock', 'isLocked', 'getLock', 'forceUnlock'] as const) {
    test(`Model.${call} refuses it`, () =>
      expectRejectedWithoutCommands(() => (call === 'lock' ? WorkItem.lock(id as string, 'session') : WorkItem[call](id as string)), InvalidLockArgumentError, 'INVALID_ARGUMENT'));
  }
  test('a String-_id model refuses it too (non-strings are not cast into queries)', async () => {
    if (typeof id === 'string') return; // a string is a valid String _id
    await expectRejectedWithoutCommands(() => StringIds.lock(id as string, 'session'), InvalidLockArgumentError, 'INVALID_ARGUMENT');
  });
});

describe.each(badTtls)('per-call ttl: %s', (_label, ttl) => {
  test('Model.lock refuses it', () => expectRejectedWithoutCommands(() => WorkItem.lock(realId, 'session', { ttl: ttl as number }), InvalidLockOptionError, 'INVALID_OPTION'));
});

test('an unknown per-call option is refused', () =>
  expectRejectedWithoutCommands(() => WorkItem.lock(realId, 'session', { tll: 5 } as never), InvalidLockOptionError, 'INVALID_OPTION'));

test('the error message says what was wrong and what to pass instead', async () => {
  const error = (await WorkItem.lock(realId, { $ne: null } as never).catch((e: unknown) => e)) as InvalidLockArgumentError;
  expect(error.argument).toBe('owner');
  expect(error.message).toMatch(/owner/);
  expect(error.message).toMatch(/non-empty string/);
  expect(error.message).not.toContain('$ne');
});

test('an injected owner never matched anything: the real holder keeps the lock', async () => {
  const holder = await WorkItem.lock(realId, 'real-holder');
  await expect(WorkItem.releaseAllFor({ $ne: null } as never)).rejects.toBeInstanceOf(InvalidLockArgumentError);
  expect(await WorkItem.isLocked(realId)).toBe(true);
  await holder.unlock();
});
