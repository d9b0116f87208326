/**
 * Claiming the next free document: `Model.lockNext(filter, owner, { sort, ttl, label, wait, signal })`.
 *
 * One claim is three commands: a candidate read (LockStore.freeCandidates: the free matching
 * documents' `_id`s, in sort order), an acquisition (LockStore.claimFree: Model.lock's own
 * conditional findAndModify, granted only if nobody holds the lock) and the load of the document
 * with the filter AND its `_id` (Model.findOne, from the primary), after the lock was taken.
 *  - Exclusivity is the acquisition's, exactly Model.lock's: the read only proposes.
 *  - A document that stopped matching between the read and the lock (or was deleted) loads as
 *    null: its lock is released by token and the call goes on with another candidate. A later read
 *    may propose it again (it may match again: a job re-queued), but a document this call found
 *    not matching MISS_LIMIT times is one the read and the load disagree on (a `find` hook hides
 *    it): the call's next reads exclude it with `$nin`, so the call always ends. Before answering
 *    null the call reads once more without those exclusions (model finding F4: such a document may
 *    match again) and re-admits one found free and matching, up to REVISIT_LIMIT times.
 *  - A candidate whose lock record an open caller transaction of this process writes is passed
 *    over while that transaction is open (excluded the same way): taking it would wait for the
 *    transaction (R17), and the read, outside it, keeps proposing it.
 *  - The call resolves null only after a candidate read that started during the call found no
 *    free matching document (never because candidates were taken by others meanwhile). On
 *    replica sets that read is one snapshot (readConcern "snapshot"), so at that instant no
 *    matching document was free; elsewhere see docs/mongodb-compatibility.md R34.
 *
 * A waiting call that found none free for RESERVE_AFTER_MS reserves the first held match, so
 * waiters that reserve (groups, single waiters) do not take it first at every release: see
 * next-reservation.ts. It still takes documents only by the path above.
 *
 * Concurrent calls share candidates and spread over them: see next-queue.ts. Under contention
 * "first in sort order" means "one of the first free candidates".
 *
 * Leases are conservative: a grant is timed from when its acquisition was SENT, less the drift
 * allowance (leaseLeft); one that is over when its reply arrives, or once the document is loaded,
 * is released and another candidate tried (LATE_LIMIT times in a row, then LockExpiredError).
 */
import type { mongo } from 'mongoose';
import { LockExpiredOnArrivalError } from './errors';
import { abortedWith, calledOff } from './lock-waiter';
import { attachHeldLock, leaseLeft, newHeldLockState, type HeldLockFields, type HeldLockState } from './held-lock';
import { MIN_LEASE_MS, monotonicNow } from './lease';
import type { LockStore } from './lock-store';
import type { LockNextSort } from './next-arguments';
import type { NextFeed } from './next-feed';
import { nextStats, queueFor, type Candidate } from './next-queue';
import { NextReservation, RESERVE_AFTER_MS } from './next-reservation';
import type { ResolvedCallOptions } from './arguments';
import type { AnyModel } from './runtime';
import { issueTicket } from './ticket';

type Document = mongo.Document;

/** Times one call may find a document not matching after locking it before it excludes it. */
const MISS_LIMIT = 2;
/**
 * Times one call re-admits a document it left out (MISS_LIMIT) when a read that does not leave it
 * out finds it matching and free again before the call would answer null (model finding F4). Each
 * re-admission ends at the next miss; past the limit, the read and the load disagree for good (a
 * `find` hook hides it) and the document stays out.
 */
const REVISIT_LIMIT = 2;
/** Grants that arrived too late to count on, in a row, before the call gives up. */
const LATE_LIMIT = 3;
/** With live change streams, read again this often anyway (a crashed holder's lock expires silently). */
const SAFETY_POLL_MS = 1_000;
const POLL_BASE_MS = 20;
const POLL_CAP_MS = 1_000;
/**
 * Without live streams, the call that holds a reservation reads again this often instead of
 * backing off: the freed job is its alone meanwhile (lock-waiter.ts RESERVED_POLL_MS, the single
 * waiter's; one reserving call per filter and process, so cheap).
 */
const RESERVED_POLL_MS = 500;
/** Longest wait for another call's attempt to end before reading again. */
const SETTLE_WAIT_MS = 1_000;
/** Snapshot reads that found the catalog newer than the snapshot are retried this often. */
const SNAPSHOT_RETRIES = 5;
/** SnapshotUnavailable (246), SnapshotTooOld (239): the snapshot could not serve this read yet. */
const SNAPSHOT_ERRORS: ReadonlySet<unknown> = new Set([239, 246]);

