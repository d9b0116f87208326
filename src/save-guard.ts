/**
 * The write guard on `save()`: a pre-save hook that refuses writes by anyone but the lock's
 * current holder. New documents save normally (nobody can hold a lock on what does not exist).
 */
import type { HydratedDocument, mongo } from 'mongoose';
import { LockNotHeldError, LockedError } from './errors';
import { heldLockState } from './held-lock';
import type { AnyModel, RuntimeOf } from './runtime';

export function saveGuard(runtimeOf: RuntimeOf, requireLock: boolean) {
  return async function guardSave(this: HydratedDocument<unknown>): Promise<void> {
    if (this.isNew) return;
    const model = this.constructor as AnyModel;
    const { store, ready } = runtimeOf(model);
    await ready;
    const session = (this.$session() ?? undefined) as mongo.ClientSession | undefined;
    const state = heldLockState(this);

    if (state && state.lost === undefined) {
      // saveAndUnlock already verified and released the lock inside this very transaction.
      if (session !== undefined && state.verifiedIn === session) return;
      await store.verify(state, session);
      return;
    }
    if (requireLock) throw new LockNotHeldError(this._id, state?.lost ?? 'not_locked');
    const holder = await store.findActive(this._id, session);
    if (holder) throw new LockedError(this._id, holder.expiresAt, ' This document was not loaded with Model.lock().');
  };
}
