/**
 * What a document instance knows about the lock it carries. Kept in a WeakMap beside the
 * document (never on it), so locking adds nothing to the document's data or its JSON.
 */
import { LockExpiredError, LockNotHeldError, type LockLossReason } from './errors';
import { idKey } from './id-key';
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

/**
 * What this process knows of one acquisition's lease, shared by every instance that carries it
 * (the instance that took the lock, its handle, an instance of a resume of the same acquisition in
 * this process): property 13 holds for each of them only if each hears of every command that
 * moved the lock's expiry on the server. Found by the document's `_id` and the acquisition's token.
 */
interface Lease {
  /** Monotonic instant until which this process may count on the lock (lease.ts, leaseDeadline). */
  validUntil: number;
  /** The server's expiry, from the reply that last set `validUntil`. */
  expiresAt: Date;
  /** Monotonic clock reading taken immediately before that command was sent. */
  grantedAtMonotonic: number;
  /** The server's clock (`$$NOW`) of that command, in ms since the epoch. */
  serverTimeAtGrant: number;
  /** Extensions and resumes of this acquisition sent and not yet answered (startExtension). */
  inFlight: number;
  /** The extensions answered since `inFlight` last rose from 0 (see finishExtension). */
  round: { bound: number; applied: GrantTiming | undefined } | undefined;
  /** Set when the holder released the acquisition (any instance of it): nothing is held. */
  released: boolean;
  /**
   * Commits on their way that carry a release of this acquisition (suspendLease): while any is,
   * nothing is counted on, as after a release that was sent.
   */
  suspended: number;
  /** The ttl of the instance that first carried this acquisition: what a resume without its own ttl adds (the record's `ttl`). */
  readonly ttl: number;
  /** Called after every change of the above (a handle re-arms its timers). */
  readonly listeners: Set<() => void>;
  /** Its entry in this process's map of leases (`_id` and token), once it has one (its ticket was issued). */
  key: string | undefined;
}

/**
 * The facts of one acquisition as the plugin itself keeps them (`HeldLockState.lock`): what every
 * command about the lock and every error is built from. Never the object `doc.heldLock()` hands
 * out (HeldLockView, a copy of these fields): what a caller writes there changes nothing the
 * plugin does.
 */
export interface AcquisitionFacts {
  readonly documentId: unknown;
  readonly owner: string;
  readonly token: string;
  readonly fence: number;
  readonly acquiredAt: Date;
  /** The server's expiry, from the acquisition's shared lease. */
  readonly expiresAt: Date;
  readonly ttl: number;
  readonly label: string | null;
  /** As HeldLock.msLeft. */
  msLeft(): number;
}

