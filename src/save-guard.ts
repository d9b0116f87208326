/**
 * The write guard on `save()`: a pre-save hook that refuses writes by anyone but the lock's
 * current holder. New documents save normally (nobody can hold a lock on what does not exist).
 */
import type { HydratedDocument, mongo } from 'mongoose';
import { LockNotHeldError } from './errors';
import { typedErrors } from './failures';
import { heldLockState, lostError } from './held-lock';
import { currentLockOwner } from './owner-context';
import type { OwnerKey } from './owner-key';
import type { AnyModel, RuntimeOf } from './runtime';
import { assertWritable } from './write-targets';

export function saveGuard(runtimeOf: RuntimeOf, ownerKey: OwnerKey, requireLock: boolean) {
  return function guardSave(this: HydratedDocument<unknown>): Promise<void> {
    return typedErrors('save', () => check(this));
  };

  async function check(doc: HydratedDocument<unknown>): Promise<void> {
    if (doc.isNew) return;
    const { store, ready } = runtimeOf(doc.constructor as AnyModel);
    await ready;
    const session = (doc.$session() ?? undefined) as mongo.ClientSession | undefined;
    const state = heldLockState(doc);

    if (state && state.lost === undefined) {
      // saveAndUnlock already verified and released the lock inside this very transaction.
      if (session !== undefined && state.verifiedIn === session) return;
      await store.verify(state, session);
      return;
    }
    if (state) {
      // This instance carried a lock that is gone (released, expired, taken over): it stays
      // refused, so retrying a rejected save cannot slip through once the lock looks free.
      throw lostError(state);
    }
    // Not saved through a lock: the owner context (runWithLockOwner) may still name a holder.
    const owner = currentLockOwner();
    const key = owner === undefined ? undefined : ownerKey(owner);
    if (requireLock && (key === undefined || !(await store.isHeldBy(doc._id, key, session)))) {
      throw new LockNotHeldError(doc._id, 'not_locked');
    }
    await assertWritable(store, [doc._id], key, session);
  }
}
