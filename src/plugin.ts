/**
 * The Mongoose wiring: `schema.plugin(lockPlugin, options)` adds the statics, the methods and
 * the write guard. The lock algorithm lives in lock-store.ts, waiting in lock-waiter.ts,
 * renewal in lock-handle.ts, and the write guard in guard/.
 */
import type { HydratedDocument, SaveOptions, mongo } from 'mongoose';
import { idCaster, validateLockCallOptions, validateOwner, type ResolvedCallOptions } from './arguments';
import { InvalidLockArgumentError, InvalidLockOptionError, LockNotHeldError, LockTargetNotFoundError, LockedError } from './errors';
import { attachHeldLock, heldLockState, lostError, newHeldLockState, type HeldLock, type HeldLockState } from './held-lock';
import { typedErrors } from './failures';
import { idKey } from './id-key';
import { installGroupStatics } from './group-statics';
import { installWriteGuard, saveWithContext } from './guard/install';
import { refuseSaveLockOptions } from './guard/options';
import { LockHandle, asyncDispose } from './lock-handle';
import { lockInfoFrom, type Grant, type LockPage, type LockStatus } from './lock-store';
import { acquireWaiting } from './lock-waiter';
import { describeValue, resolveOptions, validateTtl, type LockPluginOptions } from './options';
import { ownerKeyFunction } from './owner-key';
import { pluginApplication } from './plugin-registration';
import { runtimeFactory, type AnyModel, type AnySchema } from './runtime';
import { cursorAfter, fromStoredId, validateListOptions, validateStatusIds, validateUnlockOptions } from './status-arguments';
import { issueTicket, readTicket } from './ticket';

type AnyDoc = HydratedDocument<unknown>;
type ClientSession = mongo.ClientSession;

/** The lock a document carries, or a LockNotHeldError saying why it has none. */
function requireHeld(doc: AnyDoc): HeldLockState {
  const state = heldLockState(doc);
  if (!state) throw new LockNotHeldError(doc._id, 'not_locked');
  if (state.lost !== undefined) throw lostError(state);
  return state;
}

