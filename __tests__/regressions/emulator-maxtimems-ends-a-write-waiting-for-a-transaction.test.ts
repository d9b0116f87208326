/**
 * docs/mongodb-compatibility.md R26: an `update` whose statement waits for another session's
 * transaction (R17) is interrupted at its `maxTimeMS` with MaxTimeMSExpired (50) "operation exceeded
 * time limit" (OperationContext::checkForInterruptNoAssert, src/mongo/db/operation_context.cpp;
 * the write conflict is retried through PlanExecutorImpl's yieldOrInterrupt), and the interruption
 * fails the whole batch, ordered or not (write_ops_exec.cpp handleError: "These have always failed
 * the whole batch"); the statements that ran before it stay applied (R24).
 */
import type { Db, MongoClient } from 'mongodb';
import { openClient, uniqueDbName } from '../conformance/support/server';
import { replicaSetOnly } from '../support/topology';

jest.setTimeout(60_000);
const dbName = uniqueDbName('maxtime_write_txn');
let client: MongoClient;
let db: Db;

beforeAll(async () => {
  client = await openClient();
  db = client.db(dbName);
  await db.collection<{ _id: number; v: number }>('c').insertMany([
    { _id: 1, v: 0 },
    { _id: 2, v: 0 },
  ]);
});
afterAll(async () => {
  await db.dropDatabase();
  await client.close();
});

replicaSetOnly('transactions need a replica set')('an unordered update waiting for a transaction ends at maxTimeMS with MaxTimeMSExpired; the statements before it stay', async () => {
  const c = db.collection<{ _id: number; v: number }>('c');
  const session = client.startSession();
  try {
    session.startTransaction();
    await c.updateOne({ _id: 2 }, { $set: { v: 99 } }, { session });
    const started = performance.now();
    const outcome = await db
      .command({ update: 'c', ordered: false, maxTimeMS: 300, updates: [{ q: { _id: 1 }, u: { $set: { v: 1 } } }, { q: { _id: 2 }, u: { $set: { v: 2 } } }] })
      .then(
        (reply) => ({ ok: reply.ok as number }),
        (error: { code?: number; codeName?: string; message?: string }) => ({ code: error.code, codeName: error.codeName, message: error.message }),
      );
    const ms = performance.now() - started;
    expect(outcome).toEqual({ code: 50, codeName: 'MaxTimeMSExpired', message: 'operation exceeded time limit' });
    expect(ms).toBeLessThan(10_000);
    // The first statement ran before the interruption.
    expect(await c.findOne({ _id: 1 })).toEqual({ _id: 1, v: 1 });
  } finally {
    await session.abortTransaction().catch(() => undefined);
    await session.endSession();
  }
  expect(await c.findOne({ _id: 2 })).toEqual({ _id: 2, v: 0 });
});
