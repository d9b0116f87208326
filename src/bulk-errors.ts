/** Reading the driver's bulk-write errors (the group acquisition's `update` of many statements). */
import { mongo } from 'mongoose';

/**
 * Whether a bulk write failed only because some statements got a duplicate-key error (an `_id`
 * upsert that lost its insert race after the server's own retries, R9/R25): write errors, all
 * 11000, and no write concern error. Anything else is a fault of the whole command.
 */
export function onlyDuplicateKeys(error: unknown): boolean {
  if (!(error instanceof mongo.MongoBulkWriteError)) return false;
  const writeErrors = bulkWriteErrors(error);
  if (writeErrors.length === 0 || !writeErrors.every((e) => e.code === 11000)) return false;
  return !error.result?.getWriteConcernError();
}

/** The write errors of a bulk write's failure (none for any other error). */
export function bulkWriteErrors(error: unknown): readonly mongo.WriteError[] {
  if (!(error instanceof mongo.MongoBulkWriteError)) return [];
  const writeErrors: mongo.WriteError | readonly mongo.WriteError[] = error.writeErrors;
  return Array.isArray(writeErrors) ? writeErrors : [writeErrors as mongo.WriteError];
}

/**
 * The driver wraps every failure of a bulk write in a MongoBulkWriteError, a network error too
 * (mongodb/lib/bulk/common.js executeCommands: `new MongoBulkWriteError(thrownError, ...)`, which
 * keeps the original as `errorResponse`); the wrapper is not a MongoNetworkError. Hand on the
 * original, so that failures.ts classifies it as any other command's error and the caller's
 * `cause` is the driver's own error.
 */
export function unwrapBulkError(error: unknown): unknown {
  if (error instanceof mongo.MongoBulkWriteError && error.errorResponse instanceof Error) return error.errorResponse;
  return error;
}
