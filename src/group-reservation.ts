/**
 * The one reservation of a waiting group (lock-group.ts, ordered waiting): the document the group
 * waits for next, and nothing else. While it lives, that document, once free, is taken by this
 * group alone (LockStore acquirable): a caller that releases it and asks again at once (barging)
 * is refused, so the group is not overtaken on the document it waits for.
 *
 * - Only a waiting `lockMany` / `lockAll` reserves, and only the first document of its canonical
 *   order it lacks. Single-document waiters never reserve (ordinary unfair locks).
 * - The first reserver keeps it: a later group's reserve is a no-op while it lives (LockStore.reserve).
 * - It lapses by itself RESERVATION_MS after its last renewal (server time), so a crashed waiter
 *   blocks nobody for long; it is renewed every RENEW_MS while the group waits.
 * - It is cleared when the group takes the document, moves on, gives up or ends. Every command
 *   runs in the background, one after the other (a clear never overtakes the reserve it undoes):
 *   a grant or an abort never waits on reservation traffic. A failed command is counted, not
 *   thrown: the reservation then lapses by itself.
 */
import type { GroupMember } from './lock-group';

/** How long a reservation lives after its last renewal (server time). */
export const RESERVATION_MS = 3_000;
/** How often a waiting group renews it: three renewals fit in one lease. */
const RENEW_MS = 1_000;

/** Reservation commands that failed (the reservation then lapsed by itself); for tests and diagnostics. */
export const reservationFailures = { count: 0 };

export class GroupReservation {
  private chain: Promise<void> = Promise.resolve();
  private current: { member: GroupMember; timer: NodeJS.Timeout; renewing: boolean } | undefined;

  constructor(private readonly key: string) {}

  /** The document reserved now, if any. */
  get member(): GroupMember | undefined {
    return this.current?.member;
  }

  /** Reserves `member` (ending the reservation of another document first), and keeps renewing it. */
  hold(member: GroupMember): void {
    if (this.current?.member === member) return;
    this.end();
    const current = { member, renewing: false, timer: setInterval(() => this.renew(), RENEW_MS) };
    current.timer.unref();
    this.current = current;
    this.renew();
  }

  /** Ends the reservation, if any (in the background). */
  end(): void {
    const current = this.current;
    if (!current) return;
    clearInterval(current.timer);
    this.current = undefined;
    this.enqueue(() => current.member.runtime.store.clearReservation(current.member.documentId, this.key));
  }

  /** Sends one reserve (a renewal when already held), unless the last one is still on its way. */
  private renew(): void {
    const current = this.current;
    if (!current || current.renewing) return;
    current.renewing = true;
    this.enqueue(async () => {
      try {
        if (this.current === current) await current.member.runtime.store.reserve(current.member.documentId, this.key, RESERVATION_MS);
      } finally {
        current.renewing = false;
      }
    });
  }

  private enqueue(command: () => Promise<void>): void {
    this.chain = this.chain.then(command).catch(() => {
      reservationFailures.count++;
    });
  }
}
