/**
 * Check mode's rounds (write-guard.ts, checkThenWrite) stop within the write's own time limits:
 * the budget is the guard transactions' 120 s, capped by the write's `maxTimeMS` (the server's
 * limit on each of its commands) or `timeoutMS` (the driver's client-side timeout). Before, a write
 * with `maxTimeMS: 400` whose found document kept changing searched for 120 s.
 *
 * The race is made permanent as in check-mode-retry-budget.test.ts: the target search always
 * returns a document that does not match the filter. The budget is NOT shortened here.
 * Failed before the change (each case ran past the test's 60 s timeout).
 */
import { mongo } from 'mongoose';
import { LockDatabaseError } from '../../../src';
import { connect, testDatabase, type MonitoredConnection } from '../../support/db';
import { workItemModel, type WorkItemModel } from '../../support/work-item';
import { outcome, rawCollection } from './support';

const STALE = new mongo.ObjectId();

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

const db = testDatabase('checkbudgetlimits');
let conn: MonitoredConnection;
let M: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  M = await workItemModel(conn.connection, { ttl: 30_000, transactions: 'never' }, 'BudgetLimits');
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

const coll = () => M.collection as unknown as mongo.Collection;

test.each<[string, string, () => Promise<unknown>]>([
  ['Model.updateOne upsert with .maxTimeMS(400)', 'maxTimeMS (400 ms)', () => M.updateOne({ title: 'always stale' }, { $inc: { edits: 1 } }, { upsert: true }).maxTimeMS(400).exec()],
  ['Model.collection.deleteOne with { maxTimeMS: 400 }', 'maxTimeMS (400 ms)', () => coll().deleteOne({ title: 'always stale' }, { maxTimeMS: 400 })],
  ['Model.collection.findOneAndUpdate with { timeoutMS: 400 }', 'timeoutMS (400 ms)', () => coll().findOneAndUpdate({ title: 'always stale' }, { $inc: { edits: 1 } }, { timeoutMS: 400 })],
  ['maxTimeMS 5000 and timeoutMS 400: the smaller', 'timeoutMS (400 ms)', () => coll().updateOne({ title: 'always stale' }, { $inc: { edits: 1 } }, { maxTimeMS: 5_000, timeoutMS: 400 })],
])('%s: gives up within the limit (retryable LockDatabaseError naming it), nothing written', async (_name, limit, write) => {
  const raw = rawCollection(M);
  await raw.deleteMany({});
  await raw.insertOne({ _id: STALE, title: 'changed by someone else', status: 'open', edits: 0 });
  await raw.insertOne({ title: 'always stale', status: 'open', edits: 0 });
  const started = Date.now();
  const result = await outcome(write());
  const elapsed = Date.now() - started;
  const error = result.ok ? undefined : (result.error as LockDatabaseError);
  expect({ type: error?.constructor.name, retryable: error?.retryable, limit: String(error?.message).includes(limit) }).toEqual({ type: 'LockDatabaseError', retryable: true, limit: true });
  // Far below the 120 s budget, with room for a loaded machine.
  expect(elapsed).toBeLessThan(30_000);
  expect((await raw.find({}).sort({ _id: 1 }).toArray()).map((d) => d.edits)).toEqual([0, 0]);
}, 60_000);