export interface HeldLockState {
  /** The acquisition's own facts (never the caller's object: see `view`). */
  readonly lock: AcquisitionFacts;
  /** The object `doc.heldLock()` returns (made when first asked for, then the same one). */
  view(): HeldLock;
  /** The acquisition's lease, shared with every other instance of it in this process. */
  readonly lease: Lease;
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

/**
 * The leases of the acquisitions instances of this process carry whose ticket was issued, by lock
 * collection (its deployment and namespace), `_id` and token (one acquisition: a lockAll group gives
 * its locks in several lock collections, on one or several deployments, one token, and two of them
 * may have one namespace and `_id`): kept only while an instance refers to one (a WeakRef). A released lease leaves at once (no instance may
 * join it again); entries whose lease was collected are swept whenever the map has doubled since
 * the last sweep, so the map stays as small as the live acquisitions at O(1) amortized cost per
 * lock (a FinalizationRegistry per lock cost more than the rest of newHeldLockState).
 */
const leases = new Map<string, WeakRef<Lease>>();
const MIN_SWEEP_SIZE = 1024;
let sweepAt = MIN_SWEEP_SIZE;

function remember(scope: string, documentId: unknown, token: string, lease: Lease): void {
  if (lease.key !== undefined) return;
  lease.key = leaseKey(scope, documentId, token);
  leases.set(lease.key, new WeakRef(lease));
  if (leases.size < sweepAt) return;
  for (const [k, ref] of leases) {
    const known = ref.deref();
    if (known === undefined || known.released) leases.delete(k);
  }
  sweepAt = Math.max(MIN_SWEEP_SIZE, leases.size * 2);
}

/** Drops the entry of a released lease (if it is still the one under its key). */
function forget(lease: Lease): void {
  if (lease.key !== undefined && leases.get(lease.key)?.deref() === lease) leases.delete(lease.key);
}

/** `scope`: the lock collection's deployment and namespace (LockStore.scope: a namespace alone names a collection only within one deployment). */
function leaseKey(scope: string, documentId: unknown, token: string): string {
  return `${token}\u0000${scope}\u0000${idKey(documentId)}`;
}

function knownLease(scope: string, documentId: unknown, token: string): Lease | undefined {
  if (leases.size === 0) return undefined; // no ticket issued and live: no key to build
  const lease = leases.get(leaseKey(scope, documentId, token))?.deref();
  return lease && !lease.released ? lease : undefined;
}

function changed(lease: Lease): void {
  if (lease.listeners.size === 0) return; // no handle: no copy of the set to make
  for (const listener of [...lease.listeners]) listener();
}

/**
 * The state of a lock just granted (or resumed) by a command timed by `timing`, in the lock
 * collection named by `scope` (LockStore.scope: its deployment and namespace). A resume of an
 * acquisition an instance of this process already carries joins that instance's lease: its own
 * extension was accounted there (LockStore.resume, startResume); the minimum with its own lease
 * covers a resume that was sent before that lease was known here.
 */
export function newHeldLockState(fields: HeldLockFields, timing: GrantTiming, scope: string): HeldLockState {
  // A resume joins the lease of an instance here that knows the ticket (one whose ticket was read,
  // or a resume: created with its ticket string); a fresh acquisition is entered in the map only
  // when its ticket is first read.
  let lease = knownLease(scope, fields.documentId, fields.token);
  if (lease) {
    const deadline = leaseDeadline(timing);
    if (deadline < lease.validUntil) {
      lease.validUntil = deadline;
      changed(lease);
    }
  } else {
    lease = {
      validUntil: leaseDeadline(timing),
      expiresAt: timing.expiresAt,
      grantedAtMonotonic: timing.sentAt,
      serverTimeAtGrant: timing.serverNow.getTime(),
      inFlight: 0,
      round: undefined,
      released: false,
      suspended: 0,
      ttl: fields.ttl,
      listeners: new Set(),
      key: undefined,
    };
    if (typeof fields.ticket === 'string') remember(scope, fields.documentId, fields.token, lease);
  }
  return new LockState(fields, lease, scope);
}

/**
 * A HeldLockState, and its own facts (`lock` is the state itself: one object per lock call). A
 * class with its accessors on the prototype: an object literal with accessors made a new hidden
 * class per lock (its getters are new closures each time), several microseconds per lock call
 * (issue 16, Performance). The object `doc.heldLock()` returns is made only when first asked for.
 */
class LockState implements HeldLockState, AcquisitionFacts {
  readonly documentId: unknown;
  readonly owner: string;
  readonly token: string;
  readonly fence: number;
  readonly acquiredAt: Date;
  readonly ttl: number;
  readonly label: string | null;
  lost: LockLossReason | undefined = undefined;
  pendingRelease: object | undefined = undefined;
  /** The ticket, once issued; until then the function that issues it. */
  #ticket: string | (() => string);
  #view: HeldLockView | undefined = undefined;

  constructor(
    fields: HeldLockFields,
    readonly lease: Lease,
    private readonly scope: string,
  ) {
    this.documentId = fields.documentId;
    this.owner = fields.owner;
    this.token = fields.token;
    this.fence = fields.fence;
    this.acquiredAt = fields.acquiredAt;
    this.ttl = fields.ttl;
    this.label = fields.label;
    this.#ticket = fields.ticket;
  }

