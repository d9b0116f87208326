/**
 * Several locks held together for the length of a piece of work (`Model.acquireLocks`,
 * `Model.withLocks`, `acquireAllLocks`, `withAllLocks`): renewed together before they expire (one
 * command per lock collection), an AbortSignal that fires the moment any of them is lost (the
 * group is then lost as a whole), and one call that releases the group, including through
 * `await using`. Each document still saves, `saveAndUnlock`s and `unlock`s on its own; a document
 * released that way simply leaves the group.
 */
import { LockExpiredError, LockNotHeldError } from './errors';
import { publishLost } from './diagnostics';
import { typedErrors } from './failures';
import { leaseLeft, leaseReleased, settleRelease, type HeldLockState } from './held-lock';
import { asyncDispose } from './lock-handle';
import { extendGroup, releaseGroup, type HeldGroup } from './lock-group';
import { validateTtl } from './options';

/** Renew when this fraction of the ttl is left, so two attempts fit before expiry (as LockHandle). */
const RENEW_AT_FRACTION = 1 / 3;
/** Node's largest timer delay (2^31 - 1 ms); see lock-handle.ts. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** A timer that never exceeds Node's limit and does not keep the process alive (see lock-handle.ts). */
function backgroundTimer(ms: number, fire: () => void): NodeJS.Timeout {
  const timer = setTimeout(fire, Math.min(Math.max(0, ms), MAX_TIMER_MS));
  timer.unref();
  return timer;
}

/**
 * Several held locks and their documents, from `Model.acquireLocks` or `acquireAllLocks`: renewed
 * together while held (`autoExtend`, default true), with a `signal` that aborts when any of them
 * is lost, and released together by `release()` or at the end of an `await using` block.
 *
 * @example
 * ```ts
 * await using handle = await Account.acquireLocks([fromId, toId], 'transfer-job');
 * const [from, to] = handle.documents;
 * ```
 */
export class LockGroupHandle<TDocs extends readonly unknown[]> implements AsyncDisposable {
  private readonly controller = new AbortController();
  private renewTimer: NodeJS.Timeout | undefined;
  private lossTimer: NodeJS.Timeout | undefined;
  private done = false;

  constructor(
    /** The locked documents, in the order they were asked for, loaded after the locks were taken. */
    readonly documents: TDocs,
    private readonly group: HeldGroup,
    autoExtend: boolean,
  ) {
    if (autoExtend) this.schedule();
    else this.armLossTimer();
  }

  /**
   * Aborts as soon as any lock of the group is known to be lost (its reason is the
   * LockNotHeldError), and when the group's lease runs out (lease.ts). A timer delivers the latter,
   * so a blocked event loop delays it; reading `signal` (or `msLeft()`) checks the lease at once.
   */
  get signal(): AbortSignal {
    this.checkLease();
    return this.controller.signal;
  }

  /** Milliseconds this process can still count on every lock of the group (0 once one is lost or its lease ran out). */
  msLeft(): number {
    this.checkLease();
    if (this.controller.signal.aborted) return 0;
    const left = this.msUntilExpiry();
    // None held any more (released): nothing to count on.
    return left === Infinity ? 0 : Math.max(0, left);
  }

  private checkLease(): void {
    if (this.done) return;
    const first = this.liveStates().find((state) => leaseLeft(state) <= 0);
    if (first) this.lose(new LockExpiredError(first.lock.documentId, first.lock.expiresAt));
  }

  /** The fencing tokens of the documents, in the order of `documents`. */
  get fences(): number[] {
    return this.states().map((state) => state.lock.fence);
  }

  /** The earliest expiry (server time) among the locks still held, moved forward by every renewal. */
  get expiresAt(): Date {
    const live = this.liveStates();
    const first = live[0] ?? this.states()[0];
    return live.reduce((earliest, state) => (state.lock.expiresAt < earliest ? state.lock.expiresAt : earliest), first.lock.expiresAt);
  }

  /**
   * Renews every lock still held now, to `ttl` milliseconds (default: the acquisition's ttl) from
   * the server's now: one command per lock collection. Throws InvalidLockOptionError for a bad ttl
   * before anything is sent; LockNotHeldError (and aborts `signal`) if any lock was lost.
   */
  async extend(ttl?: number): Promise<void> {
    await this.renewOnce(ttl);
  }

