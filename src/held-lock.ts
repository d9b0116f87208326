/**
 * What a document instance knows about the lock it carries. Kept in a WeakMap beside the
 * document (never on it), so locking adds nothing to the document's data or its JSON.
 */
import { LockExpiredError, LockNotHeldError, type LockLossReason } from './errors';
import { leaseDeadline, leaseFloor, monotonicNow, type GrantTiming } from './lease';

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
  /**
   * The server's expiry of the lock (the server's clock; updated by extendLock). It says when the
   * server frees the lock, not how long this process can count on it: a reply reaches this
   * process some time after the server wrote it, and the two clocks differ. Use `msLeft()`.
   */
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
  /**
   * Milliseconds this process can still count on holding the lock: timed on its own monotonic
   * clock from when the request that granted (or last extended) the lock was sent, less an
   * allowance for clock drift, so never longer than the server grants it. 0 once the lock may
   * have expired or is known to be lost.
   */
  msLeft(): number;
}

export interface HeldLockState {
  lock: HeldLock;
  /**
   * Monotonic clock reading taken immediately before the command that granted (or last resumed
   * or extended) the lock was sent.
   */
  grantedAtMonotonic: number;
  /** The server's clock (`$$NOW`) of that command, in ms since the epoch. */
  serverTimeAtGrant: number;
  /** Monotonic instant until which this process may count on the lock (lease.ts, leaseDeadline). */
  validUntil: number;
  /** Set once the lock is known to be gone, so later calls report the same reason. */
  lost: LockLossReason | undefined;
  /**
   * Set when saveAndUnlock released the lock inside the caller's transaction: the driver's
   * Transaction object of that attempt. The release holds only if that transaction commits (see
   * settleRelease and releaseOutcomeUnknown).
   */
  pendingRelease: object | undefined;
}

const states = new WeakMap<object, HeldLockState>();

/**
 * The fields of a HeldLock. The ticket may be given as a function: it is then computed when first
 * read (it hashes the document id, and most locks are never continued in a later request).
 */
export type HeldLockFields = Omit<HeldLock, 'msLeft' | 'ticket'> & { ticket: string | (() => string) };

/** The state of a lock just granted (or resumed) by a command timed by `timing`. */
export function newHeldLockState(fields: HeldLockFields, timing: GrantTiming): HeldLockState {
  const { ticket } = fields;
  let issued = typeof ticket === 'string' ? ticket : undefined;
  // One literal, fields in HeldLock's order, the ticket a getter (read-only, like the rest).
  const lock: HeldLock = {
    documentId: fields.documentId,
    owner: fields.owner,
    token: fields.token,
    fence: fields.fence,
    acquiredAt: fields.acquiredAt,
    expiresAt: fields.expiresAt,
    ttl: fields.ttl,
    get ticket() {
      return (issued ??= (ticket as () => string)());
    },
    label: fields.label,
    msLeft: () => (state.lost === undefined ? Math.max(0, state.validUntil - monotonicNow()) : 0),
  };
  const state: HeldLockState = {
    lock,
    grantedAtMonotonic: timing.sentAt,
    serverTimeAtGrant: timing.serverNow.getTime(),
    validUntil: leaseDeadline(timing),
    lost: undefined,
    pendingRelease: undefined,
  };
  return state;
}

/** Milliseconds this process may still count on the lock (negative once the lease ran out). */
export function leaseLeft(state: HeldLockState): number {
  return state.validUntil - monotonicNow();
}

/**
 * Before an extension of `ttl` is sent at `sentAt`: until its reply is known, count on the lock
 * only as long as both the current lease and the extension guarantee. An extension with a shorter
 * ttl shortens the lock on the server, and one whose outcome stays unknown must not lengthen it.
 */
export function beginExtension(state: HeldLockState, sentAt: number, ttl: number): void {
  state.validUntil = Math.min(state.validUntil, leaseFloor(sentAt, ttl));
}

/** After an extension succeeded: the server's new expiry, and the lease timed from its send. */
export function applyExtension(state: HeldLockState, timing: GrantTiming): void {
  state.lock.expiresAt = timing.expiresAt;
  state.grantedAtMonotonic = timing.sentAt;
  state.serverTimeAtGrant = timing.serverNow.getTime();
  state.validUntil = leaseDeadline(timing);
}

export function attachHeldLock(doc: object, state: HeldLockState): void {
  states.set(doc, state);
}

export function heldLockState(doc: object): HeldLockState | undefined {
  const state = states.get(doc);
  if (state) settleRelease(state);
  return state;
}

/** The driver's Transaction states (mongodb/lib/transactions.js, TxnState); not in its published types. */
const OPEN_STATES: ReadonlySet<unknown> = new Set(['STARTING_TRANSACTION', 'TRANSACTION_IN_PROGRESS']);

/**
 * Resolves what this process can know by itself about a release made inside the caller's
 * transaction: while that transaction is open, the lock counts as released (inside it, it is);
 * once it was aborted, the release was rolled back with it and the lock is held again.
 * A transaction the driver marks committed may not be: driver 7.8's commitTransaction moves the
 * Transaction to TRANSACTION_COMMITTED in a `finally`, also when the commit failed
 * (mongodb/lib/sessions.js, ClientSession.commitTransaction), and withTransaction then retries
 * the callback in a new Transaction after a TransientTransactionError. That outcome (and any
 * state this code does not know) is left pending for `releaseOutcomeUnknown`, to be settled by
 * asking the server; until then the lock counts as released.
 */
export function settleRelease(state: HeldLockState): void {
  const transaction = state.pendingRelease as { state?: unknown } | undefined;
  if (transaction?.state === 'TRANSACTION_ABORTED') {
    state.pendingRelease = undefined;
    state.lost = undefined;
  }
}

/**
 * Whether a release made in the caller's transaction has an outcome only the server can tell:
 * the transaction ended (not open, not aborted), committed or not (see settleRelease).
 */
export function releaseOutcomeUnknown(state: HeldLockState): boolean {
  settleRelease(state);
  const transaction = state.pendingRelease as { state?: unknown } | undefined;
  return transaction !== undefined && !OPEN_STATES.has(transaction.state);
}

/**
 * Estimate of the server's current time: the server's clock at the grant plus the time elapsed on
 * this process's monotonic clock since the granting request was sent. The server read its clock
 * after that send, so this errs late (never early); wall-clock skew cannot affect it. Used only
 * to word an error (expired vs released) when the lock record is already gone, never to decide
 * who holds a lock.
 */
export function estimatedServerNow(state: HeldLockState): number {
  return state.serverTimeAtGrant + (monotonicNow() - state.grantedAtMonotonic);
}

/** The error for using a lock this instance already knows is gone, with the same reason every time. */
export function lostError(state: HeldLockState): LockNotHeldError {
  const { documentId, expiresAt } = state.lock;
  return state.lost === 'expired' ? new LockExpiredError(documentId, expiresAt) : new LockNotHeldError(documentId, state.lost ?? 'not_locked');
}
