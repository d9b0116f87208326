/**
 * Issue 16, item 1, the duplicate-key path of check mode (`transactions: 'never'`, standalone
 * servers). An upsert whose search found nothing is sent narrowed with `_id: { $exists: false }`;
 * when a unique index refuses its insert (E11000) the guard searches again, ONCE, and if that search
 * finds nothing it throws the E11000 to the caller (write-guard.ts, checkThenWrite: "if the search
 * right after it finds nothing either, the error is the unguarded upsert's (the key belongs to a
 * document the filter does not match)").
 *
 * That inference is wrong when the matching document that caused the E11000 is deleted again before
 * the second search (other writers inserting and deleting the same key). For an upsert whose query
 * is exactly the unique index's equalities (`{ title: 'k' }` on a unique `title`), mongod never lets
 * the unguarded upsert fail with E11000 in that race: it retries such an upsert itself, without
 * bound on 6.0, 7.0 and the 8.0 line (R9 of docs/mongodb-compatibility.md:
 * `performSingleUpdateOpWithDupKeyRetry`, src/mongo/db/ops/write_ops_exec.cpp, and
 * `shouldRetryDuplicateKeyException`), and each retry either updates the document or inserts. So the
 * caller gets an error no serial execution of the unguarded upsert produces (PRODUCT.md property 10):
 * at every instant of the call either no document matched (the upsert inserts) or D did (it updates
 * D).
 *
 * The race: the guard's search finds nothing; its upsert is held 1 s by a fail point while another
 * client inserts D `{ title: 'k' }` (the upsert then fails with E11000 on `title`); the guard's
 * second search is held 1 s while D is deleted (it finds nothing). Expected: the call succeeds and
 * the collection ends with one `{ title: 'k' }` document (the guard's insert after D was deleted).
 *
 * Status when committed (attack on 8078351): FAILS (MongoServerError E11000 reaches the caller).
 *
 * The fix (write-guard.ts, checkThenWrite, retriesDuplicateKey): the guard applies mongod's rule
 * to the caller's query; for a query mongod retries it keeps searching and inserting within its
 * budget. The second test is the other side of that rule: a query that is more than the index's
 * equalities, whose key belongs to a document it does not match, fails with the E11000 at once,
 * as the unguarded upsert does.
 */
import { mongo } from 'mongoose';
import { deploymentFacts, describeIf } from '../../conformance/support/server';
import { connect, testDatabase, type MonitoredConnection } from '../../support/db';
import { workItemModel, type WorkItemModel } from '../../support/work-item';
import { usesPrivateServer } from '../../support/private-server';
import { blockCommands, failPointOff, outcome, rawCollection } from './support';

// This file configures failCommand: on a server of its own where it can (support/private-server.ts).
usesPrivateServer();

const db = testDatabase('checkdupchurn');
const APP_A = `mpl-check-dupchurn-${process.pid}`;
let connA: MonitoredConnection;
let other: MonitoredConnection;
let Never: WorkItemModel;

describeIf(deploymentFacts().failPoints, 'needs fail points')('a check-mode upsert whose duplicate key belongs to a document deleted before the guard searches again', () => {
  beforeAll(async () => {
    connA = await connect(db.name, { appName: APP_A, retryWrites: false });
    other = await connect(db.name);
    Never = await workItemModel(connA.connection, { ttl: 30_000, transactions: 'never' }, 'DupChurnNever');
    await rawCollection(Never).createIndex({ title: 1 }, { unique: true });
  });

  afterAll(async () => {
    await failPointOff(other.connection);
    await db.drop(other.connection);
    await Promise.all([connA.close(), other.close()]);
  });

  test("transactions: 'never': the upsert of { title: 'k' } succeeds (no E11000) and leaves one { title: 'k' } document", async () => {
    const raw = rawCollection(Never);
    await raw.deleteMany({});
    const collection = Never.collection.collectionName;
    const namespace = `${db.name}.${collection}`;
    const steps: string[] = [];
    let sawUpsert = false;
    let churn: Promise<unknown> = Promise.resolve();
    const client = connA.connection.getClient();
    const listener = (event: { commandName: string; command: Record<string, unknown> }) => {
      if (event.command[event.commandName] !== collection) return;
      if (event.commandName === 'update' && !sawUpsert) {
        sawUpsert = true;
        // The guard's upsert is held 1 s: D is inserted first, so the upsert fails with E11000;
        // then the guard's next search is held the same way.
        churn = (async () => {
          await raw.insertOne({ title: 'k', status: 'open', edits: 100 });
          steps.push('D inserted while the upsert was held');
          await blockCommands(other.connection, { appName: APP_A, namespace, commands: ['find'], blockTimeMS: 1_000 });
        })();
      } else if (event.commandName === 'find' && sawUpsert && !steps.includes('D deleted while the second search was held')) {
        steps.push('D deleted while the second search was held');
        churn = churn.then(() => raw.deleteOne({ title: 'k', edits: 100 }));
      }
    };
    client.on('commandStarted', listener);
    try {
      await blockCommands(other.connection, { appName: APP_A, namespace, commands: ['update'], blockTimeMS: 1_000 });
      const result = await outcome(Never.updateOne({ title: 'k' }, { $inc: { edits: 1 } }, { upsert: true }).exec());
      await churn;
      const docs = (await raw.find({ title: 'k' }).toArray()).map((d) => d.edits as unknown);
      expect({
        steps,
        outcome: result.ok ? 'ok' : `${(result.error as Error).constructor.name} ${String((result.error as { code?: unknown }).code)}`,
        docs,
      }).toEqual({
        steps: ['D inserted while the upsert was held', 'D deleted while the second search was held'],
        outcome: 'ok',
        docs: [1],
      });
    } finally {
      client.off('commandStarted', listener);
      await failPointOff(other.connection);
    }
  }, 30_000);

  test("transactions: 'never': an upsert mongod would not retry ({ title: 'k', status: 'open' }; the key belongs to a 'done' document) fails with E11000 at once, as unguarded", async () => {
    const raw = rawCollection(Never);
    await raw.deleteMany({});
    await raw.insertOne({ title: 'k', status: 'done', edits: 0 });
    const upsert = (extra: Record<string, unknown>) => (Never.collection as unknown as mongo.Collection).updateOne({ title: 'k', status: 'open' }, { $inc: { edits: 1 } }, { upsert: true, ...extra });
    const unguarded = await outcome(upsert({ skipLockCheck: true }));
    const started = Date.now();
    const guarded = await outcome(upsert({}));
    const code = (r: Awaited<typeof guarded>) => (r.ok ? 'ok' : (r.error as { code?: unknown }).code);
    expect({ unguarded: code(unguarded), guarded: code(guarded) }).toEqual({ unguarded: 11000, guarded: 11000 });
    expect(Date.now() - started).toBeLessThan(30_000);
    expect(await raw.countDocuments({})).toBe(1);
  }, 60_000);
});
