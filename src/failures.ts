/**
 * Turns the driver's errors into typed LockErrors at the plugin's boundary, saying whether a
 * retry can help. Passed through unchanged: errors about the document's own data (validation,
 * casting, duplicate keys), errors the caller produced (an AbortSignal's reason, exceptions
 * from `withLock`'s fn), and errors labelled for the transaction protocol
 * (TransientTransactionError, UnknownTransactionCommitResult), which `withTransaction` and
 * the caller's own retry loops must see as the driver made them.
 *
 * A server error about one of the plugin's own commands is handed on as a copy without what the
 * server and the driver attach about the command (sanitizedServerError): a MongoBulkWriteError's
 * write errors keep the failed statement (`writeErrors[i].err.op`, mongodb bulk/common.ts
 * mergeBatchResults), that is a lock record's owner key and token as literals, and a
 * DocumentValidationFailure names the value that failed (`errInfo.details.consideredValue`,
 * src/mongo/db/matcher/doc_validation_error.cpp). No error the plugin throws carries them.
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

/**
 * A server error without the command it answered: its message, code, codeName and error labels
 * (what isTransient, withTransaction and a caller's retry loop read), nothing else. mongod's
 * errmsg names no field value for the errors the lock collection can raise (validation:
 * "Document failed validation", the values only in errInfo). Errors that are no server answer
 * (network, server selection, timeouts) carry no command and stay as the driver made them.
 */
export function sanitizedServerError(error: mongo.MongoError): mongo.MongoError {
  if (!(error instanceof mongo.MongoServerError)) return error;
  const copy = new mongo.MongoServerError({
    message: error.message,
    ...(error.code !== undefined ? { code: error.code } : {}),
    ...(typeof error.codeName === 'string' ? { codeName: error.codeName } : {}),
    errorLabels: [...error.errorLabels],
  });
  if (error.stack !== undefined) copy.stack = error.stack;
  return copy;
}

/** The error to hand the caller for a failure during `operation`. */
export function toLockError(operation: string, error: unknown): unknown {
  if (error instanceof LockError) return error;
  if (!(error instanceof mongo.MongoError)) return error;
  if (error.code === 11000) return error; // a duplicate key in the caller's own data
  // Labelled for the transaction protocol: the labels, code and class are what withTransaction reads.
  if (error.hasErrorLabel('TransientTransactionError') || error.hasErrorLabel('UnknownTransactionCommitResult')) return sanitizedServerError(error);
  return new LockDatabaseError(operation, sanitizedServerError(error), isTransient(error));
}

/** Runs one plugin operation, converting driver errors on the way out. */
export async function typedErrors<T>(operation: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    throw toLockError(operation, error);
  }
}
