/** Public types: the statics and methods the plugin adds, typed on the model and document. */
import type { HydratedDocument, Model, SaveOptions, Types } from 'mongoose';
import type { LockCallOptions, LockOptions } from './arguments';
import type { LockGroupOptions, LockManyOptions } from './group-arguments';
import type { LockGroupHandle } from './lock-group-handle';
import type { HeldLock } from './held-lock';
import type { LockHandle } from './lock-handle';
import type { LockInfo, LockPage, LockRecord, LockStatus } from './lock-store';
import type { AcquireNextOptions, LockNextOptions } from './next-arguments';
import type { ListLocksOptions, LockStatusOptions, UnlockOptions } from './status-arguments';

/** What `Model.lock` and friends accept as a document id; it is cast to the schema's `_id` type. */
export type LockTargetId = Types.ObjectId | string | number | bigint | Date | Buffer | Types.UUID;

/**
 * The query of `Model.lockNext`: what `Model.find` takes (cast the same way). `$where`, `$near`,
 * `$nearSphere` and `$text` are refused.
 */
export type LockNextFilter = Record<string, unknown>;

/** Methods the plugin adds to every document. */
export interface LockMethods {
  /** Releases the lock this document carries. Throws LockNotHeldError (or LockExpiredError) if it is no longer held. */
  unlock(): Promise<void>;
  /**
   * Saves the document under its lock, then releases the lock. If the save fails the lock stays
   * held; if the lock was lost, nothing is written. On replica sets both happen in one transaction.
   */
  saveAndUnlock(options?: SaveOptions): Promise<void>;
  /**
   * Extends the lock to `ttl` (default: the acquisition's ttl) from now, by the server's clock,
   * only while it is still current; resolves to the new expiry. Same errors as `unlock()`.
   */
  extendLock(ttl?: number): Promise<Date>;
  /** The lock this document carries, or null if it carries none (or it was released or lost). */
  heldLock(): HeldLock | null;
}

