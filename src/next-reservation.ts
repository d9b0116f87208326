/**
 * The reservation of a waiting `lockNext` call (lock-next.ts claimNext): a call that has found no
 * free matching document for RESERVE_AFTER_MS reserves the first matching document that is HELD
 * (in sort order), exactly as a waiting single-document call reserves the document it waits for
 * (group-reservation.ts: the oldest waiter keeps it, renewed each second, lapses 3 s after the last
 * renewal, cleared in the background when the call ends however it ends).
 *
 * Why: without it, a worker whose matching jobs are also locked by `_id` by waiting groups or
 * single waiters (which reserve them, oldest first) lost every race for them on a replica set:
 * after each release the reserver heard of it as early as the worker and needed as few commands,
 * so the next reserver always took the job first
 * (reliability/single-waiter-beside-waiting-groups). Reserving, the worker takes its turn among
 * them by age: a younger reserver is refused the freed job, and the worker's ordinary path (read,
 * claimFree, load with the filter) takes it. Whatever it takes, it takes by that path, so it never
 * locks a document that stopped matching (PRODUCT.md property 10, 14).
 *
 * What it leaves as it was:
 *  - lockNext still ignores reservations (claimFree): "none" still means no matching document was
 *    free, reserved or not (property 14);
 *  - a reservation is no lock (docs/limits.md "Reservations are no locks"), and it never keeps
 *    others from a document the call would not take: after every read that found none free, the
 *    call asks whether the reserved document still matches (reservedCandidateState); one that no
 *    longer matches (or was deleted), or one the call left out (a find hook hides it, or a caller
 *    transaction writes its record), is released at once and the next held match reserved. A call
 *    that claims a document, or ends, clears it in the background.
 *  - the uncontended path: nothing is sent before a call has waited RESERVE_AFTER_MS; one call per
 *    filter and process reserves (NextQueue.reserver), so a pool of workers sends one check per
 *    read that found none free, and a search for a held match once RESERVE_AFTER_MS has passed,
 *    then at most every SEARCH_EVERY_MS when something suggests a held match (`contended`: a claim
 *    of this call refused because the document was held, or a change event or a release of this
 *    process that woke it), and otherwise every IDLE_SEARCH_MS while it finds none (a holder in
 *    another process without change streams gives no sign: a longer back-off left a worker that
 *    had idled on an empty queue unserved for 9-10 s beside waiting groups of another process,
 *    reliability/worker-idle-before-contested-job-beside-groups). A worker idling on an empty queue
 *    thus sends one search per 2 s (plugin/lock-next-idle-and-uncontended-commands 4: before, one
 *    each second).
 */
import { GroupReservation, RESERVE_AFTER_MS, reservationFailures, type ReservationTarget } from './group-reservation';
import { idKey } from './id-key';
import { newLockToken, type LockStore } from './lock-store';
import type { mongo } from 'mongoose';

type Document = mongo.Document;

/** A call that found no held match searches again at most this often (its safety poll's period). */
const SEARCH_EVERY_MS = 1_000;
/** Without a sign of a held match, a call whose searches find none searches again this often. */
const IDLE_SEARCH_MS = 2_000;

export { RESERVE_AFTER_MS };

export interface NextReservationContext {
  store: LockStore;
  documents: mongo.Collection<Document>;
  match: Document;
  sort: Document | undefined;
}

/** What the call does after a read that found none free. */
export type AfterNone = 'wait' | 'readAgain';

export class NextReservation {
  private readonly reservation = new GroupReservation<ReservationTarget>(newLockToken());
  private target: { key: string; member: ReservationTarget } | undefined;
  /** Server time of the call's first search that found a held match: its place among waiters. */
  private since: Date | undefined;
  private searchedAt = -Infinity;
  /** Whether a sign of a held match came since the last search (contended). */
  private hinted = false;

  constructor(private readonly context: NextReservationContext) {}

  /** The document reserved (or asked for) now, if any; for tests. */
  get documentId(): unknown {
    return this.target?.member.documentId;
  }

  /** Whether the last reserve answered that this call holds the reservation of its document (lock-next.ts polls attentively then). */
  get holding(): boolean {
    return this.target !== undefined && this.reservation.held;
  }

  /** The idKey of the document reserved (or asked for) now, if any (a release of it here wakes the call: next-feed.ts). */
  get key(): string | undefined {
    return this.target?.key;
  }

  /** A sign of a held match (lock-next.ts: a claim refused as held, a change that woke the call): the next read that finds none free searches. */
  contended(): void {
    this.hinted = true;
  }

  /**
   * After a read that found no free matching document. `excluded`: the documents this call will
   * not take now (lock-next.ts `skip`). 'readAgain' when the reserved document is free and
   * matching (it was freed after the read: read again at once); otherwise 'wait'.
   */
  async afterNone(excluded: ReadonlyMap<string, unknown>): Promise<AfterNone> {
    const { store, documents, match, sort } = this.context;
    try {
      if (this.target) {
        if (!excluded.has(this.target.key)) {
          const state = await store.reservedCandidateState(documents, match, this.target.member.documentId);
          if (state === 'held') return 'wait';
          if (state === 'free') return 'readAgain';
        }
        // No longer matching (or deleted), or left out by this call: never kept from others.
        this.drop();
      }
      const now = performance.now();
      const gap = this.hinted ? SEARCH_EVERY_MS : IDLE_SEARCH_MS;
      if (now - this.searchedAt < gap) return 'wait';
      this.searchedAt = now;
      this.hinted = false;
      const found = await store.firstHeldCandidate(documents, match, sort, [...excluded.values()]);
      if (!found) return 'wait';
      this.since ??= found.serverNow;
      const member: ReservationTarget = { documentId: found.id, runtime: { store } };
      this.target = { key: idKey(found.id), member };
      this.reservation.hold(member, this.since);
    } catch {
      // Best effort, as a waiter's reserve is: the call goes on waiting; its next read tries again.
      reservationFailures.count++;
    }
    return 'wait';
  }

  /** Releases the reserved document (in the background); the next read that finds none free searches again. */
  private drop(): void {
    this.reservation.end();
    this.target = undefined;
    // It reserved a held match: another may be held too, search at the next read that finds none free.
    this.searchedAt = -Infinity;
    this.hinted = true;
  }

  /** The call ended (claimed, none, aborted, failed): the reservation is cleared in the background. */
  end(): void {
    this.drop();
  }
}
