/**
 * The one reservation of a waiter: the document it waits for next, and nothing else. While it
 * lives, that document, once free, is taken by this waiter alone (LockStore acquirable): a caller
 * that releases it and asks again at once (barging) is refused, so the waiter is not overtaken on
 * the document it waits for.
 *
 * - Who reserves: a waiting `lockMany` / `lockAll` (lock-group.ts, ordered waiting), only the first
 *   document of its canonical order it lacks; and a single-document waiter (`lock`, `withLock`,
 *   `acquireLock` with `wait`, SingleWaiter below) refused for longer than RESERVE_AFTER_MS, only
 *   the one document it asks for; and a waiting `lockNext` that found no free match for
 *   RESERVE_AFTER_MS, the first held match (next-reservation.ts). `tryLock`, wait-less calls and
 *   resumes never reserve.
 * - The oldest waiter keeps it: each waiter carries `since`, the server time of its call's first
 *   refusal; a reserve takes over a live reservation whose (since, key) is younger than its own
 *   (LockStore.reserve), and is a no-op otherwise. So a document is handed to the waiters that
 *   need it oldest first, whether they wait for one document or a group (issue 17 gap (a): a
 *   polling single waiter was starved by a stream of groups, each reserving it before it polled).
 * - It lapses by itself RESERVATION_MS after its last renewal (server time), so a crashed waiter
 *   blocks nobody for long; it is renewed every RENEW_MS while the waiter waits.
 * - It is cleared when the waiter takes the document, moves on, gives up or ends. Every command
 *   runs in the background, one after the other (a clear never overtakes the reserve it undoes):
 *   a grant or an abort never waits on reservation traffic. A failed command is counted, not
 *   thrown: the reservation then lapses by itself.
 *
 * No new deadlock: a reservation is held only by a waiter on the one document it waits for, so it
 * adds no edge to the wait-for graph that the waiter's waiting did not already make. Whoever a
 * reservation refuses waits for the reserver, and the reserver waits for nothing but that document
 * (a single waiter holds nothing through its call; a group holds only a canonical prefix below it,
 * lock-group.ts): once the document is free the reserver takes it, or its reservation lapses
 * within RESERVATION_MS of its end. Taking over between reservers of one document only reorders
 * who is served first among waiters of that same document. Cycles through code outside the
 * canonical order (a caller holding one document while it waits for another) exist with plain
 * locks already; a group's hold bound ends them as before, and a single waiter's `wait` bounds it.
 */
import type { GroupMember } from './lock-group';
import type { LockStore } from './lock-store';

/** How long a reservation lives after its last renewal (server time). */
export const RESERVATION_MS = 3_000;
/** How often a waiter renews it: three renewals fit in one lease. */
const RENEW_MS = 1_000;
/** A single-document waiter reserves once refused this long: the 250 ms after which a group waits in order (lock-group.ts ORDERED_AFTER_MS). */
export const RESERVE_AFTER_MS = 250;

/** What a reservation is of: a document and the store of its lock collection (a GroupMember is one). */
export interface ReservationTarget {
  documentId: unknown;
  runtime: { store: Pick<LockStore, 'reserve' | 'clearReservation'> };
}

/** Reservation commands that failed (the reservation then lapsed by itself); for tests and diagnostics. */
export const reservationFailures = { count: 0 };

/** A waiter's reservation (groups: one per waiting call, moving along the canonical order). */
export class GroupReservation<T extends ReservationTarget = GroupMember> {
  private chain: Promise<void> = Promise.resolve();
  private current: { member: T; since: Date; timer: NodeJS.Timeout; renewing: boolean; held: boolean } | undefined;
  /** Reserve commands sent so far, and whether one is on its way (they are sent one at a time). */
  private sent = 0;
  private sending = false;

  /**
   * `onHeld`: called when a reserve finds this waiter holding the reservation after it did not (its
   * first reserve, a takeover, or the reservation it lost lapsed or was cleared).
   */
  constructor(
    private readonly key: string,
    private readonly onHeld?: () => void,
  ) {}

  /** The document this waiter asks to reserve now, if any (held by it or kept by an older waiter). */
  get member(): T | undefined {
    return this.current?.member;
  }

  /**
   * Whether the last reserve answered that this waiter holds the reservation (LockStore.reserve);
   * false until the first answer, and once an older waiter keeps it (until a later renewal takes it).
   */
  get held(): boolean {
    return this.current?.held === true;
  }

  /**
   * Reserves `member` (ending the reservation of another document first), and keeps renewing it.
   * `since`: the server time of the waiting call's first refusal (the older waiter keeps a document).
   */
  hold(member: T, since: Date): void {
    if (this.current?.member === member) return;
    this.end();
    const current = { member, since, renewing: false, held: false, timer: setInterval(() => this.renew(), RENEW_MS) };
    current.timer.unref();
    this.current = current;
    this.renew();
  }

  /**
   * Where the reserve traffic stands, for a command that removes this waiter's reservation itself
   * (SingleWaiterReservation: a grant): undefined while a reserve is on its way (it may land after
   * that command and write the reservation again), else how many were sent. A reserve sent later
   * may land after it too: `quietSince` says whether one was.
   */
  mark(): number | undefined {
    return this.sending ? undefined : this.sent;
  }

  /** Whether no reserve was sent since `mark` (and none is on its way). */
  quietSince(mark: number): boolean {
    return !this.sending && this.sent === mark;
  }

  /**
   * Ends the reservation, if any: cleared in the background, unless `cleared` (a command of the
   * waiter removed it, and no reserve was sent since: quietSince).
   */
  end(cleared = false): void {
    const current = this.current;
    if (!current) return;
    clearInterval(current.timer);
    this.current = undefined;
    if (!cleared) this.enqueue(() => current.member.runtime.store.clearReservation(current.member.documentId, this.key));
  }

  /**
   * Sends one reserve (a renewal when already held; a waiter whose reservation an older one keeps
   * asks again at the same interval, to take it when it lapses or is cleared), unless the last one
   * is still on its way.
   */
  private renew(): void {
    const current = this.current;
    if (!current || current.renewing) return;
    current.renewing = true;
    this.enqueue(async () => {
      try {
        if (this.current === current) await this.send(current);
      } finally {
        current.renewing = false;
      }
    });
  }

  /**
   * Writes the reservation again now (a command of this waiter removed it: a grant that arrived
   * too late to count on, SingleWaiterReservation.lateGrant), after any reservation command already
   * queued; resolves once it was answered (or failed: counted, the caller goes on). Nothing when
   * the waiter reserves nothing.
   */
  restore(): Promise<void> {
    const current = this.current;
    if (!current) return Promise.resolve();
    return new Promise((resolve) => {
      this.enqueue(async () => {
        try {
          if (this.current === current) await this.send(current);
        } finally {
          resolve();
        }
      });
    });
  }

  /** One reserve of `current` (LockStore.reserve), sent from the chain. */
  private async send(current: { member: T; since: Date; held: boolean }): Promise<void> {
    this.sent++;
    this.sending = true;
    const held = await current.member.runtime.store.reserve(current.member.documentId, this.key, current.since, RESERVATION_MS).finally(() => {
      this.sending = false;
    });
    const gained = held && !current.held;
    current.held = held;
    if (gained && this.current === current) this.onHeld?.();
  }

  private enqueue(command: () => Promise<void>): void {
    this.chain = this.chain.then(command).catch(() => {
      reservationFailures.count++;
    });
  }
}
