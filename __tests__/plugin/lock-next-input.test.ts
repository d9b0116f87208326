/**
 * Bad input to lockNext / acquireNext / withNext gets a typed error before anything reaches the
 * server (PRODUCT.md property 7), proven with command monitoring. The filter is the caller's query;
 * nothing else the caller passes (owner, ttl, label, sort) is ever evaluated as a query or an
 * expression (property 11).
 */
import type { mongo } from 'mongoose';
import { InvalidLockArgumentError, InvalidLockOptionError, LockError, MAX_SORT_FIELDS } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { jobModel, type JobModel } from '../support/job';

const db = testDatabase('locknext_input');
let conn: MonitoredConnection;
let Job: JobModel;
const sent: mongo.Document[] = [];

beforeAll(async () => {
  conn = await connect(db.name);
  conn.connection.getClient().on('commandStarted', (event) => sent.push(event.command));
  Job = await jobModel(conn.connection);
  await Job.create({ payload: 'x' });
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

async function refused(call: () => Promise<unknown>, errorClass: typeof LockError, field: Record<string, string>): Promise<LockError> {
  conn.resetCommands();
  const error = await call().then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(errorClass);
  expect(error).toMatchObject(field);
  expect(conn.commands).toEqual([]);
  return error as LockError;
}

const badFilters: [string, unknown][] = [
  ['null', null],
  ['undefined', undefined],
  ['a string', "{ status: 'queued' }"],
  ['an array', [{ status: 'queued' }]],
  ['a number', 1],
  ['a class instance (a Date)', new Date()],
];

describe.each(badFilters)('filter: %s', (_label, filter) => {
  test.each([
    ['lockNext', () => Job.lockNext(filter as never, 'w')],
    ['acquireNext', () => Job.acquireNext(filter as never, 'w')],
    ['withNext', () => Job.withNext(filter as never, 'w', () => 1)],
  ])('%s refuses it', (_name, call) => refused(call, InvalidLockArgumentError, { argument: 'filter', code: 'INVALID_ARGUMENT' }));
});

test('a Mongoose query object is not a filter', async () => {
  await refused(() => Job.lockNext(Job.find({ status: 'queued' }) as never, 'w'), InvalidLockArgumentError, { argument: 'filter' });
});

describe('operators an aggregation $match refuses are refused first, wherever they are', () => {
  test.each<[string, unknown]>([
    ['$where at the top', { $where: 'this.priority > 1' }],
    ['$where inside $or', { $or: [{ status: 'queued' }, { $where: 'true' }] }],
    ['$near on a field', { loc: { $near: [0, 0] } }],
    ['$nearSphere deep inside $and', { $and: [{ $or: [{ loc: { $nearSphere: [0, 0] } }] }] }],
    ['$text', { $text: { $search: 'x' } }],
  ])('%s', async (_label, filter) => {
    const error = await refused(() => Job.lockNext(filter as never, 'w'), InvalidLockArgumentError, { argument: 'filter' });
    expect(error.message).toMatch(/\$(where|near|nearSphere|text) cannot be used here/);
  });

  test('a string value that looks like an operator is just a value', async () => {
    expect(await Job.lockNext({ payload: '$where' }, 'w')).toBeNull();
  });
});

describe('sort', () => {
  test.each<[string, unknown]>([
    ['a string', 'priority'],
    ['an array', [['priority', -1]]],
    ["'asc' / 'desc'", { priority: 'desc' }],
    ['2', { priority: 2 }],
    ['a $meta sort', { score: { $meta: 'textScore' } }],
    ['a $-prefixed path', { $priority: 1 }],
    ['an empty path component', { 'a..b': 1 }],
    ['an empty path', { '': 1 }],
    [`more than ${MAX_SORT_FIELDS} fields`, Object.fromEntries(Array.from({ length: MAX_SORT_FIELDS + 1 }, (_, i) => [`f${i}`, 1]))],
  ])('refuses %s', (_label, sort) => refused(() => Job.lockNext({}, 'w', { sort } as never), InvalidLockOptionError, { option: 'sort', code: 'INVALID_OPTION' }));

  test('an empty sort is no sort', async () => {
    sent.length = 0;
    await Job.lockNext({ status: 'failed' }, 'w', { sort: {} });
    const read = sent.find((c) => c.aggregate === Job.collection.collectionName)!;
    expect((read.pipeline as mongo.Document[]).some((stage) => '$sort' in stage)).toBe(false);
  });
});

describe('options', () => {
  test.each<[string, unknown, string]>([
    ['resume (a ticket continues one document, not a queue)', { resume: 'mpl1.x' }, 'resume'],
    ['autoExtend on lockNext (no handle renews its lock)', { autoExtend: true }, 'autoExtend'],
    ['an unknown option', { limit: 5 }, 'limit'],
    ['a negative ttl', { ttl: -1 }, 'ttl'],
    ['a ttl in a string', { ttl: '30000' }, 'ttl'],
    ['a label with a line break', { label: 'a\nb' }, 'label'],
  ])('lockNext refuses %s', (_label, options, option) => refused(() => Job.lockNext({}, 'w', options as never), InvalidLockOptionError, { option }));

  test('options that are not an object', () => refused(() => Job.lockNext({}, 'w', 'fast' as never), InvalidLockOptionError, { code: 'INVALID_OPTION' }));

  test('acquireNext and withNext take autoExtend', async () => {
    const handle = await Job.acquireNext({ payload: 'x' }, 'w', { autoExtend: false });
    expect(handle).not.toBeNull();
    await handle!.release();
  });
});

describe('owner and fn', () => {
  test.each<[string, unknown]>([
    ['a query object', { $ne: null }],
    ['a number', 42],
    ['an empty string', ''],
    ['undefined', undefined],
  ])('owner %s is refused', (_label, owner) => refused(() => Job.lockNext({}, owner as string), InvalidLockArgumentError, { argument: 'owner' }));

  test('withNext without a function', () => refused(() => Job.withNext({}, 'w', 'not a function' as never), InvalidLockArgumentError, { argument: 'fn' }));
});

test('owner, label and ttl never appear in the candidate read; in the acquisition they are literals', async () => {
  const owner = "'$where': 'sleep(1000)', $gt: ''";
  const label = '$$NOW';
  await Job.create({ payload: 'for the literal check' });
  sent.length = 0;
  const doc = await Job.lockNext({ payload: 'for the literal check' }, owner, { label, ttl: 45_000 });
  expect(doc).not.toBeNull();
  const read = JSON.stringify(sent.find((c) => c.aggregate === Job.collection.collectionName));
  expect(read).not.toContain('sleep');
  expect(read).not.toContain('45000');
  const acquire = sent.find((c) => c.findAndModify === Job.lockModel().collection.collectionName)!;
  const set = (acquire.update as mongo.Document[])[0].$set as Record<string, { $cond: unknown[] }>;
  expect(set.label.$cond[1]).toEqual({ $literal: label });
  expect(set.expiresAt.$cond[1]).toEqual({ $add: ['$$NOW', { $literal: 45_000 }] });
  expect(JSON.stringify(set.owner.$cond[1])).not.toContain('sleep'); // the hashed owner key, in a $literal
  // The label is stored as the string it is, never evaluated.
  expect(doc!.heldLock()!.label).toBe(label);
  expect((await Job.getLock(doc!._id))!.label).toBe(label);
  await doc!.unlock();
});
