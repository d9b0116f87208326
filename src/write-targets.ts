/**
 * Which documents a write would touch, and whether a lock stops it. Shared by the save guard
 * and the query-write guard. The owner (if the writer named one) is hashed exactly like the
 * owners in the lock collection, so holders are recognised without storing who they are.
 */
import type { mongo } from 'mongoose';
import { LockedError } from './errors';
import type { LockStore } from './lock-store';

/**
 * Refuses the write if any target is locked by someone other than `ownerKey`.
 * Inside a transaction the targets' lock records are written too (claimed), so a concurrent
 * acquisition conflicts with the transaction or waits for its commit: no window between this
 * check and the write. Outside a transaction it is a read, followed by the write.
 */
export async function assertWritable(
  store: LockStore,
  ids: unknown[],
  ownerKey: string | undefined,
  session: mongo.ClientSession | undefined,
): Promise<void> {
  if (ids.length === 0) return;
  const blocker = session?.inTransaction() ? await store.claimForWrite(ids, ownerKey, session) : await store.findBlocking(ids, ownerKey, session);
  if (blocker) {
    throw new LockedError(blocker.documentId, blocker.expiresAt, ' The write was refused; nothing was written.', blocker.remainingMs);
  }
}
