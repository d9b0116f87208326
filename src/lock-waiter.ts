/**
 * Waiting for a lock instead of failing at once.
 *
 * A waiter retries the acquisition when the lock may have become free:
 *  - when the holder's lock expires (the LockedError carries the remaining time, measured on
 *    the server's clock, so a timer fires at the right moment whatever the local clock says);
 *  - when the lock record changes (released, extended, deleted), learned from a change stream
 *    on the lock collection where the deployment has them (replica sets, sharded clusters).
 *    One stream per lock collection and connection serves every waiter in the process;
 *  - otherwise (standalone servers, or a stream that failed) by polling with jittered
 *    exponential backoff.
 * Each waiter registers for wake-ups BEFORE its acquisition attempt, so a release that lands
 * between a failed attempt and the wait is never missed.
 * A release wakes one waiting waiter of this process (the longest waiting), not all of them:
 * only one can win, and a herd of losing attempts would delay the winner's next commands.
 * Waiters still mid-attempt when a change arrives are all told, so none of them sleeps
 * through it.
 */
import type { mongo } from 'mongoose';
import { LockExpiredOnArrivalError, LockedError } from './errors';
import { idKey } from './id-key';
import { delist, enlist, type LocallyWakeable } from './local-wake';

const POLL_BASE_MS = 20;
const POLL_CAP_MS = 1_000;
/** With a live change stream, still retry this often in case an event was missed. */
const SAFETY_POLL_MS = 5_000;
const STREAM_IDLE_CLOSE_MS = 10_000;
const STREAM_AWAIT_MS = 1_000;
/**
 * Without a stream, the waiter that holds its document's reservation asks again this often,
 * instead of backing off (acquireWaiting): a reserved document freed by another process idles until it asks (250 ms
 * on average; a release made in this process wakes it at once, local-wake.ts; the holder's expiry, when sooner, too), and
 * every waiter holds a reservation when each waits for its own document, so this is also the
 * price of waiting: 2 attempts and 1 renewal per second, against plain backoff's ~1.3 attempts
 * (reliability/contended-waiting-throughput (d); 100 ms cost 11 commands per waiter per second).
 */
const RESERVED_POLL_MS = 500;

interface Subscription {
  /** Resolves when the lock record of this document changed (or the stream failed). */
  changed: Promise<void>;
  /** Call when the attempt failed and the waiter is about to wait: it can now be picked alone. */
  waiting(): void;
  /**
   * Call instead of `waiting` when the waiter holds the document's reservation: it is told of every
   * change, and a release by this process picks no other waiter of the document (local-wake.ts).
   */
  reserving(): void;
  /** Whether the stream was already capturing events when this subscription was made. */
  wasLive: boolean;
  /** Resolves to whether a change stream is delivering events (opening it if needed). */
  live: Promise<boolean>;
  cancel(): void;
}

/** Change-stream fan-out for one lock collection: one stream, many waiters. */
interface Waiter {
  wake(): void;
  waiting: boolean;
  reserver: boolean;
}

export class LockWatch implements LocallyWakeable {
  /** Per document, in subscription order (Sets iterate in insertion order). */
  private readonly subscribers = new Map<string, Set<Waiter>>();
  private count = 0;
  private stream: mongo.ChangeStream | undefined;
  private opening: Promise<boolean> | undefined;
  private idleTimer: NodeJS.Timeout | undefined;
  /** Number of change streams this instance opened (visible to tests and benchmarks). */
  streamsOpened = 0;
  /** The scope this watch is listed under for releases of this process while it has waiters (local-wake.ts). */
  private listedAs: string | undefined;

  /** `scope`: the lock collection's LockStore.scope, read when the first waiter subscribes. */
  constructor(
    private readonly collection: mongo.Collection,
    private readonly canWatch: () => Promise<boolean>,
    private readonly scope?: () => string,
  ) {}

