/**
 * The Mongoose wiring: `schema.plugin(lockPlugin, options)` adds the statics, the methods and
 * the write guard. The lock algorithm lives in lock-store.ts, waiting in lock-waiter.ts,
 * renewal in lock-handle.ts, and the write guard in guard/.
 */
import type { HydratedDocument, SaveOptions, mongo } from 'mongoose';
import { idCaster, validateLockCallOptions, validateOwner, type LockCallOptions, type ResolvedCallOptions } from './arguments';
import { InvalidLockArgumentError, InvalidLockOptionError, LockExpiredOnArrivalError, LockNotHeldError, LockTargetNotFoundError, LockedError } from './errors';
import { attachHeldLock, heldLockState, leaseLeft, lostError, newHeldLockState, releaseKnownLease, releaseLease, releaseOutcomeUnknown, settleReleaseWithServer, type HeldLock, type HeldLockFields, type HeldLockState } from './held-lock';
import { toLockError, typedErrors } from './failures';
import { loadDocument } from './document-load';
import { idKey, sameId } from './id-key';
import { callerError, publishErrorEvent } from './diagnostics';
import { installDiagnostics } from './diagnostics-install';
import { installGroupStatics } from './group-statics';
import { installWriteGuard, saveWithContext } from './guard/install';
import { refuseSaveLockOptions } from './guard/options';
import { LockHandle, asyncDispose } from './lock-handle';
import { MIN_LEASE_MS, monotonicNow } from './lease';
import { lockInfoFrom, type Grant, type LockPage, type LockStatus, type LockStore, type ReservingWaiter } from './lock-store';
import { abortedWith, acquireWaiting, calledOff } from './lock-waiter';
import { SingleWaiterReservation } from './single-waiter-reservation';
import { installNextStatics } from './next-statics';
import { describeValue, resolveOptions, validateTtl, type LockPluginOptions } from './options';
import { ownerKeyFunction } from './owner-key';
import { pluginApplication } from './plugin-registration';
import { runtimeFactory, type AnyModel, type AnySchema } from './runtime';
import { cursorAfter, validateListOptions, validateStatusIds, validateStatusIdsSize, validateUnlockOptions } from './status-arguments';
import { issueTicket, readTicket, type TicketParts } from './ticket';

type AnyDoc = HydratedDocument<unknown>;
type ClientSession = mongo.ClientSession;

/**
 * How many grants one lock call may receive too late to count on (lease.ts) before it gives up
 * with LockExpiredOnArrivalError; with `wait`, each round of the wait tries this many times.
 */
const LAPSED_GRANT_ATTEMPTS = 3;

/**
 * The lock a document carries, or a LockNotHeldError saying why it has none, before anything is
 * sent. A release made in the caller's transaction whose outcome this process cannot know (the
 * transaction ended, and the driver calls it committed even when the commit failed: held-lock.ts,
 * settleRelease) passes here and is settled by `confirmHeld`.
 */
function requireHeld(doc: AnyDoc): HeldLockState {
  const state = heldLockState(doc);
  if (!state) throw new LockNotHeldError(doc._id, 'not_locked');
  if (state.lost !== undefined && !releaseOutcomeUnknown(state)) throw lostError(state);
  return state;
}

/**
 * Settles, by asking the server, a release whose outcome only the server knows; then as requireHeld.
 * Without such a release it answers at once (undefined, or throws): no promise on the common path.
 */
function confirmHeld(state: HeldLockState, store: LockStore): Promise<void> | undefined {
  if (releaseOutcomeUnknown(state)) {
    return settleReleaseWithServer(state, store).then(() => {
      if (state.lost !== undefined) throw lostError(state);
    });
  }
  if (state.lost !== undefined) throw lostError(state);
  return undefined;
}

/**
 * A grant that came too late is released by its owner and token (cmd-unlock-by-owner): only that
 * acquisition, no second read. Every instance of that acquisition in this process learns that it
 * was released (held-lock.ts).
 */
async function releaseGrant(store: LockStore, documentId: unknown, key: string, grant: Grant): Promise<void> {
  if (await store.releaseHeld(documentId, key, grant.token)) releaseKnownLease(store.scope, documentId, grant.token);
}