  get lock(): AcquisitionFacts {
    return this;
  }

  get expiresAt(): Date {
    return this.lease.expiresAt;
  }

  msLeft(): number {
    const { lease } = this;
    return this.lost === undefined && !lease.released && lease.suspended === 0 ? Math.max(0, lease.validUntil - monotonicNow()) : 0;
  }

  /**
   * The acquisition's ticket, issued when first read (it hashes the document id, and most locks are
   * never continued in a later request); only then does the lease enter the map of leases, by the
   * acquisition's own facts.
   */
  ticket(): string {
    const ticket = this.#ticket;
    if (typeof ticket === 'string') return ticket;
    const issued = ticket();
    this.#ticket = issued;
    if (!this.lease.released) remember(this.scope, this.documentId, this.token, this.lease);
    return issued;
  }

  view(): HeldLock {
    return (this.#view ??= new HeldLockView(this));
  }

  get grantedAtMonotonic(): number {
    return this.lease.grantedAtMonotonic;
  }

  set grantedAtMonotonic(value: number) {
    this.lease.grantedAtMonotonic = value;
  }

  get serverTimeAtGrant(): number {
    return this.lease.serverTimeAtGrant;
  }

  set serverTimeAtGrant(value: number) {
    this.lease.serverTimeAtGrant = value;
  }

  get validUntil(): number {
    return this.lease.validUntil;
  }

  set validUntil(value: number) {
    this.lease.validUntil = value;
    changed(this.lease);
  }
}

/**
 * How a HeldLockView finds its acquisition: a symbol-keyed, non-enumerable, read-only property (not
 * in `Object.keys`, JSON or a spread) whose value is an empty frozen key, and this module's
 * WeakMap from that key to the acquisition. Unlike a `#private` field, which is found only on the
 * very object it was installed on, a property is found through a Proxy (Vue's `reactive()` reads
 * with the Proxy as receiver, and hands back a frozen object as it is) and through an heir
 * (`Object.create(lock)`); and unlike the acquisition itself, the key gives a caller nothing to
 * change (the plugin's own state is reachable from this module only).
 */
const ACQUISITION: unique symbol = Symbol('acquisition');
const ACQUISITIONS = new WeakMap<object, LockState>();

type ViewReceiver = { readonly [ACQUISITION]: object };

function acquisitionOf(view: ViewReceiver): LockState {
  return ACQUISITIONS.get(view[ACQUISITION])!;
}

/** The accessors every HeldLockView defines as its own, the same functions for all (one hidden class). */
const HELD_LOCK_ACCESSORS = {
  expiresAt: {
    get(this: ViewReceiver): Date {
      return acquisitionOf(this).expiresAt;
    },
    // The caller's object: a value written here is the caller's own (a data property from then on),
    // never the lease's expiry, which only the server's replies set.
    set(this: object, value: Date) {
      Object.defineProperty(this, 'expiresAt', { value, writable: true, enumerable: true, configurable: true });
    },
    enumerable: true,
    configurable: true,
  },
  ticket: {
    get(this: ViewReceiver): string {
      return acquisitionOf(this).ticket();
    },
    enumerable: true,
    configurable: true,
  },
} satisfies Record<string, PropertyDescriptor>;

/**
 * The lock `doc.heldLock()` returns: a copy of the acquisition's facts, so that what the caller
 * writes to its fields (documented read-only, writable in JavaScript) changes nothing the plugin
 * does. Its fields are own enumerable properties, as documented (the README's table, JSON): the
 * data fields, `msLeft`, and the accessors `expiresAt` (the shared lease's: every instance of the
 * acquisition sees an extension) and `ticket` (issued when first read), defined with shared
 * functions (HELD_LOCK_ACCESSORS) that find the acquisition through the ACQUISITION key, so they
 * work with any receiver. Read-only `ticket` (no setter).
 */
class HeldLockView implements HeldLock {
  declare readonly [ACQUISITION]: object;
  declare readonly documentId: unknown;
  declare readonly owner: string;
  declare readonly token: string;
  declare readonly fence: number;
  declare readonly acquiredAt: Date;
  declare expiresAt: Date;
  declare readonly ttl: number;
  declare readonly ticket: string;
  declare readonly label: string | null;
  declare readonly msLeft: () => number;

