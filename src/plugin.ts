/**
 * The Mongoose wiring: `schema.plugin(lockPlugin, options)` adds the statics, the methods and
 * the save guard. The lock algorithm itself lives in lock-store.ts.
 */
import type { HydratedDocument, SaveOptions, Schema, mongo } from 'mongoose';
import { idCaster, validateLockCallOptions, validateOwner } from './arguments';
import { LockNotHeldError, LockTargetNotFoundError } from './errors';
import { attachHeldLock, heldLockState, type HeldLock, type HeldLockState } from './held-lock';
import { resolveOptions, type LockPluginOptions } from './options';
import { ownerKeyFunction } from './owner-key';
import { runtimeFactory, type AnyModel } from './runtime';
import { saveGuard } from './save-guard';
import { supportsTransactions } from './deployment';

type AnyDoc = HydratedDocument<unknown>;

/** The lock a document carries, or a LockNotHeldError saying why it has none. */
function requireHeld(doc: AnyDoc): HeldLockState {
  const state = heldLockState(doc);
  if (!state) throw new LockNotHeldError(doc._id, 'not_locked');
  if (state.lost !== undefined) throw new LockNotHeldError(doc._id, state.lost);
  return state;
}

export function lockPlugin(schema: Schema, rawOptions?: LockPluginOptions): void {
  const options = resolveOptions(rawOptions);
  const castId = idCaster(schema);
  const ownerKey = ownerKeyFunction(options);
  const runtimeOf = runtimeFactory(options);

  // Create the sibling lock model (collection and indexes) when the model is initialised.
  schema.on('init', (model: AnyModel) => {
    runtimeOf(model);
  });

  schema.static('lock', async function lock(this: AnyModel, id: unknown, owner: unknown, callOptions?: unknown) {
    const documentId = castId(id);
    const who = validateOwner(owner);
    const { ttl } = validateLockCallOptions(callOptions, options.ttl);
    const { store, ready } = runtimeOf(this);
    await ready;

    const grant = await store.acquire(documentId, ownerKey(who), ttl);
    const held: HeldLock = { documentId, owner: who, token: grant.token, acquiredAt: grant.acquiredAt, expiresAt: grant.expiresAt, ttl };
    let doc: AnyDoc | null;
    try {
      doc = (await this.findById(documentId)) as AnyDoc | null;
    } catch (error) {
      await store.release(stateFor(held)).catch(() => undefined);
      throw error;
    }
    if (!doc) {
      await store.release(stateFor(held)).catch(() => undefined);
      throw new LockTargetNotFoundError(documentId, this.modelName);
    }
    attachHeldLock(doc, held);
    return doc;
  });

  schema.static('releaseAllFor', async function releaseAllFor(this: AnyModel, owner: unknown) {
    const who = validateOwner(owner);
    const { store, ready } = runtimeOf(this);
    await ready;
    return store.releaseAll(ownerKey(who));
  });

  schema.static('isLocked', async function isLocked(this: AnyModel, id: unknown) {
    const documentId = castId(id);
    const { store, ready } = runtimeOf(this);
    await ready;
    return (await store.findActive(documentId)) !== null;
  });

  schema.static('getLock', async function getLock(this: AnyModel, id: unknown) {
    const documentId = castId(id);
    const { store, ready } = runtimeOf(this);
    await ready;
    return store.findActive(documentId);
  });

  schema.static('forceUnlock', async function forceUnlock(this: AnyModel, id: unknown) {
    const documentId = castId(id);
    const { store, ready } = runtimeOf(this);
    await ready;
    return store.forceRelease(documentId);
  });

  schema.static('lockModel', function lockModel(this: AnyModel) {
    return runtimeOf(this).lockModel;
  });

  schema.method('heldLock', function heldLock(this: AnyDoc): HeldLock | null {
    const state = heldLockState(this);
    return state && state.lost === undefined ? state.lock : null;
  });

  schema.method('unlock', async function unlock(this: AnyDoc) {
    const state = requireHeld(this);
    const { store, ready } = runtimeOf(this.constructor as AnyModel);
    await ready;
    await store.release(state);
    state.lost = 'released';
  });

  schema.method('saveAndUnlock', async function saveAndUnlock(this: AnyDoc, saveOptions?: SaveOptions) {
    const state = requireHeld(this);
    const model = this.constructor as AnyModel;
    const { store, ready } = runtimeOf(model);
    await ready;

    // Release first, inside the transaction: the delete of our own unexpired record is both the
    // check and the release, and it commits or aborts together with the document write.
    const releaseThenSave = async (session: mongo.ClientSession) => {
      await store.release(state, session);
      state.verifiedIn = session;
      try {
        await this.save({ ...saveOptions, session });
      } catch (error) {
        state.lost = undefined; // the transaction aborts, so the release is undone too
        throw error;
      } finally {
        state.verifiedIn = undefined;
      }
    };

    const callerSession = (saveOptions?.session ?? this.$session() ?? undefined) as mongo.ClientSession | undefined;
    if (callerSession?.inTransaction()) {
      // The caller's transaction: the caller commits, and with it the release.
      await releaseThenSave(callerSession);
      state.lost = 'released';
      return;
    }
    if (options.transactions === 'auto' && (await supportsTransactions(model.db))) {
      try {
        await model.db.transaction((session) => releaseThenSave(session));
      } catch (error) {
        if (error instanceof LockNotHeldError) state.lost = error.reason;
        throw error;
      } finally {
        this.$session(null);
      }
      state.lost = 'released';
      return;
    }
    // No transactions: the guard checks the lock, the save writes, then we release.
    await this.save(saveOptions);
    // The write was made under a verified lock; if the lock lapsed since, it is gone all the same.
    await store.release(state).catch((error: unknown) => {
      if (!(error instanceof LockNotHeldError)) throw error;
    });
    state.lost = 'released';
  });

  schema.pre('save', saveGuard(runtimeOf, options.requireLock));
}

/** A throwaway state for releasing a lock that was never attached to a document. */
function stateFor(lock: HeldLock): HeldLockState {
  return { lock, grantedAtMonotonic: 0, lost: undefined, verifiedIn: undefined };
}
