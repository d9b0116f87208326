/**
 * A lock held for the length of a piece of work: renewed before it expires while the work
 * runs, an AbortSignal that fires the moment the lock is lost, and release at the end,
 * including through `await using` (Symbol.asyncDispose).
 */
import { LockExpiredError, LockNotHeldError } from './errors';
import { publishLost } from './diagnostics';
import { typedErrors } from './failures';
import { leaseLeft, lostError, type HeldLockState } from './held-lock';
import type { LockStore } from './lock-store';
import { validateTtl } from './options';

/**
 * Node 18.18+/20.4+ define Symbol.asyncDispose; some sandboxes (Jest 29's module registry) do
 * not. Falling back to the registry symbol that polyfills use keeps the method reachable.
 */
export const asyncDispose: typeof Symbol.asyncDispose = Symbol.asyncDispose ?? (Symbol.for('Symbol.asyncDispose') as typeof Symbol.asyncDispose);

/**
 * Renew when this fraction of the ttl is left on the lease (timed conservatively, from when the
 * last granting request was sent: lease.ts), so two attempts fit before expiry.
 */
const RENEW_AT_FRACTION = 1 / 3;

/**
 * Node's largest timer delay (2^31 - 1 ms, about 24.8 days): a longer delay is replaced by 1 ms
 * (with a TimeoutOverflowWarning), which would turn a 40-day lock's renewal into a busy loop.
 */
const MAX_TIMER_MS = 2 ** 31 - 1;

/**
 * A timer for `ms` that never exceeds Node's limit (a longer wait is a chain of shorter ones,
 * see `fire`) and does not keep the process alive: a handle nobody released must not stop the
 * process from exiting (the lock expires by its ttl anyway).
 */
function backgroundTimer(ms: number, fire: () => void): NodeJS.Timeout {
  const timer = setTimeout(fire, Math.min(Math.max(0, ms), MAX_TIMER_MS));
  timer.unref();
  return timer;
}

export class LockHandle<TDoc> implements AsyncDisposable {
  private readonly controller = new AbortController();
  private renewTimer: NodeJS.Timeout | undefined;
  private lossTimer: NodeJS.Timeout | undefined;
  private done = false;

  constructor(
    /** The locked document, loaded after the lock was taken. */
    readonly document: TDoc,
    private readonly state: HeldLockState,
    private readonly store: LockStore,
    private readonly release_: () => Promise<void>,
    autoExtend: boolean,
  ) {
    if (autoExtend) this.schedule();
    else this.armLossTimer();
  }

  /**
   * Aborts as soon as the lock is known to be lost (its reason is the LockNotHeldError), and when
   * its lease runs out (lease.ts). A timer delivers the latter, so a blocked event loop delays it;
   * reading `signal` (or `msLeft()`) checks the lease at that moment.
   */
  get signal(): AbortSignal {
    if (!this.done && leaseLeft(this.state) <= 0) this.lose(new LockExpiredError(this.state.lock.documentId, this.state.lock.expiresAt));
    return this.controller.signal;
  }

  /** This acquisition's fencing token. */
  get fence(): number {
    return this.state.lock.fence;
  }

  /** Current expiry (server time), moved forward by every renewal. See `msLeft()` for how long this process can count on it. */
  get expiresAt(): Date {
    return this.state.lock.expiresAt;
  }

  /**
   * Milliseconds this process can still count on holding the lock (timed from when the last
   * granting request was sent, less a drift allowance: never longer than the server grants it);
   * 0 once it may have expired or was lost. `signal` aborts when it reaches 0.
   */
  msLeft(): number {
    return this.state.lock.msLeft();
  }

  /**
   * Renews now, to `ttl` milliseconds (default: the acquisition's ttl) from the server's now.
   * Throws InvalidLockOptionError for a ttl that is not a whole number from 1 to MAX_TTL_MS,
   * before anything is sent; LockNotHeldError (and aborts `signal`) if the lock was lost.
   */
  async extend(ttl?: number): Promise<void> {
    const duration = ttl === undefined ? this.state.lock.ttl : validateTtl(ttl);
    if (this.state.lost !== undefined) throw lostError(this.state);
    try {
      // A reply that comes too late aborts the signal at once, before the lock is given back.
      const extension = typedErrors('extendLock', () => this.store.extend(this.state, duration, (error) => this.lose(error)));
      // Sending may have shortened the lease (a shorter ttl): the loss timer follows it.
      if (!this.done) this.armLossTimer();
      await extension;
    } catch (error) {
      if (error instanceof LockNotHeldError) this.lose(error);
      throw error;
    }
    if (this.state.lost !== undefined) {
      // The lease ran out (and the signal aborted) while the extension was on its way: the holder
      // was told to stop, so the lock it extended is given back rather than revived.
      await this.store.release(this.state).catch(() => undefined);
      throw lostError(this.state);
    }
  }

  /** Stops renewing and releases the lock. Throws LockNotHeldError if it was already lost. */
  async release(): Promise<void> {
    this.stop();
    await this.release_();
  }

  /** Releases unless already released or lost; never throws for a lost lock. */
  async [asyncDispose](): Promise<void> {
    this.stop();
    if (this.state.lost !== undefined) return;
    await this.release_().catch((error: unknown) => {
      if (!(error instanceof LockNotHeldError)) throw error;
    });
  }

  /** Time left on the conservative lease (lease.ts), not on the server's expiry. */
  private msUntilExpiry(): number {
    return leaseLeft(this.state);
  }

  private schedule(): void {
    if (this.done) return;
    const left = this.msUntilExpiry();
    const renewIn = Math.max(0, left - this.state.lock.ttl * RENEW_AT_FRACTION);
    // A renewal further away than the timer limit: wait the limit, then schedule again.
    this.renewTimer = backgroundTimer(renewIn, () => void (renewIn > MAX_TIMER_MS ? this.schedule() : this.renew()));
    this.armLossTimer();
  }

  private async renew(): Promise<void> {
    if (this.done) return;
    try {
      await this.extend();
    } catch (error) {
      if (error instanceof LockNotHeldError) return; // lose() already ran
      // A transient failure (network, failover): try again soon; the loss timer still guards expiry.
      this.renewTimer = backgroundTimer(Math.max(1, Math.min(this.msUntilExpiry() / 2, 1_000)), () => void this.renew());
      return;
    }
    this.schedule();
  }

  /** Fires when the lease runs out, unless a renewal moved it. */
  private armLossTimer(): void {
    clearTimeout(this.lossTimer);
    this.lossTimer = backgroundTimer(Math.max(0, this.msUntilExpiry()) + 1, () => {
      if (this.done) return;
      if (this.msUntilExpiry() <= 0) this.lose(new LockExpiredError(this.state.lock.documentId, this.state.lock.expiresAt));
      else this.armLossTimer(); // early (a renewal moved the expiry, or the delay was capped): wait again
    });
  }

  private lose(error: LockNotHeldError): void {
    if (this.state.lost === undefined) this.state.lost = error.reason;
    if (!this.controller.signal.aborted) publishLost('handle', this.document, error);
    this.stop();
    if (!this.controller.signal.aborted) this.controller.abort(error);
  }

  private stop(): void {
    this.done = true;
    clearTimeout(this.renewTimer);
    clearTimeout(this.lossTimer);
  }
}