  /** One renewal; resolves to false when it could not tell yet whether a lock found released is lost (extendGroup). */
  private async renewOnce(ttl?: number): Promise<boolean> {
    const duration = ttl === undefined ? this.group.ttl : validateTtl(ttl);
    let decided: boolean;
    try {
      decided = await typedErrors('extendLocks', () => extendGroup(this.group, duration));
    } catch (error) {
      if (error instanceof LockNotHeldError) this.lose(error);
      throw error;
    }
    this.armLossTimer();
    return decided;
  }

  /**
   * Stops renewing and releases every lock still held, one command per lock collection. Throws
   * LockNotHeldError if one was lost (the others are released all the same).
   */
  async release(): Promise<void> {
    this.stop();
    await typedErrors('unlockMany', () => releaseGroup(this.group));
  }

  /** Releases unless already released; never throws for a lost lock. */
  async [asyncDispose](): Promise<void> {
    this.stop();
    await typedErrors('unlockMany', () => releaseGroup(this.group)).catch((error: unknown) => {
      if (!(error instanceof LockNotHeldError)) throw error;
    });
  }

  private states(): HeldLockState[] {
    return this.group.parts.flatMap((part) => part.states);
  }

  /**
   * The locks the group still counts on: not lost, and not released by their holder. A member's own
   * release (`unlock()`, `unlockMany`, `saveAndUnlock()`) ends its lease when it is sent and marks
   * it 'released' only once answered (model finding F2); in between it has left the group, and its
   * ended lease is no expiry of the group.
   */
  private liveStates(): HeldLockState[] {
    return this.states().filter((state) => {
      settleRelease(state);
      return state.lost === undefined && !leaseReleased(state);
    });
  }

  /** Milliseconds until the first lock still held expires, by the conservative lease; Infinity when none is held. */
  private msUntilExpiry(): number {
    const live = this.liveStates();
    return live.length === 0 ? Infinity : Math.min(...live.map((state) => leaseLeft(state)));
  }

  private schedule(): void {
    if (this.done) return;
    const left = this.msUntilExpiry();
    if (left === Infinity) return; // every lock was released one by one: nothing left to renew
    const renewIn = Math.max(0, left - this.group.ttl * RENEW_AT_FRACTION);
    this.renewTimer = backgroundTimer(renewIn, () => void (renewIn > MAX_TIMER_MS ? this.schedule() : this.renew()));
    this.armLossTimer();
  }

  private async renew(): Promise<void> {
    if (this.done) return;
    const again = () => {
      this.renewTimer = backgroundTimer(Math.max(1, Math.min(this.msUntilExpiry() / 2, 1_000)), () => void this.renew());
    };
    try {
      // Undecided (a lock found released that may be this process's own release in flight): again soon.
      if (!(await this.renewOnce())) return again();
    } catch (error) {
      if (error instanceof LockNotHeldError) return; // lose() already ran
      // A transient failure: try again soon; the loss timer still guards expiry.
      return again();
    }
    this.schedule();
  }

  /** Fires at the earliest expiry we know of, unless a renewal moved it. */
  private armLossTimer(): void {
    clearTimeout(this.lossTimer);
    if (this.done) return;
    const left = this.msUntilExpiry();
    if (left === Infinity) return;
    this.lossTimer = backgroundTimer(Math.max(0, left) + 1, () => {
      if (this.done) return;
      const first = this.liveStates().find((state) => leaseLeft(state) <= 0);
      if (first) {
        first.lost ??= 'expired';
        this.lose(new LockExpiredError(first.lock.documentId, first.lock.expiresAt));
      }
      else this.armLossTimer(); // early, or moved by a renewal: wait again
    });
  }

  private lose(error: LockNotHeldError): void {
    this.stop();
    if (!this.controller.signal.aborted) publishLost('group handle', this.documents[0], error);
    if (!this.controller.signal.aborted) this.controller.abort(error);
  }

  private stop(): void {
    this.done = true;
    clearTimeout(this.renewTimer);
    clearTimeout(this.lossTimer);
  }
}
