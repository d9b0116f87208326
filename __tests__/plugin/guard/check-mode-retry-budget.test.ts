/**
 * What happens when check mode's rounds run out (write-guard.ts, checkThenWrite): every round's
 * found document stopped matching before its write, until the budget (the guard transactions'
 * 120 s, shortened here) is spent. The write then fails with a retryable LockDatabaseError and
 * nothing is written: neither the found document nor a stray insert. (Before issue 16 a
 * non-upsert gave up after three rounds and reported that it matched nothing, and an upsert
 * inserted.)
 *
 * The race is made permanent by having the target search always return a document that does
 * not match the filter (a stand-in for other writers that change every found document in time).
 */
import { mongo } from 'mongoose';
import { LockDatabaseError } from '../../../src';
import { connect, testDatabase, type MonitoredConnection } from '../../support/db';
import { workItemModel, type WorkItemModel } from '../../support/work-item';
import { outcome, rawCollection } from './support';

const STALE = new mongo.ObjectId();

jest.mock('../../../src/guard/transaction', () => ({
  ...jest.requireActual<object>('../../../src/guard/transaction'),
  TRANSACTION_RETRY_BUDGET_MS: 300,
}));
jest.mock('../../../src/guard/targets', () => {
  const actual = jest.requireActual<typeof import('../../../src/guard/targets')>('../../../src/guard/targets');
  return {
    ...actual,
    findTargets: async (...args: Parameters<typeof actual.findTargets>) => {
      const [, filter] = args;
      if ((filter as { title?: unknown }).title === 'always stale') return [STALE];
      return actual.findTargets(...args);
    },
  };
});

const db = testDatabase('checkretrybudget');
let conn: MonitoredConnection;
let M: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  M = await workItemModel(conn.connection, { ttl: 30_000, transactions: 'never' }, 'RetryBudget');
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

test.each<[string, () => Promise<unknown>]>([
  ['updateOne upsert', () => M.updateOne({ title: 'always stale' }, { $inc: { edits: 1 } }, { upsert: true }).exec()],
  ['findOneAndUpdate upsert', () => M.findOneAndUpdate({ title: 'always stale' }, { $inc: { edits: 1 } }, { upsert: true }).exec()],
  ['updateMany upsert', () => M.updateMany({ title: 'always stale' }, { $inc: { edits: 1 } }, { upsert: true }).exec()],
  ['deleteOne', () => M.deleteOne({ title: 'always stale' }).exec()],
])('%s whose found document never matches at the write: retryable LockDatabaseError, nothing written', async (_name, write) => {
  const raw = rawCollection(M);
  await raw.deleteMany({});
  await raw.insertOne({ _id: STALE, title: 'changed by someone else', status: 'open', edits: 0 });
  await raw.insertOne({ title: 'always stale', status: 'open', edits: 0 });
  const result = await outcome(write());
  const error = result.ok ? undefined : (result.error as LockDatabaseError);
  expect({ type: error?.constructor.name, retryable: error?.retryable, stopped: /stopped matching its filter/.test(String(error?.message)) }).toEqual({
    type: 'LockDatabaseError',
    retryable: true,
    stopped: true,
  });
  expect((await raw.find({}).sort({ _id: 1 }).toArray()).map((d) => ({ title: d.title, edits: d.edits }))).toEqual([
    { title: 'changed by someone else', edits: 0 },
    { title: 'always stale', edits: 0 },
  ]);
});
