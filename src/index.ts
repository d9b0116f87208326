export { lockPlugin } from './plugin';
export {
  LockError,
  LockedError,
  LockNotHeldError,
  LockExpiredError,
  LockTargetNotFoundError,
  LockDatabaseError,
  InvalidLockArgumentError,
  InvalidLockOptionError,
  type LockErrorCode,
  type LockLossReason,
} from './errors';
export type { LockPluginOptions } from './options';
export { DEFAULT_TTL_MS, MAX_TTL_MS } from './options';
export type { LockCallOptions } from './arguments';
export { MAX_OWNER_LENGTH } from './arguments';
export type { HeldLock } from './held-lock';
export { LockHandle } from './lock-handle';
export { runWithLockOwner, currentLockOwner, lockOwnerMiddleware, type LockOwnerMiddlewareOptions, type RequestWithSession } from './owner-context';
export type { LockQueryOptions } from './guard/options';
export { LockedDuringWriteError, type CommittedWrites } from './guard/errors';
export { DEFAULT_PURGE_AFTER_MS } from './options';
export type { LockInfo, LockRecord } from './lock-store';
export type { LockMethods, LockStatics, LockableModel, LockableDocument, LockTargetId } from './types';
export { LOCK_MODEL_PREFIX } from './lock-model';