  constructor(state: LockState) {
    const key = Object.freeze({});
    ACQUISITIONS.set(key, state);
    Object.defineProperty(this, ACQUISITION, { value: key });
    // The fields in the order they always had (all `declare`d: none is defined before this).
    this.documentId = state.documentId;
    this.owner = state.owner;
    this.token = state.token;
    this.fence = state.fence;
    this.acquiredAt = state.acquiredAt;
    Object.defineProperty(this, 'expiresAt', HELD_LOCK_ACCESSORS.expiresAt);
    this.ttl = state.ttl;
    this.label = state.label;
    // Its own function (callable detached, as `const { msLeft } = doc.heldLock()`).
    this.msLeft = () => state.msLeft();
    Object.defineProperty(this, 'ticket', HELD_LOCK_ACCESSORS.ticket);
  }
}

/** Milliseconds this process may still count on the lock (negative once the lease ran out or the holder released it). */
export function leaseLeft(state: HeldLockState): number {
  return state.lease.released || state.lease.suspended > 0 ? -Infinity : state.lease.validUntil - monotonicNow();
}

/** Calls `listener` after every change of the acquisition's lease (any instance's); returns the unsubscribe. */
export function onLeaseChange(state: HeldLockState, listener: () => void): () => void {
  state.lease.listeners.add(listener);
  return () => state.lease.listeners.delete(listener);
}

/**
 * Whether the holder released this acquisition (through any instance of it), or sent a commit that
 * carries its release (suspendLease).
 */
export function leaseReleased(state: HeldLockState): boolean {
  return state.lease.released || state.lease.suspended > 0;
}

/**
 * Before a commit that carries a release of this acquisition is sent (saveAndUnlock in the write
 * guard's own transaction): the release applies when the server applies the commit, which may be
 * long before its reply arrives, and from then on another owner may take the lock. So, as a
 * release ends the lease when it is sent (model finding F2), no instance counts on the lock from
 * the send on. Returns the resumption, for a commit known NOT to have applied (the transaction was
 * aborted): the lease is counted on again as it was (time-based, it stayed conservative). Once the
 * commit is known to have applied, the caller ends the lease (releaseLease).
 */
export function suspendLease(state: HeldLockState): () => void {
  const { lease } = state;
  lease.suspended++;
  changed(lease);
  let resumed = false;
  return () => {
    if (resumed) return;
    resumed = true;
    lease.suspended--;
    changed(lease);
  };
}

/** Extensions or resumes of the acquisition on their way (a handle does not renew meanwhile). */
export function extensionsInFlight(state: HeldLockState): number {
  return state.lease.inFlight;
}

/** The holder released the acquisition (the release is known to have applied): every instance of it learns it. */
export function releaseLease(state: HeldLockState): void {
  if (state.lease.released) return;
  state.lease.released = true;
  forget(state.lease);
  changed(state.lease);
}

/** As releaseLease, for an acquisition named by its lock collection, `_id` and token (a resume given up). */
export function releaseKnownLease(scope: string, documentId: unknown, token: string): void {
  const lease = knownLease(scope, documentId, token);
  if (!lease) return;
  lease.released = true;
  forget(lease);
  changed(lease);
}

/** An extension (or resume) of one acquisition on its way; finishExtension settles it. */
export interface PendingExtension {
  readonly lease: Lease;
  readonly sentAt: number;
  readonly ttl: number;
}

function start(lease: Lease, sentAt: number, ttl: number): PendingExtension {
  if (lease.inFlight++ === 0) lease.round = { bound: Infinity, applied: undefined };
  lease.validUntil = Math.min(lease.validUntil, leaseFloor(sentAt, ttl));
  changed(lease);
  return { lease, sentAt, ttl };
}

/**
 * Before an extension of `ttl` is sent at `sentAt`: until its reply is known, count on the lock
 * only as long as both the current lease and the extension guarantee. An extension with a shorter
 * ttl shortens the lock on the server, and one whose outcome stays unknown must not lengthen it.
 */
export function startExtension(state: HeldLockState, sentAt: number, ttl: number): PendingExtension {
  return start(state.lease, sentAt, ttl);
}

/** As startExtension, for a resume of an acquisition an instance of this process carries (if any does). */
export function startResume(scope: string, documentId: unknown, token: string, sentAt: number, ttl: number | undefined): PendingExtension | undefined {
  const lease = knownLease(scope, documentId, token);
  // Without the caller's ttl the server adds the record's own, which is the acquisition's.
  return lease ? start(lease, sentAt, ttl ?? lease.ttl) : undefined;
}

/**
 * After an extension (or resume) was answered (`timing`), or failed with an unknown outcome
 * (undefined: it may have been applied, or may still be).
 *
 * Each one sets `expiresAt = $$NOW + ttl` (it does not only lengthen), and mongod applies the
 * writes of one record one after the other, so after several of them the server's expiry is the
 * one written by the LAST APPLIED. The order in which the replies arrive does not say which one
 * that was: a reply can be delayed, and a retried findAndModify (retryable writes, after a lost
 * reply) is answered from the stored result of the first execution, long after later commands ran
 * (parseOplogEntryForFindAndModify in src/mongo/db/query/write_ops/write_ops_retryability.cpp,
 * SERVER-31242). So the rule: extensions whose flights overlap (the in-flight count did not fall
 * to 0 between them) form a round, and the lease after the round is the MINIMUM of their leases:
 * the last applied is one of them, and each lease is conservative for its own command (lease.ts).
 * One whose outcome is unknown counts with its floor (it may be the last applied). While the round
 * lasts the lease only shrinks; once it is over and at least one of them is known to have been
 * applied, the lease before the round no longer counts (that command overwrote it).
 */
export function finishExtension(pending: PendingExtension, timing: GrantTiming | undefined): void {
  const { lease } = pending;
  const round = lease.round ?? { bound: Infinity, applied: undefined };
  const bound = timing ? leaseDeadline(timing) : leaseFloor(pending.sentAt, pending.ttl);
  round.bound = Math.min(round.bound, bound);
  if (timing && (round.applied === undefined || bound <= leaseDeadline(round.applied))) round.applied = timing;
  lease.validUntil = Math.min(lease.validUntil, bound);
  lease.inFlight = Math.max(0, lease.inFlight - 1);
  if (lease.inFlight === 0) {
    if (round.applied) {
      lease.validUntil = round.bound;
      lease.expiresAt = round.applied.expiresAt;
      lease.grantedAtMonotonic = round.applied.sentAt;
      lease.serverTimeAtGrant = round.applied.serverNow.getTime();
    }
    lease.round = undefined;
  }
  changed(lease);
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
 * Settles a release made in a caller's transaction that has ended, committed or not, with one
 * read of the lock record (LockStore.verify outside a transaction: is it still this acquisition,
 * unexpired by the server's clock?). Still ours: the transaction did not commit, so neither did
 * the release, and the lock is held (a retried `withTransaction` callback can save and release
 * again). Not ours: the read says why (released by the commit, expired, taken over). A read that
 * fails leaves the question open for the next call.
 */
export async function settleReleaseWithServer(state: HeldLockState, store: { verify(state: HeldLockState): Promise<void> }): Promise<void> {
  try {
    await store.verify(state);
    state.lost = undefined;
  } catch (error) {
    if (!(error instanceof LockNotHeldError)) throw error;
    // verify recorded the reason in state.lost.
  }
  state.pendingRelease = undefined;
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
