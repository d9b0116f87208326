/**
 * The guard's per-write options, `lockOwner` and `skipLockCheck`. They travel with the write's
 * other options (Mongoose passes a query's options on to the collection call), are validated
 * before anything is sent, and are removed before the driver sees them.
 */
import { validateOwner } from '../arguments';
import { InvalidLockOptionError } from '../errors';
import { currentLockOwner } from '../owner-context';

/** Options a guarded write accepts: query options, `Model.bulkWrite` options, `doc.deleteOne()` options. */
export interface LockQueryOptions {
  /** The owner this write acts as; its own locks do not stop it. */
  lockOwner?: string;
  /** Skip the lock check for this one write (the write is not guarded). */
  skipLockCheck?: boolean;
}

export interface WriteLockOptions {
  /** The owner named by the write, or else by the owner context; undefined when anonymous. */
  owner: string | undefined;
  skip: boolean;
}

/** Reads and removes the plugin's own options from a write's options object (a copy the guard owns). */
export function takeLockOptions(options: Record<string, unknown>): WriteLockOptions {
  const { lockOwner, skipLockCheck } = options;
  delete options.lockOwner;
  delete options.skipLockCheck;
  if (skipLockCheck !== undefined && typeof skipLockCheck !== 'boolean') {
    throw new InvalidLockOptionError('skipLockCheck', 'expected true or false.');
  }
  const owner = lockOwner !== undefined ? validateOwner(lockOwner) : currentLockOwner();
  return { owner, skip: skipLockCheck === true };
}

/**
 * `save()`, `$save()` and `saveAndUnlock()` take no `lockOwner` / `skipLockCheck`: Mongoose passes
 * only a few known save options on to the collection (`_createSaveOptions` in mongoose/lib/model.js),
 * so the guard would never see them, and a save would run as someone other than the caller meant.
 * A save's writer is the lock its instance carries, or else the owner context (`runWithLockOwner`).
 */
export function refuseSaveLockOptions(options: unknown, method: string): void {
  if (options === null || typeof options !== 'object') return;
  for (const name of ['lockOwner', 'skipLockCheck'] as const) {
    if (name in options) {
      throw new InvalidLockOptionError(
        name,
        `${method}() does not take ${name}. A document from Model.lock saves as its holder; to save another copy as an owner, run the save in runWithLockOwner(owner, ...); to write without the guard, use a query write with { skipLockCheck: true }.`,
      );
    }
  }
}

/**
 * Typed `lockOwner` / `skipLockCheck` on every write's options. Mongoose types most writes'
 * options as the driver's options (`UpdateOptions`, `DeleteOptions`, ...) joined with a `Pick` of
 * its own query options, so the driver's interfaces are where the two options must be declared.
 */
declare module 'mongodb' {
  interface UpdateOptions {
    /** The owner this write acts as (mongoose-pessimistic-lock). */
    lockOwner?: string;
    /** Skip the lock check for this write (mongoose-pessimistic-lock); the write is not guarded. */
    skipLockCheck?: boolean;
  }
  interface DeleteOptions {
    lockOwner?: string;
    skipLockCheck?: boolean;
  }
  interface ReplaceOptions {
    lockOwner?: string;
    skipLockCheck?: boolean;
  }
  interface FindOneAndUpdateOptions {
    lockOwner?: string;
    skipLockCheck?: boolean;
  }
  interface FindOneAndReplaceOptions {
    lockOwner?: string;
    skipLockCheck?: boolean;
  }
  interface FindOneAndDeleteOptions {
    lockOwner?: string;
    skipLockCheck?: boolean;
  }
  interface BulkWriteOptions {
    lockOwner?: string;
    skipLockCheck?: boolean;
  }
}
