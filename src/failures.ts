/**
 * Turns the driver's errors into typed LockErrors at the plugin's boundary, saying whether a
 * retry can help. Passed through unchanged: errors about the document's own data (validation,
 * casting, duplicate keys), errors the caller produced (an AbortSignal's reason, exceptions
 * from `withLock`'s fn), and errors labelled for the transaction protocol
 * (TransientTransactionError, UnknownTransactionCommitResult), which `withTransaction` and
 * the caller's own retry loops must see as the driver made them.
 */
import { mongo } from 'mongoose';
import { LockDatabaseError, LockError } from './errors';

/** Server error codes that describe a passing condition (network, failover, shutdown, load). */
const TRANSIENT_CODES: ReadonlySet<number> = new Set([
  6, // HostUnreachable
  7, // HostNotFound
  50, // MaxTimeMSExpired
  89, // NetworkTimeout
  91, // ShutdownInProgress
  112, // WriteConflict
  134, // ReadConcernMajorityNotAvailableYet
  189, // PrimarySteppedDown
  262, // ExceededTimeLimit
  9001, // SocketException
  10107, // NotWritablePrimary
  11600, // InterruptedAtShutdown
  11602, // InterruptedDueToReplStateChange
  13435, // NotPrimaryNoSecondaryOk
  13436, // NotPrimaryOrSecondary
]);

const TRANSIENT_LABELS = ['RetryableWriteError', 'TransientTransactionError', 'UnknownTransactionCommitResult', 'ResumableChangeStreamError'];

export function isTransient(error: mongo.MongoError): boolean {
  if (error instanceof mongo.MongoNetworkError || error instanceof mongo.MongoServerSelectionError) return true;
  if (error.name === 'MongoOperationTimeoutError' || error.name === 'MongoNetworkTimeoutError') return true;
  if (TRANSIENT_LABELS.some((label) => error.hasErrorLabel(label))) return true;
  return typeof error.code === 'number' && TRANSIENT_CODES.has(error.code);
}

/** The error to hand the caller for a failure during `operation`. */
export function toLockError(operation: string, error: unknown): unknown {
  if (error instanceof LockError) return error;
  if (!(error instanceof mongo.MongoError)) return error;
  if (error.code === 11000) return error; // a duplicate key in the caller's own data
  if (error.hasErrorLabel('TransientTransactionError') || error.hasErrorLabel('UnknownTransactionCommitResult')) return error;
  return new LockDatabaseError(operation, error, isTransient(error));
}

/** Runs one plugin operation, converting driver errors on the way out. */
export async function typedErrors<T>(operation: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    throw toLockError(operation, error);
  }
}
