/** Errors specific to guarded multi-document writes. */
import { LockedError } from '../errors';

/** What the batches committed before a guarded multi-document write was refused had written. */
export interface CommittedWrites {
  matchedCount: number;
  modifiedCount: number;
  deletedCount: number;
}

/**
 * A guarded `updateMany` / `deleteMany` larger than one batch found a target locked by someone
 * else only after earlier batches had committed (the lock was taken while the write ran; a lock
 * already there when the write started refuses the whole write with a plain LockedError).
 * `committed` counts what those earlier batches wrote; the batch holding `documentId` and every
 * later one wrote nothing. mongod's own updateMany is atomic per document, not as a whole, and
 * so is this.
 */
export class LockedDuringWriteError extends LockedError {
  readonly committed: CommittedWrites;

  constructor(blocker: LockedError, committed: CommittedWrites) {
    const written = committed.deletedCount > 0 ? `${committed.deletedCount} deleted` : `${committed.matchedCount} matched, ${committed.modifiedCount} modified`;
    super(
      blocker.documentId,
      blocker.expiresAt,
      ` The lock was taken while the write ran: earlier batches had already committed (${written}); the rest was not written.`,
      blocker.retryAfterMs,
    );
    this.committed = committed;
  }
}
