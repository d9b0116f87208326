/**
 * What a document instance knows about the lock it carries. Kept in a WeakMap beside the
 * document (never on it), so locking adds nothing to the document's data or its JSON.
 */
import { performance } from 'node:perf_hooks';
import { LockExpiredError, LockNotHeldError, type LockLossReason } from './errors';

/** The lock a document carries, as returned by `doc.heldLock()`. */
export interface HeldLock {
  /** The locked document's `_id`. */
  readonly documentId: unknown;
  /** The owner passed to `Model.lock` (kept in memory only; stored hashed unless configured otherwise). */
  readonly owner: string;
  /** Unique to this acquisition: a renewal or takeover gets another one. */
  readonly token: string;
  /**
   * Fencing token: strictly greater than the fence of every earlier acquisition of this
   * document. Pass it to external systems so they can refuse writes from stale holders.
   */
  readonly fence: number;
  /** Server time at which this acquisition took the lock. */
  readonly acquiredAt: Date;
  /** Server time at which the lock expires unless renewed or released (updated by extendLock). */
  expiresAt: Date;
  /** The ttl used for this acquisition, in milliseconds. */
  readonly ttl: number;
  /**
   * Continues this acquisition in a later request: keep it in the session or a hidden form field
   * and pass it to `Model.lock(id, owner, { resume: ticket })`. It names the acquisition and the
   * document, never the owner, and works only for the owner that took the lock.
   */
  readonly ticket: string;
  /** The display label given to `Model.lock(id, owner, { label })`, or null. Stored in clear. */
  readonly label: string | null;
}

export interface HeldLockState {
  lock: HeldLock;
  /** Local monotonic clock reading taken when the server granted the lock. */
  grantedAtMonotonic: number;
  /** The server's clock when it granted (or resumed) the lock, in ms since the epoch. */
  serverTimeAtGrant: number;
  /** Set once the lock is known to be gone, so later calls report the same reason. */
  lost: LockLossReason | undefined;
  /**
   * Set when saveAndUnlock released the lock inside the caller's transaction: the driver's
   * Transaction object of that attempt. The release holds only if that transaction commits; if
   * it aborts, the lock is still held (see settleRelease).
   */
  pendingRelease: object | undefined;
}

const states = new WeakMap<object, HeldLockState>();

/** `serverNow`: the server's clock in the reply that granted the lock (default: its acquiredAt). */
export function newHeldLockState(lock: HeldLock, serverNow: Date = lock.acquiredAt): HeldLockState {
  return { lock, grantedAtMonotonic: performance.now(), serverTimeAtGrant: serverNow.getTime(), lost: undefined, pendingRelease: undefined };
}

export function attachHeldLock(doc: object, state: HeldLockState): void {
  states.set(doc, state);
}

export function heldLockState(doc: object): HeldLockState | undefined {
  const state = states.get(doc);
  if (state) settleRelease(state);
  return state;
}

/**
 * Resolves a release made inside the caller's transaction once that transaction has ended:
 * committed, the lock is released; aborted, the release was rolled back with it and the lock is
 * held again. While it runs, the lock counts as released (inside the transaction it is).
 * The driver creates one Transaction object per startTransaction() and moves it to its final
 * state on commit or abort (mongodb/lib/transactions.js, TxnState); `state` is not in the
 * driver's published types, so an unknown shape keeps the conservative answer (released).
 */
export function settleRelease(state: HeldLockState): void {
  const transaction = state.pendingRelease as { state?: unknown } | undefined;
  if (!transaction) return;
  if (transaction.state === 'TRANSACTION_ABORTED') {
    state.pendingRelease = undefined;
    state.lost = undefined;
  } else if (transaction.state === 'TRANSACTION_COMMITTED' || transaction.state === 'TRANSACTION_COMMITTED_EMPTY') {
    state.pendingRelease = undefined;
    state.lost = 'released';
  }
}

/**
 * Estimate of the server's current time: the server's clock at the grant plus the time elapsed on
 * this process's monotonic clock. Wall-clock skew cannot affect it. Used only to word an error
 * (expired vs released) when the lock record is already gone, never to decide who holds a lock.
 */
export function estimatedServerNow(state: HeldLockState): number {
  return state.serverTimeAtGrant + (performance.now() - state.grantedAtMonotonic);
}

/** The error for using a lock this instance already knows is gone, with the same reason every time. */
export function lostError(state: HeldLockState): LockNotHeldError {
  const { documentId, expiresAt } = state.lock;
  return state.lost === 'expired' ? new LockExpiredError(documentId, expiresAt) : new LockNotHeldError(documentId, state.lost ?? 'not_locked');
}
