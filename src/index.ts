// The declarations use Node's types (Buffer ids and secrets, AbortSignal, Symbol.asyncDispose and
// AsyncDisposable on LockHandle). TypeScript 6+ includes no @types by default, so the entry point
// references them itself; `preserve` keeps the directive in the emitted index.d.ts (TS 5.5+).
/// <reference types="node" preserve="true" />
export { lockPlugin } from './plugin';
export {
  LockError,
  LockedError,
  LockNotHeldError,
  LockExpiredError,
  LockExpiredOnArrivalError,
  LockTargetNotFoundError,
  LockDatabaseError,
  LockConfigurationError,
  InvalidLockArgumentError,
  InvalidLockOptionError,
  type LockErrorCode,
  type LockLossReason,
} from './errors';
export type { LockPluginOptions } from './options';
export { DEFAULT_TTL_MS, MIN_TTL_MS, MAX_TTL_MS, DEFAULT_PURGE_AFTER_MS, TTL_WARNING_CODE } from './options';
export type { LockCallOptions, LockOptions } from './arguments';
export { MAX_OWNER_LENGTH, MAX_LABEL_LENGTH, isValidLockLabel } from './arguments';
export { MAX_ID_BYTES } from './id-value';
export type { HeldLock } from './held-lock';
// A type only: handles come from Model.acquireLock, never from `new`.
export type { LockHandle } from './lock-handle';
export { runWithLockOwner, currentLockOwner, lockOwnerMiddleware, type LockOwnerMiddlewareOptions, type RequestWithSession } from './owner-context';
export { lockErrorHandler, lockErrorBody, type LockErrorBody, type LockErrorHandler, type LockErrorResponse } from './express';
export type { LockQueryOptions } from './guard/options';
export { LockedDuringWriteError, LockedByTransactionError, type CommittedWrites } from './guard/errors';
export type { LockInfo, LockRecord, LockStatus, LockPage } from './lock-store';
export { MAX_STATUS_IDS, MAX_LIST_LIMIT, DEFAULT_LIST_LIMIT, type LockStatusOptions, type ListLocksOptions, type UnlockOptions } from './status-arguments';
export { MAX_TICKET_LENGTH } from './ticket';
export type { LockMethods, LockStatics, LockableModel, LockableDocument, LockTargetId, LockNextFilter } from './types';
export { MAX_SORT_FIELDS, type LockNextOptions, type AcquireNextOptions, type LockNextSort } from './next-arguments';
export { LOCK_MODEL_PREFIX } from './lock-model';
export { MAX_LOCK_MANY_IDS, type LockManyOptions, type LockGroupOptions } from './group-arguments';
// A type only: group handles come from Model.acquireLocks / acquireAllLocks, never from `new`.
export type { LockGroupHandle } from './lock-group-handle';
import { acquireAllLocks as untracedAcquireAllLocks, lockAll as untracedLockAll, unlockAll as untracedUnlockAll, withAllLocks as untracedWithAllLocks } from './lock-all';
import { tracedFunction } from './diagnostics-install';
export type { LockAllTarget, LockedDocuments, LockableModelLike } from './lock-all';
// The cross-model calls, on the diagnostics channels as the statics are (diagnostics.ts).
/**
 * Locks documents of several models for `owner`, all or nothing: resolves to the documents in the
 * order of `targets` (`[[Model, id], ...]`), each carrying its lock, or throws `LockedError` after
 * releasing everything it took. The cross-model form of `Model.lockMany`.
 *
 * @example
 * ```ts
 * const [order, invoice] = await lockAll([[Order, orderId], [Invoice, invoiceId]], req.sessionID);
 * ```
 */
export const lockAll = tracedFunction('lockMany', 'lockAll', untracedLockAll);
/** `lockAll` as a `LockGroupHandle` that renews the group's locks together while held and releases them together. */
export const acquireAllLocks = tracedFunction('lockMany', 'acquireAllLocks', untracedAcquireAllLocks);
/** Runs `fn(documents, signal)` under `lockAll`'s locks, renewing them while it runs; always releases them. */
export const withAllLocks = tracedFunction('lockMany', 'withAllLocks', untracedWithAllLocks);
/** Releases the locks of documents from `lockAll` (or any lock call), one command per lock collection; `LockNotHeldError` if one was already lost (the others are released). */
export const unlockAll = tracedFunction('unlock', 'unlockAll', untracedUnlockAll);
export { DIAGNOSTICS_PREFIX, type LockEvent, type LockTraceContext, type LockTraceKind } from './diagnostics';