export interface NextContext {
  model: AnyModel;
  store: LockStore;
  /** The model's collection (driver interface). */
  documents: mongo.Collection<Document>;
  /** The caller's filter, as given (the load casts it again, as Model.findOne does). */
  filter: Document;
  /** The filter cast by Mongoose (next-arguments.ts castNextFilter). */
  match: Document;
  sort: LockNextSort | undefined;
  owner: string;
  ownerKey: string;
  call: ResolvedCallOptions;
  /** Whether candidate reads use readConcern "snapshot" (replica sets). */
  snapshot: boolean;
  /** Wake-ups for waiting calls. */
  feed: NextFeed;
}

export interface Claimed {
  doc: object;
  state: HeldLockState;
}

type Outcome =
  | { kind: 'claimed'; claimed: Claimed }
  | { kind: 'held' }
  | { kind: 'notMatching' }
  | { kind: 'inCallerTransaction' }
  | { kind: 'late'; expiresAt: Date; elapsedMs: number };

/**
 * The document as it is now, if it still matches: the filter AND the `_id`, after the lock was
 * taken, from the primary, as `Model.find(filter)` reads it (Mongoose casts the filter the same
 * way and runs the model's `find` middleware, as lockMany's load does). Never in the caller's
 * transaction (`session(null)` keeps Mongoose's transactionAsyncLocalStorage from joining it): a
 * transaction reads its own older snapshot, and the lock was taken on the latest data.
 */
async function load(context: NextContext, documentId: unknown): Promise<object | null> {
  const found = (await context.model
    .find({ $and: [context.filter, { _id: documentId }] })
    .read('primary')
    .session(null)
    .limit(1)) as object[];
  return found[0] ?? null;
}

async function attempt(context: NextContext, candidate: Candidate): Promise<Outcome> {
  const { store, call } = context;
  if (store.writtenByCallerTransaction(candidate.id)) return { kind: 'inCallerTransaction' };
  nextStats.attempts++;
  const grant = await store.claimFree(candidate.id, context.ownerKey, call.ttl, call.label);
  if (!grant) {
    nextStats.collisions++;
    return { kind: 'held' };
  }
  const documentId = candidate.id;
  const late = () => {
    nextStats.late++;
    return { kind: 'late' as const, expiresAt: grant.expiresAt, elapsedMs: monotonicNow() - grant.sentAt };
  };
  const held: HeldLockFields = {
    documentId,
    owner: context.owner,
    token: grant.token,
    fence: grant.fence,
    acquiredAt: grant.acquiredAt,
    expiresAt: grant.expiresAt,
    ttl: call.ttl,
    ticket: () => issueTicket(documentId, grant.token, grant.fence),
    label: grant.label,
  };
  const state = newHeldLockState(held, grant, store.scope);
  const giveBack = () => store.release(state).catch(() => undefined);
  // A grant whose lease is already over when its reply arrives is never handed out (nor loaded).
  if (leaseLeft(state) < MIN_LEASE_MS) {
    await giveBack();
    return late();
  }
  let doc: object | null;
  try {
    doc = await load(context, documentId);
  } catch (error) {
    await giveBack();
    throw error;
  }
  if (!doc) {
    nextStats.notMatching++;
    await giveBack();
    return { kind: 'notMatching' };
  }
  if (leaseLeft(state) < MIN_LEASE_MS) {
    await giveBack();
    return late();
  }
  attachHeldLock(doc, state);
  nextStats.claims++;
  return { kind: 'claimed', claimed: { doc, state } };
}

/** Resolves after `ms`, or as soon as `signal` aborts; never rejects. */
function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, Math.max(0, ms));
    signal?.addEventListener('abort', done, { once: true });
  });
}

/** The candidate read, retried while a snapshot is not yet available (R31). */
async function readCandidates(context: NextContext, match: Document, limit: number): Promise<unknown[]> {
  for (let attempt = 0; ; attempt++) {
    try {
      return await context.store.freeCandidates(context.documents, match, context.sort, limit, context.snapshot);
    } catch (error) {
      if (!context.snapshot || attempt >= SNAPSHOT_RETRIES || !SNAPSHOT_ERRORS.has((error as { code?: unknown }).code)) throw error;
      await pause(POLL_BASE_MS * 2 ** attempt, undefined);
    }
  }
}

