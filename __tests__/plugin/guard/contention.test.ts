/**
 * Defect 1 of issue 10: the guard's own transactions must not make ordinary concurrent writes
 * fail. Without the plugin, 20 concurrent `$inc`s on one document all succeed (mongod serialises
 * single-document writes) and 4 concurrent `updateMany`s over the same documents all succeed. With
 * the guard, a WriteConflict between the guard's own transactions (code 112, label
 * TransientTransactionError; jstests/core/txns/transactions_write_conflicts.js) is retried with
 * backoff, so the outcome is the same: every write succeeds and every increment is counted.
 * Runs on both guard paths: the atomic one (`transactions: 'auto'` on a replica set) and the
 * check-then-write one (`'never'`, the path a standalone server takes).
 */
import { connect, testDatabase, type MonitoredConnection } from '../../support/db';
import { workItemModel, type WorkItemModel } from '../../support/work-item';
import { outcome, rawLocks } from './support';

const db = testDatabase('contention');
let conn: MonitoredConnection;
let Auto: WorkItemModel;
let Never: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name, { maxPoolSize: 40 });
  Auto = await workItemModel(conn.connection, { ttl: 10_000 });
  Never = await workItemModel(conn.connection, { ttl: 10_000, transactions: 'never' });
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

describe.each([
  ["transactions: 'auto'", () => Auto],
  ["transactions: 'never'", () => Never],
])('%s', (_label, model) => {
  test('20 concurrent updateOne $inc on one unlocked document: all 20 succeed, the counter is 20', async () => {
    const M = model();
    const { _id: id } = await M.create({ title: 'contended', edits: 0 });
    const results = await Promise.all(Array.from({ length: 20 }, () => outcome(M.updateOne({ _id: id }, { $inc: { edits: 1 } }).exec())));
    const failures = results.filter((r) => !r.ok);
    expect(failures.map((f) => (f.ok ? '' : String((f.error as Error).message)))).toEqual([]);
    expect(results.map((r) => (r.ok ? r.value.modifiedCount : -1))).toEqual(Array(20).fill(1));
    expect((await M.findById(id).orFail()).edits).toBe(20);
    // The guard's conflict records are gone: nothing is left in the lock collection.
    expect(await rawLocks(M).countDocuments({ _id: id })).toBe(0);
  }, 60_000);

  test('4 concurrent updateMany over the same 50 documents: all 4 succeed, every document is incremented 4 times', async () => {
    const M = model();
    const docs = await M.insertMany(Array.from({ length: 50 }, (_, i) => ({ title: `many ${i}`, status: 'open' as const, edits: 0 })));
    const ids = docs.map((d) => d._id);
    const results = await Promise.all(Array.from({ length: 4 }, () => outcome(M.updateMany({ _id: { $in: ids } }, { $inc: { edits: 1 } }).exec())));
    expect(results.filter((r) => !r.ok).map((f) => (f.ok ? '' : String((f.error as Error).message)))).toEqual([]);
    expect(results.map((r) => (r.ok ? r.value.modifiedCount : -1))).toEqual([50, 50, 50, 50]);
    const edits = (await M.find({ _id: { $in: ids } }).lean()).map((d) => d.edits);
    expect(edits).toEqual(Array(50).fill(4));
    expect(await rawLocks(M).countDocuments({ _id: { $in: ids } })).toBe(0);
  }, 60_000);

  test('4 concurrent updateMany selecting by a field (a target search) over the same 50 documents all succeed', async () => {
    const M = model();
    const tag = `tag-${Math.random()}`;
    await M.insertMany(Array.from({ length: 50 }, (_, i) => ({ title: tag, status: 'open' as const, edits: i })));
    const results = await Promise.all(Array.from({ length: 4 }, () => outcome(M.updateMany({ title: tag }, { $inc: { edits: 100 } }).exec())));
    expect(results.filter((r) => !r.ok).map((f) => (f.ok ? '' : String((f.error as Error).message)))).toEqual([]);
    const edits = (await M.find({ title: tag }).sort({ edits: 1 }).lean()).map((d) => d.edits);
    expect(edits).toEqual(Array.from({ length: 50 }, (_, i) => i + 400));
  }, 60_000);
});