  /** Registers synchronously, so nothing that happens after this call is missed once live. */
  subscribe(documentId: unknown): Subscription {
    const key = idKey(documentId);
    let wake!: () => void;
    const changed = new Promise<void>((resolve) => (wake = resolve));
    const waiter: Waiter = { wake, waiting: false, reserver: false };
    let set = this.subscribers.get(key);
    if (!set) this.subscribers.set(key, (set = new Set()));
    set.add(waiter);
    this.count++;
    if (this.listedAs === undefined && this.scope) enlist((this.listedAs = this.scope()), this);
    clearTimeout(this.idleTimer);
    const wasLive = this.stream !== undefined;
    const live = this.open().catch(() => false);
    return {
      changed,
      wasLive,
      live,
      waiting: () => {
        waiter.waiting = true;
      },
      reserving: () => {
        waiter.reserver = true;
      },
      cancel: () => {
        const current = this.subscribers.get(key);
        if (current?.delete(waiter)) {
          this.count--;
          if (current.size === 0) this.subscribers.delete(key);
        }
        if (this.count === 0) this.idle();
      },
    };
  }

  /** Opens the shared stream once; resolves to whether it is live. */
  private open(): Promise<boolean> {
    if (this.stream) return Promise.resolve(true);
    if (!this.opening) {
      this.opening = (async () => {
        if (!(await this.canWatch())) return false;
        const stream = this.collection.watch([{ $match: { operationType: { $in: ['update', 'replace', 'delete'] } } }], {
          maxAwaitTimeMS: STREAM_AWAIT_MS,
        });
        // The first tryNext sends the aggregate: once it returns, events are being captured.
        await stream.tryNext();
        this.stream = stream;
        this.streamsOpened++;
        void this.pump(stream);
        return true;
      })();
      this.opening.then(
        (live) => {
          if (!live) this.opening = undefined;
        },
        () => {
          this.opening = undefined;
        },
      );
    }
    return this.opening;
  }

  private async pump(stream: mongo.ChangeStream): Promise<void> {
    try {
      while (this.stream === stream) {
        const event = (await stream.next()) as mongo.ChangeStreamDocument & { documentKey?: { _id: unknown } };
        const updated = event.operationType === 'update' ? event.updateDescription?.updatedFields : undefined;
        // An acquisition, or a waiter's reservation written, renewed or taken over: nothing freed. (A
        // reservation's clear removes its fields: it wakes the waiters the reservation refused.)
        if (updated?.token || updated?.reservedUntil) continue;
        // A renewal (extendLock, a group's renewal, a waiting group's step renewed to the ttl) moves
        // only the expiry: the same acquisition still holds the lock, nothing freed. An update
        // event's updateDescription names every field the update changed or removed (the manual's
        // change events, "update Event"; a pipeline update's oplog entry is the diff of the pre- and
        // post-image, PipelineExecutor::applyUpdate -> doc_diff::computeOplogDiff, or else a full
        // replacement, which streams as a `replace` event and wakes as before),
        // so an event naming `expiresAt` alone left owner and token as they were. Waking on it
        // cost every waiter of the document a useless read per renewal, and a lockNext worker its
        // turn (reliability/single-waiter-beside-waiting-groups, once done steps renewed to the ttl).
        // Except a lease that ends sooner than a waiter's safety poll (expiresSoon): a holder that
        // SHORTENS its lease (extendLock with a smaller ttl) is heard, so its waiters are served at
        // the new expiry (regressions/waiter-after-holder-shortens-lease); one that sets a lease of
        // SAFETY_POLL_MS or more is heard at the waiters' next read (their safety poll, within
        // SAFETY_POLL_MS of the event), at most about a second after its expiry.
        const removed = event.operationType === 'update' ? event.updateDescription?.removedFields : undefined;
        if (updated && Object.keys(updated).length === 1 && 'expiresAt' in updated && !removed?.length && !expiresSoon(updated.expiresAt, event)) continue;
        const key = event.documentKey ? idKey(event.documentKey._id) : undefined;
        if (key) this.wake(key);
      }
    } catch {
      // Closed, or the deployment lost the stream: wake everyone so they poll or reopen.
    } finally {
      if (this.stream === stream) {
        this.stream = undefined;
        this.opening = undefined;
      }
      this.wakeAll();
    }
  }

