/**
 * Why an acquisition is no longer current, from one read of its lock record: written once, for a
 * single lock (LockStore.lossFrom) and for the locks of a group (LockStore.explainGroupLoss).
 */
import { LockExpiredError, LockNotHeldError, describeId } from './errors';
import { estimatedServerNow, type HeldLockState } from './held-lock';

/** What the read found in the lock record, as far as the judgment needs it. */
export interface RecordView {
  /** The record carries this acquisition's token. */
  mine: boolean;
  /** The record carries another acquisition's token. */
  other: boolean;
  /** The record's fencing token, if it has one. */
  fence: number | undefined;
  /** The record's expiry, if it was read: the server's, which is what 'expired' names. */
  expiresAt?: Date;
}

/**
 * The error for a lost acquisition, given its record as just read (null: gone). Marks no state.
 *
 * Releasing keeps the record (token null) and its fence, so its fence says whose acquisition was
 * released: each acquisition sets a fence greater than every earlier one's (NEXT_FENCE in
 * lock-store.ts), so a released record with another fence than ours was taken over after our lock
 * ended (expired, or released) and then released by its new holder: 'taken_over', never
 * 'released', which says that this acquisition itself was released.
 * A release moves `expiresAt` to the release, so the TTL index may delete a released record
 * `purgeAfter` after the release, long before the lock's own expiry when `purgeAfter` is shorter
 * than the ttl. A record gone before the lock's expiry was therefore released and purged, or
 * deleted (the collection dropped, the record removed by hand): 'released' once a release right
 * after the acquisition could have been purged (`acquiredAt + purgeAfter` has passed by the
 * server's clock, estimated late), else 'vanished', which then is certain as long as
`purgeAfterMs` is what the TTL index keeps now (LockStore asks the index before it says
'vanished': LockStore.purgeAfterNow). A record without a
 * fence is no acquisition's (a write guard's claim, lock-store.ts claimForWrite): ours is gone.
 */
export function lossOf(state: HeldLockState, record: RecordView | null, purgeAfterMs: number): LockNotHeldError {
  const { documentId, expiresAt, acquiredAt, fence } = state.lock;
  if (record?.mine) return new LockExpiredError(documentId, record.expiresAt ?? expiresAt);
  if (record?.other) return new LockNotHeldError(documentId, 'taken_over');
  if (record && record.fence !== undefined) return record.fence === fence ? new LockNotHeldError(documentId, 'released') : new LockNotHeldError(documentId, 'taken_over');
  const serverNow = estimatedServerNow(state);
  if (serverNow >= expiresAt.getTime()) return new LockExpiredError(documentId, expiresAt);
  if (serverNow >= acquiredAt.getTime() + purgeAfterMs) {
    return new LockNotHeldError(
      documentId,
      'released',
      `The lock on document ${describeId(documentId)} was released before it expired, and its record has since been purged by the TTL index (purgeAfter), ` +
        'unless it was deleted by hand. Nothing was written; lock it again to continue.',
    );
  }
  return new LockNotHeldError(documentId, 'vanished');
}