/** Statics the plugin adds to the model; `THydrated` is the model's document type. */
export interface LockStatics<THydrated> {
  /**
   * Locks the document for `owner` and returns it, loaded after the lock was taken.
   * Throws LockedError if another owner holds an unexpired lock; renews if `owner` holds it.
   * With `{ resume: ticket }` it instead continues the acquisition the ticket names (from an
   * earlier request), only while that acquisition is current: otherwise LockExpiredError or
   * LockNotHeldError (`'taken_over'`, `'released'`), and nothing is locked.
   */
  lock(id: LockTargetId, owner: string, options?: LockOptions): Promise<THydrated>;
  /** Like `lock`, but resolves to null instead of throwing LockedError; never waits. */
  tryLock(id: LockTargetId, owner: string, options?: Pick<LockCallOptions, 'ttl' | 'label'>): Promise<THydrated | null>;
  /**
   * Locks and returns a handle that renews the lock while held (`autoExtend`, default true),
   * exposes an AbortSignal that fires if the lock is lost, and releases on `release()` or at
   * the end of an `await using` block.
   */
  acquireLock(id: LockTargetId, owner: string, options?: Omit<LockCallOptions, 'resume'>): Promise<LockHandle<THydrated>>;
  /**
   * Runs `fn(doc, signal)` while holding the lock: renews it before it expires, aborts `signal`
   * at once if it is lost, always releases at the end, and returns what `fn` returns.
   */
  withLock<R>(id: LockTargetId, owner: string, fn: (doc: THydrated, signal: AbortSignal) => Promise<R> | R, options?: Omit<LockCallOptions, 'resume'>): Promise<R>;
  /**
   * Locks several documents for `owner` as one acquisition, all or nothing, and returns them in the
   * order of `ids`, each loaded after the locks were taken and carrying its lock (each saves,
   * `saveAndUnlock`s and `unlock`s on its own; `unlockMany` releases them together). Throws
   * LockedError naming a blocking document (with its holder's label) after releasing everything it
   * took; LockTargetNotFoundError for a missing document. With `wait`, waits for all of them to be
   * free at once; overlapping callers never deadlock. At most 1,000 ids, no duplicates; a constant
   * number of commands whatever their number.
   */
  lockMany(ids: readonly LockTargetId[], owner: string, options?: LockManyOptions): Promise<THydrated[]>;
  /**
   * `lockMany` with a handle: the locks are renewed together while held (`autoExtend`, default
   * true), `signal` aborts if any of them is lost, and `release()` (or the end of an `await using`
   * block) releases them together.
   */
  acquireLocks(ids: readonly LockTargetId[], owner: string, options?: LockGroupOptions): Promise<LockGroupHandle<THydrated[]>>;
  /**
   * Runs `fn(docs, signal)` while holding the locks of every document of `ids`: renews them
   * together, aborts `signal` at once if one is lost, always releases them at the end, and returns
   * what `fn` returns.
   */
  withLocks<R>(ids: readonly LockTargetId[], owner: string, fn: (docs: THydrated[], signal: AbortSignal) => Promise<R> | R, options?: LockGroupOptions): Promise<R>;
  /**
   * Releases the locks the documents carry (from `lockMany` or `lock`): one command for the
   * documents of one `lockMany`. Throws LockNotHeldError if one was already released or lost (after
   * releasing the others).
   */
  unlockMany(docs: readonly THydrated[]): Promise<void>;
  /**
   * Releases `owner`'s unexpired lock on the document (with `{ ticket }`: only that acquisition)
   * in one command, from any request; resolves to whether a lock was released. Never releases
   * anyone else's lock.
   */
  unlock(id: LockTargetId, owner: string, options?: UnlockOptions): Promise<boolean>;
  /**
   * Claims the next free document for a job worker: the first document in `sort` order (under
   * concurrency: one of the first free ones) that matches `filter` and that nobody holds, locked
   * for `owner` and loaded after the lock was taken (it matches `filter` then). Resolves null when
   * there is none; with `wait`, waits up to that many milliseconds for one (woken by releases and
   * by inserts and updates of the collection where change streams exist). Never returns a document
   * `owner` itself already holds.
   */
  lockNext(filter: LockNextFilter, owner: string, options?: LockNextOptions): Promise<THydrated | null>;
  /** Like `lockNext`, but resolves to a handle that renews the lock while held (as `acquireLock`), or null. */
  acquireNext(filter: LockNextFilter, owner: string, options?: AcquireNextOptions): Promise<LockHandle<THydrated> | null>;
  /**
   * Claims the next free document (as `lockNext`) and runs `fn(doc, signal)` while holding it, with
   * renewal (as `withLock`); resolves to what `fn` returns, or null without calling `fn` when there
   * was nothing to claim.
   */
  withNext<R>(
    filter: LockNextFilter,
    owner: string,
    fn: (doc: THydrated, signal: AbortSignal) => Promise<R> | R,
    options?: AcquireNextOptions,
  ): Promise<R | null>;
  /** Releases every unexpired lock held by `owner` (one command); resolves to how many. */
  releaseAllFor(owner: string): Promise<number>;
  /** Whether anyone holds an unexpired lock on the document. */
  isLocked(id: LockTargetId): Promise<boolean>;
  /** The unexpired lock on the document (when it was taken, when it expires, its label), or null. Never reveals the owner. */
  getLock(id: LockTargetId): Promise<LockInfo | null>;
  /**
   * The locks of a page of documents in one query: an array in the order of `ids`, each entry the
   * unexpired lock (with `label`, and `mine`: whether `options.owner` holds it) or null.
   */
  lockStatus(ids: readonly LockTargetId[], options?: LockStatusOptions): Promise<(LockStatus | null)[]>;
  /**
   * One page of this model's unexpired locks in `_id` order (optionally one owner's), for an
   * admin page: `{ locks, next }`; pass `next` as `after` for the following page. Never reveals
   * owners or tokens.
   */
  listLocks(options?: ListLocksOptions): Promise<LockPage>;
  /** Administrative release of whoever holds the lock; resolves to whether a lock was released. */
  forceUnlock(id: LockTargetId): Promise<boolean>;
  /**
   * Creates the lock collection's indexes now (the TTL index on `expiresAt`, `{ owner: 1, _id: 1 }`),
   * and changes the TTL index's expiry if `purgeAfter` changed, whatever `autoIndex` says: for deploy
   * scripts of applications that turn `autoIndex` off, beside Mongoose's `Model.createIndexes()`.
   * Rejects (LockDatabaseError, LockConfigurationError) if that fails; locking itself never needs it.
   */
  createLockIndexes(): Promise<void>;
  /** The sibling Mongoose model holding this model's locks (for index management and inspection). */
  lockModel(): Model<LockRecord>;
}

/**
 * The type of a model whose schema uses `lockPlugin`:
 * `model<WorkItem, LockableModel<WorkItem>>('WorkItem', schema)`.
 */
export type LockableModel<
  TRawDocType,
  TQueryHelpers = object,
  TInstanceMethods = object,
  TVirtuals = object,
> = Model<TRawDocType, TQueryHelpers, TInstanceMethods & LockMethods, TVirtuals> &
  LockStatics<HydratedDocument<TRawDocType, TInstanceMethods & LockMethods & TVirtuals>>;

/** The document type `Model.lock` resolves to. */
export type LockableDocument<TRawDocType, TInstanceMethods = object, TVirtuals = object> = HydratedDocument<
  TRawDocType,
  TInstanceMethods & LockMethods & TVirtuals
>;

/** The guard's query options, typed where Mongoose lets a plugin add them. */
declare module 'mongoose' {
  interface QueryOptions {
    /** The owner this write acts as (mongoose-pessimistic-lock); its own locks do not stop it. */
    lockOwner?: string;
    /** Skip the lock check for this write (mongoose-pessimistic-lock); the write is not guarded. */
    skipLockCheck?: boolean;
  }
  interface MongooseBulkWriteOptions {
    /** The owner this bulk write acts as (mongoose-pessimistic-lock). */
    lockOwner?: string;
    /** Skip the lock check for this bulk write (mongoose-pessimistic-lock). */
    skipLockCheck?: boolean;
  }
}