  /**
   * A release by this process (local-wake.ts): without a live stream, the fan-out of a stream event,
   * picking only when told to. With one, only the waiters holding the document's reservation (the
   * freed document is theirs: asking before the event comes hands it over sooner); the others hear
   * the event a moment later, as before. Waking them all twice, on the release and on its event,
   * cost throughput (bench/contention-ab.ts on a replica set, single lock(wait) against the
   * previous main: 78 -> 65 and 73 -> 40 grants/s; the reservers alone: 61 -> 79, and draining 20
   * queued waiters, contended-waiting-throughput (f), 3.1 s -> 1.2 s).
   */
  wakeLocal(key: string, pick: boolean): boolean {
    if (!this.stream) return this.wake(key, pick);
    for (const waiter of this.subscribers.get(key) ?? []) if (waiter.reserver) waiter.wake();
    return false;
  }

  /** Whether a waiter of the document `key` here holds its reservation (local-wake.ts). */
  reserving(key: string): boolean {
    const set = this.subscribers.get(key);
    if (set) for (const waiter of set) if (waiter.reserver) return true;
    return false;
  }

  wakeEveryone(): void {
    if (!this.stream) this.wakeAll();
  }

  /** Wakes the waiters of `key`; resolves to whether one waiting was picked (only when `pick`). */
  private wake(key: string, pick = true): boolean {
    const set = this.subscribers.get(key);
    if (!set) return false;
    // Every subscriber not marked waiting is told (an attempt in flight, or a waiting group, which
    // may not act on this document: lock-group.ts subscribeAll); of those marked waiting, only the
    // longest waiting. Before, a marked waiter took the change alone: a group that reserved the
    // freed document slept until its safety poll while the woken single waiter was refused by the
    // group's reservation (reliability/group-waiting-leaves-others-usable).
    let handed = !pick;
    for (const waiter of [...set]) {
      if (!waiter.waiting) {
        waiter.wake();
        continue;
      }
      if (handed) continue;
      handed = true;
      set.delete(waiter); // woken once; it subscribes again (at the back) if it loses
      if (set.size === 0) this.subscribers.delete(key);
      if (--this.count === 0) this.idle();
      waiter.wake();
    }
    return pick && handed;
  }

  /** No waiter left: the stream closes after a while, and no release of this process looks here. */
  private idle(): void {
    this.scheduleIdleClose();
    if (this.listedAs !== undefined) delist(this.listedAs, this);
    this.listedAs = undefined;
  }

  private wakeAll(): void {
    for (const set of this.subscribers.values()) for (const waiter of set) waiter.wake();
  }

  private scheduleIdleClose(): void {
    clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => void this.close(), STREAM_IDLE_CLOSE_MS);
    this.idleTimer.unref();
  }

  async close(): Promise<void> {
    clearTimeout(this.idleTimer);
    const stream = this.stream;
    this.stream = undefined;
    this.opening = undefined;
    if (stream) await stream.close().catch(() => undefined);
  }
}

/**
 * Whether an update event's new `expiresAt` falls within SAFETY_POLL_MS of the event, by the
 * server's clock: the event's `wallTime` (the server's date of the operation, MongoDB 6.0+) or
 * else its `clusterTime` (the oplog entry's Timestamp, whose high 32 bits are seconds since the
 * epoch: a second early at most, which only widens the window): the manual's change events,
 * "Change Event Fields"; the change-streams unified spec (mongodb/specifications,
 * source/change-streams/tests/unified/change-streams.json, "Test wallTime field is set in a change
 * event", minServerVersion 6.0.0); the Node driver's ChangeStreamDocumentWallTime. Without either,
 * it counts as soon (the waiters read the record, as before).
 */