export function lockPlugin(schema: AnySchema, rawOptions?: LockPluginOptions): void {
  // Decide first whether this application applies at all: the lock schemas themselves, a second
  // application, a schema already compiled, and embedded schemas reached by a global
  // registration (see plugin-registration.ts).
  const application = pluginApplication(schema, lockPlugin, rawOptions);
  if (application.skip) return;
  const options = resolveOptions(application.options);
  const castId = idCaster(schema);
  const ownerKey = ownerKeyFunction(options);
  const runtimeOf = runtimeFactory(options);

  // When the model is initialised: create the sibling lock model (collection and indexes).
  schema.on('init', (model: AnyModel) => {
    runtimeOf(model);
  });

  /**
   * Takes the lock (waiting if asked) or, with `resume`, continues the acquisition a ticket names;
   * then loads the document and attaches the lock to it.
   */
  async function lockAndLoad(model: AnyModel, id: unknown, owner: unknown, call: ResolvedCallOptions): Promise<{ doc: AnyDoc; state: HeldLockState }> {
    const documentId = castId(model, id);
    const who = validateOwner(owner);
    const ticket = call.resume === undefined ? undefined : readTicket(call.resume, documentId, 'resume');
    const { store, watch, ready } = runtimeOf(model);
    await ready;
    const key = ownerKey(who);
    let grant: Grant;
    if (ticket) {
      grant = await store.resume(documentId, key, ticket, call.ttl);
    } else {
      const attempt = () => store.acquire(documentId, key, call.ttl, call.label);
      grant = call.wait > 0 || call.signal ? await acquireWaiting(documentId, attempt, watch, call.wait, call.signal) : await attempt();
    }
    const held: HeldLock = {
      documentId,
      owner: who,
      token: grant.token,
      fence: grant.fence,
      acquiredAt: grant.acquiredAt,
      expiresAt: grant.expiresAt,
      ttl: call.ttl,
      ticket: issueTicket(documentId, grant.token, grant.fence),
      label: grant.label,
    };
    const state = newHeldLockState(held, grant.serverNow);
    let doc: AnyDoc | null;
    try {
      // The id as the caller gave it: Mongoose casts it exactly as castId did (setters included).
      // From the primary whatever the connection's read preference: the holder must edit the
      // latest version of the document, not a secondary's possibly older copy.
      doc = (await model.findById(id).read('primary')) as AnyDoc | null;
    } catch (error) {
      await store.release(state).catch(() => undefined);
      throw error;
    }
    if (!doc) {
      await store.release(state).catch(() => undefined);
      throw new LockTargetNotFoundError(documentId, model.modelName);
    }
    attachHeldLock(doc, state);
    return { doc, state };
  }

  async function openHandle(model: AnyModel, id: unknown, owner: unknown, rawCall: unknown): Promise<LockHandle<AnyDoc>> {
    const call = validateLockCallOptions(rawCall, options.ttl, ['ttl', 'wait', 'signal', 'autoExtend', 'label']);
    const { doc, state } = await lockAndLoad(model, id, owner, call);
    const { store } = runtimeOf(model);
    return new LockHandle(doc, state, store, () => unlockDocument(doc), call.autoExtend);
  }

  async function unlockDocument(doc: AnyDoc): Promise<void> {
    const state = requireHeld(doc);
    const { store, ready } = runtimeOf(doc.constructor as AnyModel);
    await ready;
    await store.release(state);
    state.lost = 'released';
  }

  schema.static('lock', function lock(this: AnyModel, id: unknown, owner: unknown, callOptions?: unknown) {
    return typedErrors('lock', async () => (await lockAndLoad(this, id, owner, validateLockCallOptions(callOptions, options.ttl, ['ttl', 'wait', 'signal', 'label', 'resume']))).doc);
  });

  schema.static('tryLock', function tryLock(this: AnyModel, id: unknown, owner: unknown, callOptions?: unknown) {
    return typedErrors('tryLock', async () => {
      try {
        return (await lockAndLoad(this, id, owner, validateLockCallOptions(callOptions, options.ttl, ['ttl', 'label']))).doc;
      } catch (error) {
        if (error instanceof LockedError) return null;
        throw error;
      }
    });
  });

  schema.static('acquireLock', function acquireLock(this: AnyModel, id: unknown, owner: unknown, callOptions?: unknown) {
    return typedErrors('acquireLock', () => openHandle(this, id, owner, callOptions));
  });

  schema.static('withLock', async function withLock(this: AnyModel, id: unknown, owner: unknown, fn: unknown, callOptions?: unknown) {
    if (typeof fn !== 'function') throw new InvalidLockArgumentError('fn', 'expected a function (doc, signal) => result to run while the lock is held.');
    const handle = await typedErrors('withLock', () => openHandle(this, id, owner, callOptions));
    try {
      // Errors thrown by fn are the caller's own and reach it unchanged.
      return await (fn as (doc: AnyDoc, signal: AbortSignal) => unknown)(handle.document, handle.signal);
    } finally {
      await typedErrors('withLock', () => handle[asyncDispose]());
    }
  });

  schema.static('releaseAllFor', function releaseAllFor(this: AnyModel, owner: unknown) {
    return typedErrors('releaseAllFor', async () => {
      const who = validateOwner(owner);
      const { store, ready } = runtimeOf(this);
      await ready;
      return store.releaseAll(ownerKey(who));
    });
  });

  schema.static('isLocked', function isLocked(this: AnyModel, id: unknown) {
    return typedErrors('isLocked', async () => {
      const documentId = castId(this, id);
      const { store, ready } = runtimeOf(this);
      await ready;
      return (await store.findActive(documentId)) !== null;
    });
  });

  schema.static('getLock', function getLock(this: AnyModel, id: unknown) {
    return typedErrors('getLock', async () => {
      const documentId = castId(this, id);
      const { store, ready } = runtimeOf(this);
      await ready;
      return store.findActive(documentId);
    });
  });

  schema.static('unlock', function unlock(this: AnyModel, id: unknown, owner: unknown, unlockOptions?: unknown) {
    return typedErrors('unlock', async () => {
      const documentId = castId(this, id);
      const who = validateOwner(owner);
      const { ticket } = validateUnlockOptions(unlockOptions);
      const token = ticket === undefined ? undefined : readTicket(ticket, documentId, 'ticket').token;
      const { store, ready } = runtimeOf(this);
      await ready;
      return store.releaseHeld(documentId, ownerKey(who), token);
    });
  });

  schema.static('lockStatus', function lockStatus(this: AnyModel, ids: unknown, statusOptions?: unknown) {
    return typedErrors('lockStatus', async (): Promise<(LockStatus | null)[]> => {
      const { ids: list, owner } = validateStatusIds(ids, statusOptions);
      const documentIds = list.map((id) => castId(this, id));
      const key = owner === undefined ? undefined : ownerKey(owner);
      const { store, ready } = runtimeOf(this);
      await ready;
      const records = await store.statusOf(documentIds, key);
      // Match records to the ids asked for by their stored BSON form (ObjectIds are not ===, and
      // a Buffer id comes back as a Binary).
      const byId = new Map(records.map((record) => [idKey(record._id), record]));
      return documentIds.map((documentId) => {
        const record = byId.get(idKey(documentId));
        return record ? { ...lockInfoFrom(documentId, record), mine: record.mine === true } : null;
      });
    });
  });

  schema.static('listLocks', function listLocks(this: AnyModel, listOptions?: unknown) {
    return typedErrors('listLocks', async (): Promise<LockPage> => {
      const { owner, limit, after } = validateListOptions(listOptions);
      const start = after === undefined ? undefined : { id: castCursorId(this, after) };
      const key = owner === undefined ? undefined : ownerKey(owner);
      const { store, ready } = runtimeOf(this);
      await ready;
      const { records, more } = await store.list(key, limit, start);
      const locks = records.map((record) => lockInfoFrom(castId(this, fromStoredId(record._id)), record));
      const last = locks[locks.length - 1];
      return { locks, next: more && last ? cursorAfter(last.documentId) : null };
    });
  });

  /** Reads a listing cursor back into an `_id` of this schema's type (refusing anything else). */
  function castCursorId(model: AnyModel, cursor: { id: unknown }): unknown {
    try {
      return castId(model, fromStoredId(cursor.id));
    } catch {
      throw new InvalidLockOptionError('after', 'this is not a cursor from listLocks() for this model: pass `next` from the previous page unchanged.');
    }
  }

  schema.static('forceUnlock', function forceUnlock(this: AnyModel, id: unknown) {
    return typedErrors('forceUnlock', async () => {
      const documentId = castId(this, id);
      const { store, ready } = runtimeOf(this);
      await ready;
      return store.forceRelease(documentId);
    });
  });

  schema.static('lockModel', function lockModel(this: AnyModel) {
    return runtimeOf(this).lockModel;
  });

  schema.method('heldLock', function heldLock(this: AnyDoc): HeldLock | null {
    const state = heldLockState(this);
    return state && state.lost === undefined ? state.lock : null;
  });

  schema.method('unlock', function unlock(this: AnyDoc) {
    return typedErrors('unlock', () => unlockDocument(this));
  });

  schema.method('extendLock', function extendLock(this: AnyDoc, ttl?: unknown) {
    return typedErrors('extendLock', async () => {
      const state = requireHeld(this);
      const duration = ttl === undefined ? state.lock.ttl : validateTtl(ttl);
      const { store, ready } = runtimeOf(this.constructor as AnyModel);
      await ready;
      state.lock.expiresAt = await store.extend(state, duration);
      return state.lock.expiresAt;
    });
  });

  schema.method('saveAndUnlock', function saveAndUnlock(this: AnyDoc, saveOptions?: SaveOptions) {
    return typedErrors('saveAndUnlock', () => saveAndUnlockDocument(this, saveOptions));
  });

  async function saveAndUnlockDocument(doc: AnyDoc, saveOptions: SaveOptions | undefined): Promise<void> {
    if (saveOptions !== undefined && (saveOptions === null || typeof saveOptions !== 'object' || Array.isArray(saveOptions))) {
      throw new InvalidLockOptionError('(save options)', `expected Mongoose save options (an object) or nothing, got ${describeValue(saveOptions)}.`);
    }
    refuseSaveLockOptions(saveOptions, 'saveAndUnlock');
    const state = requireHeld(doc);
    const model = doc.constructor as AnyModel;
    const { store, ready } = runtimeOf(model);
    await ready;
    const callerSession = sessionOf(doc, saveOptions);
    const inCallerTransaction = callerSession?.inTransaction() === true;

    // The write guard releases the lock in the save's own transaction (the caller's, or the
    // guard's on replica sets): the release is the check, and it commits or aborts with the write.
    const context = await saveWithContext(doc, saveOptions, true);
    if (!context.released) {
      // Nothing was released with the write: there was nothing to write, or there are no
      // transactions (the guard checked, the save wrote; now release).
      try {
        await store.release(state, inCallerTransaction ? callerSession : undefined);
      } catch (error) {
        // The write was made under a verified lock; if the lock lapsed since, it is gone all the same.
        if (!(context.written && error instanceof LockNotHeldError)) throw error;
      }
    }
    state.lost = 'released';
    // In the caller's transaction the release stands only if that transaction commits.
    if (inCallerTransaction) state.pendingRelease = (callerSession as unknown as { transaction: object }).transaction;
  }

  /** The session a save of `doc` runs in: its options', the document's, or the transaction's of transactionAsyncLocalStorage. */
  function sessionOf(doc: AnyDoc, saveOptions: SaveOptions | undefined): ClientSession | undefined {
    if (saveOptions && Object.prototype.hasOwnProperty.call(saveOptions, 'session')) return (saveOptions.session ?? undefined) as ClientSession | undefined;
    const own = doc.$session() as ClientSession | null;
    if (own) return own;
    const base = (doc.constructor as AnyModel).db.base as unknown as { transactionAsyncLocalStorage?: { getStore(): { session?: ClientSession } | undefined } };
    return base.transactionAsyncLocalStorage?.getStore()?.session ?? undefined;
  }

  installGroupStatics(schema, { runtimeOf, castId, ownerKey, defaultTtl: options.ttl });
  installWriteGuard(schema, { runtimeOf, ownerKey, options });
}
