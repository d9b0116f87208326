/**
 * A lock held for the length of a piece of work: renewed before it expires while the work
 * runs, an AbortSignal that fires the moment the lock is lost, and release at the end,
 * including through `await using` (Symbol.asyncDispose).
 */
import { LockExpiredError, LockNotHeldError } from './errors';
import { publishLost } from './diagnostics';
import { typedErrors } from './failures';
import { extensionsInFlight, leaseLeft, leaseReleased, lostError, onLeaseChange, type HeldLockState } from './held-lock';
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

/**
 * A held lock and its document, from `Model.acquireLock`: renewed in the background while held
 * (`autoExtend`, default true), with a `signal` that aborts when the lock is lost, and released by
 * `release()` or at the end of an `await using` block.
 *
 * @example
 * ```ts
 * await using handle = await Item.acquireLock(id, 'report-job', { ttl: 60_000 });
 * await longReport(handle.document, { signal: handle.signal });
 * // released here, even when longReport throws
 * ```
 */
export class LockHandle<TDoc> implements AsyncDisposable {
  private readonly controller = new AbortController();
  private renewTimer: NodeJS.Timeout | undefined;
  private lossTimer: NodeJS.Timeout | undefined;
  private done = false;
  /** A renewal of this handle is on its way: its answer schedules the next one. */
  private renewing = false;
  private readonly unsubscribe: () => void;

  constructor(
    /** The locked document, loaded after the lock was taken. */
    readonly document: TDoc,
    private readonly state: HeldLockState,
    private readonly store: LockStore,
    private readonly release_: () => Promise<void>,
    private readonly autoExtend: boolean,
  ) {
    // The lease is shared with every instance of this acquisition (its document, a resume of it):
    // whoever extends, resumes or releases it, the timers follow the latest known lease.
    this.unsubscribe = onLeaseChange(state, () => this.rearm());
    this.rearm();
  }

  /**
   * Aborts as soon as the lock is known to be lost (its reason is the LockNotHeldError), when the
   * holder released it (through this handle's document, too), and when its lease runs out
   * (lease.ts). A timer delivers the latter, so a blocked event loop delays it; reading `signal`
   * (or `msLeft()`) checks the lease at that moment.
   */
  get signal(): AbortSignal {
    this.check();
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
   * Renews now, to `ttl` milliseconds (default: the acquisition's ttl) from the server's now; the
   * next auto-renewal is scheduled from the new lease.
   * Throws InvalidLockOptionError for a ttl that is not a whole number from MIN_TTL_MS to MAX_TTL_MS,
   * before anything is sent; LockNotHeldError (and aborts `signal`) if the lock was lost.
   */
  async extend(ttl?: number): Promise<void> {
    const duration = ttl === undefined ? this.state.lock.ttl : validateTtl(ttl);
    if (this.state.lost !== undefined) throw lostError(this.state);
    try {
      // A reply that comes too late aborts the signal at once, before the lock is given back.
      // Sending and answering both re-arm the timers (the lease-change listener).
      await typedErrors('extendLock', () => this.store.extend(this.state, duration, (error) => this.lose(error)));
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
    await typedErrors('unlock', () => this.release_());
  }

  /** Releases unless already released or lost; never throws for a lost lock. */
  async [asyncDispose](): Promise<void> {
    this.stop();
    if (this.state.lost !== undefined || leaseReleased(this.state)) return;
    await this.release_().catch((error: unknown) => {
      if (!(error instanceof LockNotHeldError)) throw error;
    });
  }

  /** Time left on the conservative lease (lease.ts), not on the server's expiry. */
  private msUntilExpiry(): number {
    return leaseLeft(this.state);
  }

  /** Aborts the signal if the lock is known gone or its lease ran out; says whether it still counts. */
  private check(): boolean {
    if (this.done) return false;
    const { documentId, expiresAt } = this.state.lock;
    // A release in the caller's transaction (pendingRelease) stands only if it commits: not yet a loss.
    const known = this.state.pendingRelease === undefined ? this.state.lost : undefined;
    // The holder released it itself (through its document or another instance): the signal
    // aborts, but nothing was lost while held, so the `lost` channel hears nothing.
    if (leaseReleased(this.state)) this.lose(new LockNotHeldError(documentId, 'released'), false);
    else if (known === 'released') this.lose(new LockNotHeldError(documentId, 'released'));
    else if (known !== undefined) this.lose(lostError(this.state));
    else if (this.msUntilExpiry() <= 0) this.lose(new LockExpiredError(documentId, expiresAt));
    return !this.done;
  }

  /** After any change of the lease: the loss timer and the next renewal follow the latest lease. */
  private rearm(): void {
    if (!this.check()) return;
    this.armLossTimer();
    if (this.autoExtend && !this.renewing) this.scheduleRenewal();
  }

  /**
   * Renews when a third of the ttl is left on the lease; not while an extension or resume of the
   * acquisition is on its way (its answer re-arms this), so a renewal never races another
   * extension of the same lock (held-lock.ts, finishExtension).
   */
  private scheduleRenewal(): void {
    clearTimeout(this.renewTimer);
    this.renewTimer = undefined;
    if (extensionsInFlight(this.state) > 0) return;
    const renewIn = Math.max(0, this.msUntilExpiry() - this.state.lock.ttl * RENEW_AT_FRACTION);
    // A renewal further away than the timer limit: wait the limit, then schedule again.
    this.renewTimer = backgroundTimer(renewIn, () => void (renewIn > MAX_TIMER_MS ? this.scheduleRenewal() : this.renew()));
  }

  private async renew(): Promise<void> {
    if (this.done || this.renewing || extensionsInFlight(this.state) > 0) return;
    this.renewing = true;
    try {
      await this.extend();
    } catch (error) {
      this.renewing = false;
      if (error instanceof LockNotHeldError) return; // lose() already ran
      // A transient failure (network, failover): try again soon; the loss timer still guards expiry.
      clearTimeout(this.renewTimer);
      this.renewTimer = backgroundTimer(Math.max(1, Math.min(this.msUntilExpiry() / 2, 1_000)), () => void this.renew());
      return;
    }
    this.renewing = false;
    this.rearm();
  }

  /** Fires when the lease runs out, unless a renewal moved it. */
  private armLossTimer(): void {
    clearTimeout(this.lossTimer);
    this.lossTimer = backgroundTimer(Math.max(0, this.msUntilExpiry()) + 1, () => {
      if (this.check()) this.armLossTimer(); // early (a renewal moved the expiry, or the delay was capped): wait again
    });
  }

  /** The lock is gone: stop, abort the signal; `lost` is published unless the holder released it (`publish` false). */
  private lose(error: LockNotHeldError, publish = true): void {
    if (this.state.lost === undefined) this.state.lost = error.reason;
    if (publish && !this.controller.signal.aborted) publishLost('handle', this.document, error);
    this.stop();
    if (!this.controller.signal.aborted) this.controller.abort(error);
  }

  private stop(): void {
    this.done = true;
    this.unsubscribe();
    clearTimeout(this.renewTimer);
    clearTimeout(this.lossTimer);
  }
}
