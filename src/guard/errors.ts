/** Errors specific to guarded multi-document writes. */
import { LockedError, describeId } from '../errors';

/** What the batches committed before a guarded multi-document write was refused had written. */
export interface CommittedWrites {
  /** Documents the committed batches matched (updates). */
  matchedCount: number;
  /** Documents the committed batches modified (updates). */
  modifiedCount: number;
  /** Documents the committed batches deleted (deletes). */
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
  /** What the batches committed before the refusal had written. */
  readonly committed: CommittedWrites;

  constructor(blocker: LockedError, committed: CommittedWrites) {
    const written = committed.deletedCount > 0 ? `${committed.deletedCount} deleted` : `${committed.matchedCount} matched, ${committed.modifiedCount} modified`;
    super(
      blocker.documentId,
      blocker.expiresAt,
      ` The lock was taken while the write ran: earlier batches had already committed (${written}); the rest was not written.`,
      blocker.retryAfterMs,
      blocker.label,
    );
    this.committed = committed;
  }
}

/**
 * A lock call (`Model.lock`, `tryLock`, `acquireLock`, `withLock`, `Model.unlock`, `forceUnlock`,
 * `doc.unlock()`, `doc.extendLock()`, a lock ticket's resume) on a document whose lock record a
 * transaction of this process is writing: a guarded write of that document ran inside a caller's
 * transaction that has not ended. The call would wait on the server until that transaction ends,
 * and forever if the caller awaits it inside that very transaction, so it is refused at once,
 * before anything is sent. Take the lock before the transaction writes the document, or after it
 * commits or aborts; inside the transaction, release with `doc.saveAndUnlock({ session })`.
 * A guarded write outside that transaction, which the guard would run in a transaction of its own
 * (conflicting with the open one on every retry), is refused the same way (`call` 'write').
 * A LockedError (retryable, 423): retried after the transaction ended, the call proceeds.
 */
export class LockedByTransactionError extends LockedError {
  constructor(documentId: unknown, call: 'lock' | 'write' = 'lock') {
    super(documentId, undefined);
    if (call === 'write') {
      this.message =
        `Document ${describeId(documentId)} is being written by a transaction of this process that has not ended: a guarded write ran in it, ` +
        "so its lock record is part of that transaction, and a guarded write outside it (without that transaction's session) would wait for it to end (forever, if it is awaited inside that transaction). " +
        'Nothing was written. Pass the session to write inside the transaction, or write after it commits or aborts.';
      return;
    }
    this.message =
      `Document ${describeId(documentId)} is being written by a transaction of this process that has not ended: a guarded write ran in it, ` +
      'so its lock record is part of that transaction, and a lock call outside the transaction would wait for it to end (forever, if it is awaited inside that transaction). ' +
      'Nothing was sent. Take the lock before the transaction writes the document, or after it commits or aborts; inside it, release with doc.saveAndUnlock({ session }).';
  }
}
