/**
 * The reservation of one waiting single-document call (`lock`, `withLock`, `acquireLock` with
 * `wait`; issue 17 gap (a)): refused for longer than RESERVE_AFTER_MS, the call reserves the one
 * document it waits for, as a waiting group reserves the document it waits for next
 * (group-reservation.ts: the oldest waiter keeps a document, renewed each second, lapses 3 s after
 * its last renewal, cleared in the background when the call ends however it ends). Every attempt
 * of the call carries its key, so its own reservation lets it in (LockStore.acquire), and records
 * the server time of the call's first refusal (`since`). Without it, a polling waiter (no change
 * streams) beside a stream of waiting groups found the document held or reserved by the next group
 * at every poll, for its whole `wait`.
 */
import { GroupReservation, RESERVE_AFTER_MS, type ReservationTarget } from './group-reservation';
import { newLockToken, type ReservingWaiter } from './lock-store';

export class SingleWaiterReservation implements ReservingWaiter {
  readonly key = newLockToken();
  since: Date | undefined;
  private readonly reservation = new GroupReservation<ReservationTarget>(this.key, () => this.wake?.());
  private timer: NodeJS.Timeout | undefined;
  private ended = false;
  /** Told when this call comes to hold the reservation, so it stops sleeping as an ordinary waiter. */
  private wake: (() => void) | undefined;
  /** The mark of the last grant, when its command removed this call's reservation (clearingMark). */
  private grantMark: number | undefined;

  constructor(private readonly target: ReservationTarget) {}

  /**
   * After a refusal the call waits on: reserves the document once refused for RESERVE_AFTER_MS, on
   * a timer if the call is asleep by then (with a change stream it is not asked again until the
   * record changes: behind a holder that keeps its lock it would never reserve); renewals are the
   * reservation's own. `wake` is called when the call comes to hold the reservation. Whether the
   * call holds it now (an older waiter may keep it: this call then waits as any waiter does).
   */
  refused(waitedMs: number, wake: () => void): boolean {
    this.wake = wake;
    if (this.since && !this.reservation.member && !this.timer) {
      const hold = () => {
        if (!this.ended && this.since) this.reservation.hold(this.target, this.since);
      };
      if (waitedMs >= RESERVE_AFTER_MS) hold();
      else {
        this.timer = setTimeout(hold, RESERVE_AFTER_MS - waitedMs);
        this.timer.unref();
      }
    }
    return this.reservation.held;
  }

  /**
   * An attempt is sent: once the call has sent a reserve and none is on its way, the attempt's grant
   * is to remove the call's reservation itself (LockStore.acquire). Before its first reserve the
   * call has none: its attempts are sent as before.
   */
  clearingMark(): number | undefined {
    const mark = this.reservation.mark();
    return mark === undefined || mark === 0 ? undefined : mark;
  }

  granted(mark: number | undefined): void {
    this.grantMark = mark;
  }

  /**
   * The last grant arrived too late to count on and is about to be released (plugin.ts takeLease):
   * when that grant removed this call's reservation, it is written again first, awaited, so the
   * release never leaves the document free and unreserved for a younger waiter woken by it (the
   * oldest waiter's place is kept, as before grants removed reservations). The call's end then
   * clears it as any reservation (the grant's removal no longer counts).
   */
  async lateGrant(): Promise<void> {
    if (this.grantMark === undefined || this.ended) return;
    this.grantMark = undefined;
    await this.reservation.restore();
  }

  /**
   * The call ended (granted, gave up, aborted, failed): the reservation is cleared in the background,
   * unless the last grant removed it and no reserve was sent since (one that was may land after the
   * grant and write it again: then the clear is sent, as for a call that ends without a grant).
   */
  end(): void {
    this.ended = true;
    clearTimeout(this.timer);
    this.wake = undefined;
    this.reservation.end(this.grantMark !== undefined && this.reservation.quietSince(this.grantMark));
  }
}