function expiresSoon(expiresAt: unknown, event: { wallTime?: Date; clusterTime?: { getHighBits(): number } }): boolean {
  if (!(expiresAt instanceof Date)) return true;
  const now = event.wallTime instanceof Date ? event.wallTime.getTime() : event.clusterTime ? event.clusterTime.getHighBits() * 1_000 : undefined;
  return now === undefined || expiresAt.getTime() - now < SAFETY_POLL_MS;
}

/** A signal that never aborts, for pauses of calls without one. */
const NEVER = new AbortController().signal;

/** Jittered exponential backoff for round `round`: between half and all of 20 ms doubling, capped at 1 s. */
function backoff(round: number): number {
  return Math.min(POLL_CAP_MS, POLL_BASE_MS * 2 ** round) * (0.5 + Math.random() / 2);
}

/** Resolves after `ms`, or as soon as `signal` aborts; never rejects. */
function pause(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, Math.max(0, ms));
    signal.addEventListener('abort', done, { once: true });
  });
}

/**
 * Whether an AbortSignal's reason is a timeout: `AbortSignal.timeout(ms)` aborts with a
 * DOMException named TimeoutError (WHATWG DOM, "AbortSignal.timeout"); any reason so named counts.
 */
function isTimeout(reason: unknown): boolean {
  return typeof reason === 'object' && reason !== null && (reason as { name?: unknown }).name === 'TimeoutError';
}

/**
 * Aborted, and not by a timeout: the caller called the call off. Every waiting lock call
 * (lock, lockMany, lockNext) applies the same rule: a timeout ends the wait as `wait` running out
 * does; an explicit abort rejects with the signal's reason (abortedWith).
 */
export function calledOff(signal: AbortSignal | undefined): boolean {
  return signal !== undefined && signal.aborted && !isTimeout(signal.reason);
}

/**
 * The reasons lock calls ended by an explicit abort rejected with, and each call's document (or
 * undefined: lockNext names none), for lockErrorHandler, which answers those, and only those,
 * 499. Objects only; weakly held.
 */
const abortedLockCalls = new WeakMap<object, unknown>();

/** The document of the lock call that rejected with `error` because its signal was aborted, if it is one. */
export function abortedLockCall(error: unknown): { documentId: unknown } | undefined {
  return typeof error === 'object' && error !== null && abortedLockCalls.has(error) ? { documentId: abortedLockCalls.get(error) } : undefined;
}

/** The signal's reason, to reject a lock call with, remembered as such (abortedLockCall). */
export function abortedWith(documentId: unknown, signal: AbortSignal): unknown {
  const reason: unknown = signal.reason;
  if (typeof reason === 'object' && reason !== null) abortedLockCalls.set(reason, documentId);
  return reason;
}

/**
 * Acquires, waiting up to `waitMs` for the lock to become free. One behaviour for a wait that ran
 * out, whichever way it was bounded: when `waitMs` passes, or `signal` aborts with a timeout
 * (AbortSignal.timeout), it rejects with LockedError (the lock is still someone else's: its
 * expiry, retryAfterMs and label, how long it waited, and the signal's reason as `cause`). Like
 * `wait: 0`, a timeout never prevents the first attempt, and the attempt the deadline falls on
 * is made. An explicit abort (`controller.abort()`, any reason that is not a TimeoutError)
 * rejects with the signal's reason, as fetch does, at once (before anything is sent when the
 * signal was already aborted). An attempt in flight is not interrupted: a lock it got is returned.
 * An attempt whose grants all arrived too late to count on (LockExpiredOnArrivalError) is tried
 * again after a backoff while the wait lasts: the lock was free, the database was slow.
 * `reserver` (single-waiter-reservation.ts): told of each refusal the call waits on, so it reserves
 * the document once refused long enough; ended when the call ends, however it ends.
 */
export async function acquireWaiting<T>(
  documentId: unknown,
  attempt: () => Promise<T>,
  watch: LockWatch,
  waitMs: number,
  signal: AbortSignal | undefined,
  reserver?: { refused(waitedMs: number, wake: () => void): boolean; end(): void },
): Promise<T> {
  try {
    return await waitFor(documentId, attempt, watch, waitMs, signal, reserver);
  } finally {
    reserver?.end();
  }
}

