/**
 * PRODUCT.md property 10: writes to documents nobody has locked succeed as they would without the
 * plugin, also under heavy contention, and a write the caller runs inside its own transaction
 * commits or aborts with that transaction.
 *
 * Many callers, each in its own transaction (`connection.transaction()`, which retries on
 * TransientTransactionError like the driver's withTransaction), `$inc` one document nobody has
 * locked. Without the plugin all of them eventually commit (write conflicts are transient and
 * retried). With the guard, each transaction also claims the document's lock record, which
 * does not exist: an upsert inside the transaction. A duplicate-key error of that claim in the
 * caller's transaction must not reach the caller as a LockedError (nobody locked the document):
 * the concurrent transactions conflict (WriteConflict, TransientTransactionError) and the caller's
 * retry loop commits every one. (Coverage written by the attack on the guard; it passed.)
 */
import { LockedError } from '../../../src';
import { replicaSetOnly } from '../../support/topology';
import { connect, testDatabase, type MonitoredConnection } from '../../support/db';
import { workItemModel, type WorkItemModel } from '../../support/work-item';
import { outcome } from './support';

const db = testDatabase('guard_joinedcontention');
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

replicaSetOnly('caller transactions need a replica set')('12 concurrent caller transactions $inc one unlocked document: all commit', async () => {
  const { _id: id } = await M.create({ title: 'counter', edits: 0 });
  const writers = 12;
  const results = await Promise.all(
    Array.from({ length: writers }, () =>
      outcome(conn.connection.transaction(async (session) => {
        await M.updateOne({ _id: id }, { $inc: { edits: 1 } }, { session });
      })),
    ),
  );
  const failures = results.filter((r) => !r.ok).map((r) => (r as { error: unknown }).error);
  expect(failures.filter((e) => e instanceof LockedError)).toHaveLength(0);
  expect(failures).toHaveLength(0);
  expect((await M.findById(id).lean())?.edits).toBe(writers);
}, 60_000);