/**
 * Claims the next free document matching the filter for the owner, or resolves null when there is
 * none (with `wait`: none until the deadline, or until the signal times out: a timeout ends the
 * wait as `wait` running out does, as in lock-waiter.ts). Rejects with the signal's reason on an
 * explicit abort.
 */
export async function claimNext(context: NextContext): Promise<Claimed | null> {
  const queue = queueFor(context.documents, (context.model.base as unknown as { mongo: typeof mongo }).mongo.BSON, context.match, context.sort);
  const { wait, signal } = context.call;
  const waiting = wait > 0;
  const started = performance.now();
  const deadline = started + wait;
  /** How often this call found each document not matching after locking it. */
  const misses = new Map<string, number>();
  /**
   * Documents never proposed to this call again: found not matching MISS_LIMIT times, or (while
   * it is open) written by a caller transaction of this process (`inTransaction`).
   */
  const skip = new Map<string, unknown>();
  const inTransaction = new Set<string>();
  /** How often a document left out for misses was found matching and free again, and re-admitted. */
  const revisits = new Map<string, number>();
  /** Reads that can answer "none" must start at or after this instant. */
  let notBefore = started;
  let late = 0;
  let round = 0;
  /** When a read of this call first found no free matching document (a waiting call reserves RESERVE_AFTER_MS later). */
  let firstNone: number | undefined;
  /** This call's reservation of a held match, while it is the queue's reserver (next-reservation.ts). */
  let reservation: NextReservation | undefined;
  /** Reads again at once in a row because the reserved document was found free after a read. */
  let rereads = 0;
  /**
   * Whether something since the last search suggests a held match (a claim refused because it was
   * held, or a change that woke the call): only then does the reservation search for one at once
   * (next-reservation.ts), so a worker idling on an empty queue sends no search each second.
   */
  let contended = false;
  queue.active++;
  try {
    for (;;) {
      if (calledOff(signal)) throw abortedWith(undefined, signal!);
      for (const key of inTransaction) {
        if (!context.store.writtenByCallerTransaction(skip.get(key))) {
          inTransaction.delete(key);
          skip.delete(key);
        }
      }
      const candidate = queue.take(skip);
      if (candidate) {
        let outcome: Outcome | undefined;
        const began = performance.now();
        try {
          outcome = await attempt(context, candidate);
        } finally {
          // A candidate that no longer matches was usually claimed and finished by another
          // process since the read: for spreading, that is a collision too.
          queue.settle(candidate, outcome?.kind === 'held' || outcome?.kind === 'notMatching', outcome?.kind === 'claimed', performance.now() - began);
        }
        if (outcome.kind === 'claimed') return outcome.claimed;
        if (outcome.kind === 'held') contended = true;
        if (outcome.kind === 'notMatching') {
          const count = (misses.get(candidate.key) ?? 0) + 1;
          misses.set(candidate.key, count);
          if (count >= MISS_LIMIT) skip.set(candidate.key, candidate.id);
          // The next read starts after the load: it sees the document as it is now (it may match again).
          notBefore = performance.now();
        }
        if (outcome.kind === 'inCallerTransaction') {
          inTransaction.add(candidate.key);
          skip.set(candidate.key, candidate.id);
        }
        if (outcome.kind === 'late' && ++late >= LATE_LIMIT) {
          throw new LockExpiredOnArrivalError(candidate.id, outcome.expiresAt, { operation: 'lock', ttl: context.call.ttl, elapsedMs: outcome.elapsedMs, attempts: late });
        }
        continue;
      }
      // Nothing to try: read. A waiting call subscribes first, so no wake-up after the read is lost.
      // A release by this process of the document this call reserves wakes it (local-wake.ts).
      const subscription = waiting ? context.feed.subscribe(() => (reservation && queue.reserver === reservation ? reservation.key : undefined)) : undefined;
      try {
        const run = (match: Document) => (limit: number) => readCandidates(context, match, limit);
        /** A read that leaves out `excluded` (shared with the other calls when it leaves out nothing). */
        const readWithout = (excluded: Map<string, unknown>) =>
          excluded.size === 0 ? queue.read(notBefore, run(context.match)) : queue.readAlone(run({ $and: [context.match, { _id: { $nin: [...excluded.values()] } }] }));
        let result = await readWithout(skip);
        // Nothing outside what this call left out. "None" only from a read that does not leave out
        // documents merely because this call found them not matching before (model finding F4: one
        // may match again, a re-queued job): read again leaving out only those of an open
        // transaction of the caller; a document found matching and free again is tried again, up
        // to REVISIT_LIMIT times (a `find` hook that hides it from the load is not a race).
        const passedOver = new Map([...inTransaction].map((key) => [key, skip.get(key)]));
        for (const [key, id] of skip) if ((revisits.get(key) ?? 0) >= REVISIT_LIMIT) passedOver.set(key, id);
        if (!result.found.some((found) => !skip.has(found.key)) && skip.size > passedOver.size) {
          result = await readWithout(passedOver);
          for (const found of result.found) {
            if (!skip.has(found.key) || passedOver.has(found.key)) continue;
            skip.delete(found.key);
            revisits.set(found.key, (revisits.get(found.key) ?? 0) + 1);
          }
        }
        if (result.found.some((found) => !skip.has(found.key))) {
          // Free candidates exist. The loop takes one from the pool; when every one of them is
          // being tried by another call of this process, wait for one of those attempts to end.
          if (!queue.canTake(skip) && queue.attempting > 0) {
            // (A signal that already timed out does not cut this pause short: that would spin.)
            await Promise.race([queue.whenSettled(), pause(SETTLE_WAIT_MS, signal?.aborted ? undefined : signal)]);
            notBefore = performance.now();
          }
          continue;
        }
        // A read that started during the call found no free matching document: "none" (the
        // documents other calls of this process are trying were free at the read and would have
        // been found, so they are not hidden by it). An explicit abort during the read still ends
        // the call with the signal's reason, as lock and lockMany do (lock-waiter.ts).
        if (calledOff(signal)) throw abortedWith(undefined, signal!);
        if (!waiting) return null;
        const left = deadline - performance.now();
        if (left <= 0 || signal?.aborted) return null;
        // Waiting for RESERVE_AFTER_MS with none free, the call reserves the first held match, as a
        // waiting lock call reserves its document (next-reservation.ts); one call per queue does.
        firstNone ??= performance.now();
        let reserveIn = Infinity;
        if (queue.reserver === undefined || queue.reserver === reservation) {
          const waited = performance.now() - firstNone;
          if (waited < RESERVE_AFTER_MS) reserveIn = RESERVE_AFTER_MS - waited;
          else {
            reservation ??= new NextReservation(context);
            queue.reserver = reservation;
            if (contended) reservation.contended();
            contended = false;
            if ((await reservation.afterNone(skip)) === 'readAgain' && rereads++ < 1) {
              notBefore = performance.now();
              continue;
            }
          }
        }
        rereads = 0;
        // The reservation's reads took time: an abort or a timeout meanwhile ends the call now (an
        // abort event that fired before the pause listens would not cut it short).
        if (calledOff(signal)) throw abortedWith(undefined, signal!);
        if (signal?.aborted) return null;
        // Streams that were capturing before this read report every later change; otherwise
        // (none, or still opening) poll with backoff meanwhile (and wake when the reservation is due).
        const reservedPoll = reservation !== undefined && queue.reserver === reservation && reservation.holding;
        const backoffPoll = reservedPoll ? RESERVED_POLL_MS : Math.random() * Math.min(POLL_CAP_MS, POLL_BASE_MS * 2 ** round++);
        const poll = Math.min(reserveIn, deadline - performance.now(), subscription!.wasLive ? SAFETY_POLL_MS : backoffPoll);
        const stop = new AbortController();
        const onAbort = () => stop.abort();
        signal?.addEventListener('abort', onAbort, { once: true });
        try {
          const woken = await Promise.race([subscription!.changed.then(() => true), pause(Math.min(left, poll), stop.signal).then(() => false)]);
          if (woken) contended = true;
        } finally {
          signal?.removeEventListener('abort', onAbort);
          stop.abort();
        }
        if (calledOff(signal)) throw abortedWith(undefined, signal!);
        // Read again (a read that starts now); at the deadline (or the signal's timeout), an empty read ends the call.
        notBefore = performance.now();
      } finally {
        subscription?.cancel();
      }
    }
  } finally {
    queue.active--;
    if (reservation) {
      reservation.end();
      if (queue.reserver === reservation) queue.reserver = undefined;
    }
  }
}

export { nextStats } from './next-queue';
