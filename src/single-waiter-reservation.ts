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
  private readonly reservation = new GroupReservation<ReservationTarget>(this.key);

  constructor(private readonly target: ReservationTarget) {}

  /**
   * After a refusal the call waits on: reserves the document once refused for RESERVE_AFTER_MS
   * (renewals are the reservation's own). Whether the call reserves it now (an older waiter may
   * hold the reservation all the same: this call then only asks a little more often).
   */
  refused(waitedMs: number): boolean {
    if (waitedMs >= RESERVE_AFTER_MS && this.since) this.reservation.hold(this.target, this.since);
    return this.reservation.member !== undefined;
  }

  /** The call ended (granted, gave up, aborted, failed): the reservation is cleared in the background. */
  end(): void {
    this.reservation.end();
  }
}