/** The options `Model.lock` accepts. */
const LOCK_OPTIONS: readonly (keyof LockCallOptions)[] = ['ttl', 'wait', 'signal', 'label', 'resume'];

/**
 * Waits for `work` (a command already sent, which is never interrupted), or until `signal` aborts,
 * whichever comes first: a call called off is not kept waiting for an answer it no longer needs.
 */
async function untilAborted(work: Promise<unknown> | undefined, signal: AbortSignal | undefined): Promise<void> {
  if (!work) return;
  if (!signal) {
    await work;
    return;
  }
  if (signal.aborted) return;
  let onAbort!: () => void;
  const aborted = new Promise<void>((resolve) => (onAbort = resolve));
  signal.addEventListener('abort', onAbort, { once: true });
  try {
    await Promise.race([work, aborted]);
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

/**
 * The Mongoose plugin: gives the schema's model the lock statics (`Model.lock`, `acquireLock`,
 * `lockMany`, `lockNext`, `releaseAllFor`, ...) and its documents the lock methods
 * (`saveAndUnlock`, `unlock`, `extendLock`, `heldLock`), creates the sibling lock collection
 * `<collection>.locks` and guards every Mongoose write path against other owners' locks.
 * Register it before `model()`, on a schema or globally (`mongoose.plugin(lockPlugin)`).
 *
 * @example
 * ```ts
 * const schema = new Schema<Item, LockableModel<Item>, LockMethods>({ title: String });
 * schema.plugin(lockPlugin, { ttl: 30_000 });
 * const Item = model<Item, LockableModel<Item>>('Item', schema);
 *
 * const item = await Item.lock(id, req.sessionID);
 * item.title = 'renamed';
 * await item.saveAndUnlock();
 * ```
 */
export function lockPlugin(schema: AnySchema, rawOptions?: LockPluginOptions): void {
  // Decide first whether this application applies at all: the lock schemas themselves, a second
  // application, a schema already compiled, and embedded schemas reached by a global
  // registration (see plugin-registration.ts).
  const application = pluginApplication(schema, lockPlugin, rawOptions);
  if (application.skip) return;
  const options = resolveOptions(application.options);
  const { castId, castIdForLoad } = idCaster(schema);
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
    const { documentId, loadId } = castIdForLoad(model, id);
    const who = validateOwner(owner);
    const ticket = call.resume === undefined ? undefined : readTicket(call.resume, documentId, 'resume');
    const { store, watch, ready } = runtimeOf(model);
    await ready;
    const key = ownerKey(who);
    // No closure per call unless the call waits (issue 16, Performance).
    if (call.wait > 0 || call.signal) {
      // A waiting acquisition reserves its document once refused long enough (single-waiter-reservation.ts); a resume never does.
      const waiter = ticket ? undefined : new SingleWaiterReservation({ documentId, runtime: { store } });
      return acquireWaiting(documentId, () => takeLease(model, documentId, loadId, who, key, call, ticket, store, waiter), watch, call.wait, call.signal, waiter);
    }
    return takeLease(model, documentId, loadId, who, key, call, ticket, store);
  }

  /** One grant: the acquisition, or with a ticket its resume. */
  function grantOnce(documentId: unknown, key: string, call: ResolvedCallOptions, ticket: TicketParts | undefined, store: LockStore, waiter: ReservingWaiter | undefined): Promise<Grant> {
    // A resume without its own ttl extends by the acquisition's (stored in the lock record), as
    // extendLock() does; the plugin's ttl only for a record written before that was stored.
    return ticket ? store.resume(documentId, key, ticket, call.ttlGiven ? call.ttl : undefined, options.ttl) : store.acquire(documentId, key, call.ttl, call.label, waiter);
  }

  /**
   * Gets a grant and loads the document, and hands the lock out only while its lease (lease.ts:
   * timed from when the request was sent) is still running, checked when the grant arrives and
   * again once the document is loaded (PRODUCT.md property 13). A grant that arrived too late is
   * released by its token (best effort: it may already be free) and asked for again, up to
   * LAPSED_GRANT_ATTEMPTS times; then LockExpiredOnArrivalError. A resume is asked for again as
   * it is, with its ticket (releasing it would end the acquisition the ticket names), and released
   * only when the call gives up.
   */
  async function takeLease(
    model: AnyModel,
    documentId: unknown,
    loadId: unknown,
    who: string,
    key: string,
    call: ResolvedCallOptions,
    ticket: TicketParts | undefined,
    store: LockStore,
    waiter?: ReservingWaiter,
  ): Promise<{ doc: AnyDoc; state: HeldLockState }> {
    const resuming = ticket !== undefined;
    for (let attempt = 1; ; attempt++) {
      const grant = await grantOnce(documentId, key, call, ticket, store, waiter);
      const held: HeldLockFields = {
        documentId,
        owner: who,
        token: grant.token,
        fence: grant.fence,
        acquiredAt: grant.acquiredAt,
        expiresAt: grant.expiresAt,
        ttl: grant.ttl ?? call.ttl,
        // A resume names an acquisition that other instances in this process may carry or take up
        // later (the same ticket resumed by two requests, issued by another server): it enters the
        // map of leases at once, as its ticket is known (held-lock.ts, newHeldLockState).
        ticket: resuming ? issueTicket(documentId, grant.token, grant.fence) : () => issueTicket(documentId, grant.token, grant.fence),
        label: grant.label,
      };
      const state = newHeldLockState(held, grant, store.scope);
      if (leaseLeft(state) >= MIN_LEASE_MS) {
        const doc = await loadLocked(model, documentId, loadId, state, store);
        if (leaseLeft(state) >= MIN_LEASE_MS) {
          attachHeldLock(doc, state);
          return { doc, state };
        }
      }
      const elapsedMs = monotonicNow() - grant.sentAt;
      // A caller that called the lock off meanwhile is not kept waiting for more late grants.
      const abandoned = call.signal?.aborted === true;
      const last = attempt >= LAPSED_GRANT_ATTEMPTS || abandoned;
      // A grant that removed the caller's reservation (cmd-acquire's second stage) has it written
      // back first: released free and unreserved, the document would go to a younger waiter woken
      // by the release (reliability/late-grant-keeps-oldest-waiter-reservation). Not for a call
      // given up (it clears its reservation as it ends).
      // An abort that lands while the write-back or the release is answered ends the call at once,
      // as one before them did: the late grant is of no use, its release goes on in the background,
      // and no attempt is sent after the abort (reliability/abort-during-late-grant-write-back).
      if (!abandoned) await untilAborted(waiter?.lateGrant?.(), call.signal);
      const release = !resuming || last || call.signal?.aborted === true ? releaseGrant(store, documentId, key, grant).catch(() => undefined) : undefined;
      await untilAborted(release, call.signal);
      // An explicit abort rejects with its reason; a signal that timed out ends the call as its
      // grants arriving too late do (docs/api.md "Waiting": a timeout is the wait running out, never
      // the raw TimeoutError; reliability/late-grant-abort-aftermath).
      if (calledOff(call.signal)) throw abortedWith(documentId, call.signal!);
      if (last || call.signal?.aborted === true) throw new LockExpiredOnArrivalError(documentId, grant.expiresAt, { operation: resuming ? 'resume' : 'lock', ttl: grant.ttl ?? call.ttl, elapsedMs, attempts: attempt });
    }
  }

  /**
   * Loads the document just locked (`documentId`) by `loadId`, the caller's id decoded from its
   * BSON before the cast (CastId in arguments.ts): Mongoose casts it once, setters included, as
   * `findById(id)` does, so it finds the document the lock is on also when an `_id` setter is not
   * idempotent. From the primary whatever the connection's read preference: the holder must edit
   * the latest version, not a secondary's older copy. Releases the lock again if the load fails,
   * finds nothing, or finds a document whose `_id` is not the locked one (a setter that gives
   * another value each time).
   */
  async function loadLocked(model: AnyModel, documentId: unknown, loadId: unknown, state: HeldLockState, store: LockStore): Promise<AnyDoc> {
    let doc: AnyDoc | null;
    try {
      // The document `findById(loadId).read('primary')` returns (document-load.ts; loaded directly
      // by `documentId`, its cast, where that is the same).
      doc = await loadDocument(model, documentId, loadId);
    } catch (error) {
      await store.release(state).catch(() => undefined);
      throw error;
    }
    // The stored `_id` (without a getter's transformation) must be the locked one.
    if (!doc || !sameId(doc.get('_id', null, { getters: false }), documentId)) {
      await store.release(state).catch(() => undefined);
      throw new LockTargetNotFoundError(documentId, model.modelName);
    }
    return doc;
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
    const confirming = confirmHeld(state, store);
    if (confirming) await confirming;
    // The release may apply as soon as it is sent, also when its reply is then lost (model finding
    // F2): from the send on, no instance of the acquisition counts on it (PRODUCT.md property 13;
    // a handle of this document aborts its signal). One that fails reports its error and leaves
    // `lost` unset, so the next call learns from the server whether it applied.
    releaseLease(state);
    try {
      await store.release(state);
    } catch (error) {
      // A handle of this instance heard of the lease's end and recorded a release not known yet.
      if (!(error instanceof LockNotHeldError) && state.lost === 'released') state.lost = undefined;
      throw error;
    }
    state.lost = 'released';
  }

  // As typedErrors('lock', ...), written out: one async function per call (issue 16, Performance).
  schema.static('lock', async function lock(this: AnyModel, id: unknown, owner: unknown, callOptions?: unknown) {
    try {
      return (await lockAndLoad(this, id, owner, validateLockCallOptions(callOptions, options.ttl, LOCK_OPTIONS))).doc;
    } catch (error) {
      throw toLockError('lock', error);
    }
  });

  schema.static('tryLock', function tryLock(this: AnyModel, id: unknown, owner: unknown, callOptions?: unknown) {
    return typedErrors('tryLock', async () => {
      try {
        return (await lockAndLoad(this, id, owner, validateLockCallOptions(callOptions, options.ttl, ['ttl', 'label']))).doc;
      } catch (error) {
        if (error instanceof LockedError) {
          // The refusal becomes null here, so the diagnostics channel `refused` hears of it here.
          publishErrorEvent({ operation: 'tryLock', model: this.modelName, collection: this.collection.collectionName }, error);
          return null;
        }
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
      // Errors thrown by fn are the caller's own and reach it unchanged (no named diagnostics event for them).
      try {
        return await (fn as (doc: AnyDoc, signal: AbortSignal) => unknown)(handle.document, handle.signal);
      } catch (error) {
        throw callerError(error);
      }
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
      // With a ticket the acquisition is known: its instances in this process (a handle) stop
      // counting on it when the release is sent, which may apply even if its reply is lost (F2).
      if (token !== undefined) releaseKnownLease(store.scope, documentId, token);
      return store.releaseHeld(documentId, ownerKey(who), token);
    });
  });

  schema.static('lockStatus', function lockStatus(this: AnyModel, ids: unknown, statusOptions?: unknown) {
    return typedErrors('lockStatus', async (): Promise<(LockStatus | null)[]> => {
      // A fresh copy of the caller's array, each element read once (readArgumentArray).
      const { ids: list, owner } = validateStatusIds(ids, statusOptions);
      const documentIds: unknown[] = [];
      for (const id of list) documentIds.push(castId(this, id));
      validateStatusIdsSize(documentIds);
      const key = owner === undefined ? undefined : ownerKey(owner);
      const { store, ready } = runtimeOf(this);
      await ready;
      const records = await store.statusOf(documentIds, key);
      // Match records to the ids asked for by the value mongod compares (id-key.ts: ObjectIds are
      // not ===, a Buffer id comes back as a Binary, an int64 as a number or a Long).
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
      const key = owner === undefined ? undefined : ownerKey(owner);
      const { store, ready } = runtimeOf(this);
      await ready;
      const { records, more } = await store.list(key, limit, after);
      // Each `_id` as stored (not cast again: a setter would move it), read as a lock call's id is
      // (an int64 as a bigint, binary data as a Binary).
      const locks = records.map((record) => lockInfoFrom(record._id, record));
      const last = locks[locks.length - 1];
      return { locks, next: more && last ? cursorAfter(last.documentId) : null };
    });
  });

  schema.static('forceUnlock', function forceUnlock(this: AnyModel, id: unknown) {
    return typedErrors('forceUnlock', async () => {
      const documentId = castId(this, id);
      const { store, ready } = runtimeOf(this);
      await ready;
      return store.forceRelease(documentId);
    });
  });

  schema.static('createLockIndexes', function createLockIndexes(this: AnyModel) {
    return typedErrors('createLockIndexes', () => runtimeOf(this).setup.createIndexes());
  });

  schema.static('lockModel', function lockModel(this: AnyModel) {
    return runtimeOf(this).lockModel;
  });

  // The lock this instance carries until it learns the lock is gone (a refused call, a release);
  // whether it can still count on it is `msLeft()` (lease.ts, PRODUCT.md property 13): after a
  // lease ran out the server may still hold the lock, and the ticket still says which one it was.
  schema.method('heldLock', function heldLock(this: AnyDoc): HeldLock | null {
    const state = heldLockState(this);
    return state && state.lost === undefined ? state.view() : null;
  });

  // As typedErrors('unlock', ...), written out (see lock).
  schema.method('unlock', async function unlock(this: AnyDoc) {
    try {
      await unlockDocument(this);
    } catch (error) {
      throw toLockError('unlock', error);
    }
  });

  schema.method('extendLock', function extendLock(this: AnyDoc, ttl?: unknown) {
    return typedErrors('extendLock', async () => {
      const state = requireHeld(this);
      const duration = ttl === undefined ? state.lock.ttl : validateTtl(ttl);
      const { store, ready } = runtimeOf(this.constructor as AnyModel);
      await ready;
      await confirmHeld(state, store);
      await store.extend(state, duration);
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
    await confirmHeld(state, store);
    const callerSession = sessionOf(doc, saveOptions);
    const inCallerTransaction = callerSession?.inTransaction() === true;

    // The write guard releases the lock in the save's own transaction (the caller's, or the
    // guard's on replica sets): the release is the check, and it commits or aborts with the write.
    const context = await saveWithContext(doc, saveOptions, true);
    if (!context.released) {
      // Nothing was released with the write: there was nothing to write, or there are no
      // transactions (the guard checked, the save wrote; now release). Outside the caller's
      // transaction the lease ends when the release is sent, as in unlockDocument (finding F2).
      if (!inCallerTransaction) releaseLease(state);
      try {
        await store.release(state, inCallerTransaction ? callerSession : undefined);
      } catch (error) {
        // The write was made under a verified lock; if the lock lapsed since, it is gone all the same.
        if (!(context.written && error instanceof LockNotHeldError)) {
          // As in unlockDocument: a handle that heard of the lease's end recorded a release not known yet.
          if (!(error instanceof LockNotHeldError) && state.lost === 'released') state.lost = undefined;
          throw error;
        }
      }
    }
    // Released with the write in the guard's transaction, committed by now: this process's waiters
    // of the document ask again at once (local-wake.ts; store.release does so for the others).
    if (context.released && !inCallerTransaction) store.freed([state.lock.documentId]);
    state.lost = 'released';
    // In the caller's transaction the release stands only if that transaction commits.
    if (inCallerTransaction) state.pendingRelease = (callerSession as unknown as { transaction: object }).transaction;
    else releaseLease(state);
  }

  /** The session a save of `doc` runs in: its options', the document's, or the transaction's of transactionAsyncLocalStorage. */
  function sessionOf(doc: AnyDoc, saveOptions: SaveOptions | undefined): ClientSession | undefined {
    if (saveOptions && Object.prototype.hasOwnProperty.call(saveOptions, 'session')) return (saveOptions.session ?? undefined) as ClientSession | undefined;
    const own = doc.$session() as ClientSession | null;
    if (own) return own;
    const base = (doc.constructor as AnyModel).db.base as unknown as { transactionAsyncLocalStorage?: { getStore(): { session?: ClientSession } | undefined } };
    return base.transactionAsyncLocalStorage?.getStore()?.session ?? undefined;
  }

  // Job workers: Model.lockNext, acquireNext, withNext (next-statics.ts).
  installNextStatics(schema, { runtimeOf, ownerKey, options, unlockDocument });

  // Several documents at once: Model.lockMany, acquireLocks, withLocks, unlockMany (group-statics.ts).
  installGroupStatics(schema, { runtimeOf, castId: castIdForLoad, ownerKey, defaultTtl: options.ttl });

  installWriteGuard(schema, { runtimeOf, ownerKey, options });

  // Last: every static and method above, on the diagnostics channels (diagnostics-install.ts).
  installDiagnostics(schema);
}
