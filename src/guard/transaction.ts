/**
 * The guard's own transactions: started, committed and retried here, following the rules of the
 * driver's convenient transaction API (mongodb/specifications,
 * source/transactions-convenient-api/transactions-convenient-api.md):
 *  - an error labelled TransientTransactionError (e.g. WriteConflict, code 112, which mongod
 *    returns at once when two transactions write one document: "First Updater Wins",
 *    jstests/core/txns/transactions_write_conflicts.js) aborts the attempt and the whole
 *    transaction is retried, after a jittered exponential backoff (5 ms × 1.5^attempt, at most
 *    500 ms), until 120 s have passed;
 *  - a commit that fails with UnknownTransactionCommitResult is retried as a commit (the driver
 *    then sends it with w: 'majority'), within the same 120 s.
 * The retried body must be safe to run again: the guard's bodies re-send the same commands.
 */
import { mongo, type Connection } from 'mongoose';

type ClientSession = mongo.ClientSession;

/** How long the guard keeps retrying one transaction: the convenient API's bound. */
export const TRANSACTION_RETRY_BUDGET_MS = 120_000;
const BACKOFF_INITIAL_MS = 5;
const BACKOFF_MAX_MS = 500;
const BACKOFF_GROWTH = 1.5;

function hasLabel(error: unknown, label: string): boolean {
  const withLabels = error as { hasErrorLabel?: (label: string) => boolean } | null;
  return typeof withLabels?.hasErrorLabel === 'function' && withLabels.hasErrorLabel(label);
}

/** A MaxTimeMSExpired commit is not retried (the spec's exception to the commit retry rule). */
function isMaxTimeExpired(error: unknown): boolean {
  const e = error as { code?: unknown; writeConcernError?: { code?: unknown } } | null;
  return e?.code === 50 || e?.writeConcernError?.code === 50;
}

const sleep = (ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms));

/** Transaction options for the guard: reads from the primary; the write's own write concern at commit. */
export interface GuardTransactionOptions {
  writeConcern?: mongo.WriteConcernSettings;
  /**
   * Called immediately before each commit is sent; may return what to do if that commit is known
   * NOT to have applied (the transaction was aborted: TransientTransactionError without
   * UnknownTransactionCommitResult). A commit whose outcome stays unknown calls nothing.
   */
  beforeCommit?: () => (() => void) | undefined;
}

/**
 * Runs `body` in a transaction on a session of the guard's own, and commits it. Retries as
 * described above; any other error aborts the transaction and reaches the caller unchanged.
 *
 * `caller` is the session the write carried outside a transaction. The transaction never runs on
 * it: a session holds one transaction at a time (transactions spec, "startTransaction": "Transaction
 * already in progress"), and a caller may run several writes on one session at once (driver
 * sessions spec: a session is used by one thread at a time, but Node's concurrent promises are one
 * thread), so two guarded writes on one session would share, or refuse, one transaction. Instead
 * the guard's session starts at the caller's `clusterTime` and `operationTime`, so its transaction
 * reads after everything the caller's session saw (the driver adds `readConcern.afterClusterTime`
 * to the statement that starts a transaction in a causally consistent session: transactions spec,
 * "Interaction with Causal Consistency"), and afterwards the caller's session is advanced to the
 * guard's times, so the caller's next causally consistent read sees the guarded write (causal
 * consistency spec, "advanceOperationTime": advancing one session to another's times is how
 * operations in two sessions are made causally consistent; driver sessions spec,
 * "advanceClusterTime").
 */
export async function runInTransaction<T>(
  connection: Connection,
  caller: ClientSession | undefined,
  body: (session: ClientSession) => Promise<T>,
  options: GuardTransactionOptions = {},
): Promise<T> {
  // The driver's session, not Mongoose's connection.startSession(): that one first waits for
  // Mongoose to call the connection "connected" again after a network error, which takes until
  // the driver's next heartbeat (up to 10 s), while the driver itself selects a server at once.
  if (caller) refuseUnusableSession(connection, caller);
  const own = connection.getClient().startSession() as ClientSession;
  if (caller) followSession(own, caller);
  const deadline = Date.now() + TRANSACTION_RETRY_BUDGET_MS;
  const transactionOptions: mongo.TransactionOptions = { readPreference: 'primary' };
  if (options.writeConcern) transactionOptions.writeConcern = options.writeConcern;
  try {
    for (let attempt = 0; ; attempt++) {
      own.startTransaction(transactionOptions);
      let result: T;
      try {
        result = await body(own);
      } catch (error) {
        if (own.inTransaction()) await own.abortTransaction().catch(() => undefined);
        if (hasLabel(error, 'TransientTransactionError') && (await backedOff(attempt, deadline))) continue;
        throw error;
      }
      const notApplied = options.beforeCommit?.();
      try {
        await commit(own, deadline);
        return result;
      } catch (error) {
        const aborted = hasLabel(error, 'TransientTransactionError') && !hasLabel(error, 'UnknownTransactionCommitResult');
        if (aborted) notApplied?.();
        if (aborted && (await backedOff(attempt, deadline))) continue;
        throw error;
      }
    }
  } finally {
    // Also after a failure: whatever the guard's session saw happened (times only move forward).
    if (caller) followSession(caller, own);
    await own.endSession().catch(() => undefined);
  }
}

/**
 * Refuses the caller's session where the driver would refuse it, had the write been sent on it:
 * an ended session (MongoExpiredSessionError) and a session of another MongoClient
 * (MongoInvalidArgumentError), with the driver's classes and messages (executeOperation in
 * mongodb/src/operations/execute_operation.ts, checked before any command is sent). Driver
 * sessions spec, "endSession": "Once a ClientSession has ended, drivers MUST report an error if
 * any operations are attempted with that ClientSession"; the other client's session: NODE-5233
 * (driver 6.0, "Throw if a session is used that came from another mongo client").
 */
export function refuseUnusableSession(connection: Connection, caller: ClientSession): void {
  if (caller.hasEnded) throw new mongo.MongoExpiredSessionError('Use of expired sessions is not permitted');
  if ((caller as unknown as { client?: unknown }).client !== connection.getClient()) throw new mongo.MongoInvalidArgumentError('ClientSession must be from the same MongoClient');
}

/** Advances `session`'s cluster time and operation time to `source`'s (each only forward). */
function followSession(session: ClientSession, source: ClientSession): void {
  if (source.operationTime) session.advanceOperationTime(source.operationTime);
  try {
    // The driver validates a cluster time's shape (it must carry a signature); the cluster time is
    // also gossiped through the client, so one it refuses is only skipped here.
    if (source.clusterTime) session.advanceClusterTime(source.clusterTime);
  } catch {
    // nothing to advance
  }
}

/** Sleeps the backoff for `attempt`; false (no sleep) when that would pass the deadline. */
export async function backedOff(attempt: number, deadline: number): Promise<boolean> {
  const backoff = Math.random() * Math.min(BACKOFF_INITIAL_MS * BACKOFF_GROWTH ** attempt, BACKOFF_MAX_MS);
  if (Date.now() + backoff >= deadline) return false;
  await sleep(backoff);
  return true;
}

async function commit(session: ClientSession, deadline: number): Promise<void> {
  for (;;) {
    try {
      await session.commitTransaction();
      return;
    } catch (error) {
      if (hasLabel(error, 'UnknownTransactionCommitResult') && !isMaxTimeExpired(error) && Date.now() < deadline) continue;
      throw error;
    }
  }
}
