/**
 * PRODUCT.md property 10: a write the server refuses because of its own filter fails, through the
 * guard, with the server's error, as without the plugin. The guard's target search runs the
 * caller's filter on the caller's collection, so when the server refuses that filter (an unknown
 * operator; `$where`, which the emulator does not run and mongod refuses where server-side
 * JavaScript is disabled) the error is the caller's, not a LockDatabaseError of the guard's (as it
 * used to be). The guard's own commands on the lock collection still fail as LockDatabaseError.
 *
 * Each case runs the same write unguarded (skipLockCheck) and guarded, and compares the class,
 * code and message. Before the change the guarded writes failed with LockDatabaseError
 * ("updateOne failed in the database: ...").
 */
import { mongo } from 'mongoose';
import { LockDatabaseError } from '../../../src';
import { connect, testDatabase, type MonitoredConnection } from '../../support/db';
import { workItemModel, type WorkItemModel } from '../../support/work-item';
import { outcome, rawCollection } from './support';

const db = testDatabase('guardsearcherrors');
let conn: MonitoredConnection;
let Auto: WorkItemModel;
let Never: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  Auto = await workItemModel(conn.connection, { ttl: 30_000 }, 'SearchErrorsAuto');
  Never = await workItemModel(conn.connection, { ttl: 30_000, transactions: 'never' }, 'SearchErrorsNever');
  for (const M of [Auto, Never]) await rawCollection(M).insertMany([{ title: 'a', status: 'open', edits: 0 }, { title: 'b', status: 'open', edits: 0 }]);
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

const coll = (M: WorkItemModel) => M.collection as unknown as mongo.Collection;
type Write = (M: WorkItemModel, filter: mongo.Document, extra: Record<string, unknown>) => Promise<unknown>;
const writes: [string, Write][] = [
  ['updateOne', (M, f, extra) => coll(M).updateOne(f, { $inc: { edits: 1 } }, extra)],
  ['updateOne upsert', (M, f, extra) => coll(M).updateOne(f, { $inc: { edits: 1 } }, { upsert: true, ...extra })],
  ['updateMany', (M, f, extra) => coll(M).updateMany(f, { $inc: { edits: 1 } }, extra)],
  ['deleteOne', (M, f, extra) => coll(M).deleteOne(f, extra)],
  ['deleteMany', (M, f, extra) => coll(M).deleteMany(f, extra)],
  ['findOneAndUpdate', (M, f, extra) => coll(M).findOneAndUpdate(f, { $inc: { edits: 1 } }, extra)],
];
const filters: [string, mongo.Document][] = [
  ['an unknown query operator', { title: { $bogus: 1 } }],
  ['$where', { $where: 'this.edits > 0' }],
];

/** What a failed write reports: class, code, message. */
function described(result: Awaited<ReturnType<typeof outcome>>) {
  if (result.ok) return 'succeeded';
  const error = result.error as { code?: unknown; message?: unknown };
  return { class: (result.error as Error).constructor.name, code: error.code, message: error.message };
}

describe.each([
  ["transactions: 'auto'", () => Auto],
  ["transactions: 'never' (check mode)", () => Never],
])('%s', (_mode, model) => {
  describe.each(filters)('%s', (_filterName, filter) => {
    test.each(writes)('%s fails with the server\'s own error, as the unguarded write does', async (_writeName, write) => {
      const unguarded = described(await outcome(write(model(), filter, { skipLockCheck: true })));
      const guarded = await outcome(write(model(), filter, {}));
      expect(unguarded).not.toBe('succeeded');
      expect(!guarded.ok && guarded.error instanceof LockDatabaseError).toBe(false);
      expect(described(guarded)).toEqual(unguarded);
    });
  });
});