async function waitFor<T>(
  documentId: unknown,
  attempt: () => Promise<T>,
  watch: LockWatch,
  waitMs: number,
  signal: AbortSignal | undefined,
  reserver: { refused(waitedMs: number, wake: () => void): boolean } | undefined,
): Promise<T> {
  const started = performance.now();
  for (let round = 0; ; round++) {
    if (calledOff(signal)) throw abortedWith(documentId, signal!);
    // Subscribe before the attempt (no lost wake-up); the stream opens alongside the attempt.
    const subscription = watch.subscribe(documentId);
    try {
      try {
        return await attempt();
      } catch (error) {
        if (error instanceof LockExpiredOnArrivalError && performance.now() - started < waitMs && !signal?.aborted) {
          // The database answered too slowly to count on its grants: back off as polling does
          // before asking again, never at once (a tight loop would load the slow database further
          // and hold the lock for moments nobody can use). The loop's top hears an abort meanwhile.
          await pause(Math.min(waitMs - (performance.now() - started), backoff(round)), signal ?? NEVER);
          if (!signal?.aborted) continue;
        }
        if (!(error instanceof LockedError)) throw error;
        const live = await subscription.live;
        if (calledOff(signal)) throw abortedWith(documentId, signal!);
        // The stream only started capturing during this attempt: a release may have slipped
        // through before it did, so try once more before waiting.
        if (live && !subscription.wasLive && !signal?.aborted) continue;
        const waited = performance.now() - started;
        const left = waitMs - waited;
        if (left <= 0 || signal?.aborted) {
          const cause: unknown = signal?.aborted ? signal.reason : undefined;
          throw new LockedError(documentId, error.expiresAt, ` Waited ${Math.round(waited)} ms for it.`, error.retryAfterMs, error.label, cause);
        }
        // The waiter that HOLDS the document's reservation is told of every change of it, as a
        // waiting group is (LockWatch.wake), not only when it is the one waiter picked: once free,
        // the document is its alone, so a release handed to another waiter of this process would
        // leave it idle until that waiter's next poll. Without a stream it polls every
        // RESERVED_POLL_MS, for the same reason: one waiter per reserved document. A waiter whose
        // reservation an older one keeps waits as any waiter does (its renewals ask again), so the
        // load stays that of plain waiting plus one reserve per second. When it comes to hold the
        // reservation (its first reserve, RESERVE_AFTER_MS after the first refusal, or a takeover)
        // it is woken to ask again as the holder (single-waiter-reservation.ts).
        // Refused by a reservation (no holder, LockStore.acquire): someone else's, whatever this
        // call's last reserve answered (an older waiter took it over since: its takeover wakes nobody,
        // LockWatch ignores reservation writes, and this call's next renewal learns it).
        const byReservation = error.expiresAt === undefined;
        const stopPause = new AbortController();
        const reserving = reserver?.refused(waited, () => stopPause.abort()) === true && !byReservation;
        if (reserving) subscription.reserving();
        else subscription.waiting();
        const untilExpiry = error.retryAfterMs === undefined ? Infinity : error.retryAfterMs + 1;
        const backoffPoll = Math.random() * Math.min(POLL_CAP_MS, POLL_BASE_MS * 2 ** round);
        let poll = live ? SAFETY_POLL_MS : backoffPoll;
        if (reserving && !live) poll = RESERVED_POLL_MS;
        const onAbort = () => stopPause.abort();
        signal?.addEventListener('abort', onAbort, { once: true });
        try {
          await Promise.race([subscription.changed, pause(Math.min(left, untilExpiry, poll), stopPause.signal)]);
        } finally {
          signal?.removeEventListener('abort', onAbort);
          stopPause.abort(); // clears the timer when the change event won the race
        }
        // An explicit abort ends the call at the top of the loop; a timeout gets its last attempt.
      }
    } finally {
      subscription.cancel();
    }
  }
}
