/**
 * README, Limits ("Lock calls inside your own transaction"): after a guarded write inside the
 * caller's transaction, lock calls on that document "are refused at once with
 * `LockedByTransactionError` ... instead of waiting for a transaction that, awaited from inside it,
 * would never end". lockNext has no such answer: LockStore.claimFree returns null (treated as
 * "held") for a candidate whose lock record an open caller transaction writes, without sending
 * anything; the candidate read (outside the transaction) still sees the document free, the queue
 * refills with it, and lock-next.ts's loop takes it again at once: a busy loop of candidate reads
 * (one `aggregate` per turn, no pause) for as long as the transaction is open, which, when the
 * caller awaits lockNext inside that transaction, is until the 60 s OPEN_TRANSACTION_LIMIT_MS
 * (src/guard/open-transactions.ts), after which the acquisition waits on the server for the
 * transaction itself (R17).
 *
 * Expected: the call ends promptly (null: nothing else is free; or LockedByTransactionError),
 * with a bounded number of commands.
 */
import { Schema } from 'mongoose';
import { LockedByTransactionError, lockPlugin, type LockableModel, type LockMethods } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { replicaSetOnly } from '../support/topology';

jest.setTimeout(120_000);
const db = testDatabase('locknext_own_txn');
let conn: MonitoredConnection;

beforeAll(async () => {
  conn = await connect(db.name);
});
afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

interface Job {
  status: string;
  attempts: number;
}

replicaSetOnly('caller transactions need a replica set')('lockNext inside the caller transaction that wrote the only candidate ends promptly, without a busy loop', async () => {
  const schema = new Schema<Job, LockableModel<Job>, LockMethods>({ status: { type: String, default: 'queued' }, attempts: { type: Number, default: 0 } });
  schema.plugin(lockPlugin, { ttl: 30_000 });
  const Job = conn.connection.model<Job, LockableModel<Job>>('TxnJob', schema);
  await Job.init();
  await Job.lockModel().init();
  const [only] = await Job.create([{ status: 'queued' }]);

  const session = await conn.connection.startSession();
  try {
    session.startTransaction();
    // A guarded write inside the caller's transaction: it writes the job's lock record there.
    await Job.updateOne({ _id: only._id }, { $inc: { attempts: 1 } }, { session });
    conn.resetCommands();
    const started = Date.now();
    const outcome = await Promise.race([
      Job.lockNext({ status: 'queued' }, 'worker').then(
        (doc) => (doc === null ? 'null' : 'claimed'),
        (error: unknown) => (error instanceof LockedByTransactionError ? 'LockedByTransactionError' : `threw ${String(error)}`),
      ),
      new Promise<string>((resolve) => setTimeout(() => resolve('still running after 15 s'), 15_000)),
    ]);
    const elapsed = Date.now() - started;
    const aggregates = conn.commands.filter((c) => c === 'aggregate').length;
    expect({ outcome, fewReads: aggregates <= 10 }).toEqual({ outcome: expect.stringMatching(/^(null|LockedByTransactionError)$/), fewReads: true });
    expect(elapsed).toBeLessThan(15_000);
  } finally {
    await session.abortTransaction().catch(() => undefined);
    await session.endSession();
  }
});
