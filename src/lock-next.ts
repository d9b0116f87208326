/**
 * Claiming the next free document: `Model.lockNext(filter, owner, { sort, ttl, label, wait, signal })`.
 *
 * One claim is three commands: a candidate read (LockStore.freeCandidates: the free matching
 * documents' `_id`s, in sort order), an acquisition (LockStore.claimFree: Model.lock's own
 * conditional findAndModify, granted only if nobody holds the lock) and the load of the document
 * with the filter AND its `_id` (Model.findOne, from the primary), after the lock was taken.
 *  - Exclusivity is the acquisition's, exactly Model.lock's: the read only proposes.
 *  - A document that stopped matching between the read and the lock (or was deleted) loads as
 *    null: its lock is released by token and the call goes on with another candidate; this call
 *    never proposes it again (the next reads exclude it with `$nin`).
 *  - The call resolves null only after a candidate read that started during the call found no
 *    free matching document (never because candidates were taken by others meanwhile). On
 *    replica sets that read is one snapshot (readConcern "snapshot"), so at that instant no
 *    matching document was free; elsewhere see docs/mongodb-compatibility.md R34.
 *
 * Spreading concurrent workers (one process): the calls of a process that use the same model,
 * filter and sort share one queue: one read at a time fetches up to `readSize()` candidates into a
 * pool, and each call takes a different one (never one another call of the process is trying), so
 * the workers of one process never collide with each other, and most claims need no read of their
 * own. Workers in other processes take from the same head of the queue: when an acquisition finds
 * its candidate held (a collision), the queue widens its `spread` and picks at random among the
 * first `spread` free candidates (and reads more of them), and narrows it again as claims succeed.
 * So under contention "first in sort order" means "one of the first free candidates"; a single
 * worker without competition claims in exact sort order. Pool entries are used for a limited
 * time (POOL_MAX_AGE_MS, or ten claims' time on a slow server, at most POOL_AGE_CAP_MS).
 *
 * Leases are conservative: a grant is timed from when its acquisition was SENT, less the drift
 * allowance (leaseLeft); one that is over by the time the document is loaded is released and
 * another candidate tried (LATE_LIMIT times in a row, then LockExpiredError).
 */
import type { mongo } from 'mongoose';
import { LockExpiredError } from './errors';
import { attachHeldLock, newHeldLockState, type HeldLock, type HeldLockState } from './held-lock';
import { idKey } from './id-key';
import type { Grant, LockStore } from './lock-store';
import type { LockNextSort } from './next-arguments';
import type { NextFeed } from './next-feed';
import type { ResolvedCallOptions } from './arguments';
import type { AnyModel } from './runtime';
import { issueTicket } from './ticket';

type Document = mongo.Document;

/** Candidates of a read older than this are not used (they are re-read). */
const POOL_MAX_AGE_MS = 500;
const POOL_AGE_CAP_MS = 5_000;
const MIN_READ = 8;
/** A read never asks for more (one batch; mongod's default first batch is 101 documents). */
export const MAX_READ = 100;
const MAX_SPREAD = 64;
/** Grants that arrived too late to count on, in a row, before the call gives up. */
const LATE_LIMIT = 3;
/** With live change streams, read again this often anyway (a crashed holder's lock expires silently). */
const SAFETY_POLL_MS = 1_000;
const POLL_BASE_MS = 20;
const POLL_CAP_MS = 1_000;
/** Longest wait for another call's attempt to end before reading again. */
const SETTLE_WAIT_MS = 1_000;
/** Snapshot reads that found the catalog newer than the snapshot are retried this often. */
const SNAPSHOT_RETRIES = 5;
/** SnapshotUnavailable (246), SnapshotTooOld (239): the snapshot could not serve this read yet. */
const SNAPSHOT_ERRORS: ReadonlySet<unknown> = new Set([239, 246]);

interface Candidate {
  id: unknown;
  key: string;
  /** When the read that found it started. */
  readAt: number;
}

interface ReadResult {
  startedAt: number;
  /** Every free candidate the read found, before any local exclusion. */
  found: Candidate[];
}

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

/** Statistics of this process's claims (tests and benchmarks read them). */
export const nextStats = { reads: 0, attempts: 0, collisions: 0, claims: 0, notMatching: 0, late: 0 };

function deferred(): { promise: Promise<void>; resolve(): void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

/** One model collection + filter + sort, shared by the calls of this process. */
class NextQueue {
  private pool: Candidate[] = [];
  private poolReadAt = -Infinity;
  private readonly inFlight = new Set<string>();
  /**
   * When this process last claimed (or found not matching) each document: a read that started
   * before that may still report it free, and it is not offered again.
   */
  private readonly recent = new Map<string, number>();
  private settled = deferred();
  private reading: { startedAt: number; promise: Promise<ReadResult> } | undefined;
  private spread = 1;
  /** Calls in progress on this queue. */
  active = 0;

  /** Indexes in the pool of the first `spread` candidates nobody in this process is trying and `skip` does not exclude. */
  private usable(skip: ReadonlyMap<string, unknown>): number[] {
    if (performance.now() - this.poolReadAt > this.maxAge()) this.pool = [];
    const usable: number[] = [];
    for (let i = 0; i < this.pool.length && usable.length < this.spread; i++) {
      const candidate = this.pool[i];
      if (!this.inFlight.has(candidate.key) && !skip.has(candidate.key)) usable.push(i);
    }
    return usable;
  }

  canTake(skip: ReadonlyMap<string, unknown>): boolean {
    return this.usable(skip).length > 0;
  }

  /** A candidate nobody in this process is trying and this call has not excluded, or undefined. */
  take(skip: ReadonlyMap<string, unknown>): Candidate | undefined {
    const usable = this.usable(skip);
    if (usable.length === 0) return undefined;
    const [candidate] = this.pool.splice(usable[Math.floor(Math.random() * usable.length)], 1);
    this.inFlight.add(candidate.key);
    return candidate;
  }

  /** Moving average of an attempt's duration (acquisition and load), in ms. */
  private attemptMs = 0;

  /** How long a read's candidates are used: long enough for several claims, short enough to stay fresh. */
  private maxAge(): number {
    return Math.min(POOL_AGE_CAP_MS, Math.max(POOL_MAX_AGE_MS, 10 * this.attemptMs));
  }

  /** An attempt on `candidate` that took `ms` ended; `collided` when someone else held it. */
  settle(candidate: Candidate, collided: boolean, claimed: boolean, ms: number): void {
    this.attemptMs = this.attemptMs === 0 ? ms : 0.9 * this.attemptMs + 0.1 * ms;
    this.inFlight.delete(candidate.key);
    if (claimed || collided) this.remember(candidate.key);
    if (collided) {
      this.spread = Math.min(MAX_SPREAD, this.spread * 2);
      // Others are claiming from the same read: its other candidates are likely taken too.
      if (candidate.readAt >= this.poolReadAt) this.pool = [];
    }
    else if (claimed && this.spread > 1) this.spread--;
    const settled = this.settled;
    this.settled = deferred();
    settled.resolve();
  }

  private remember(key: string): void {
    const now = performance.now();
    this.recent.set(key, now);
    if (this.recent.size > 4 * MAX_READ) {
      for (const [k, at] of this.recent) if (now - at > this.maxAge()) this.recent.delete(k);
    }
  }

  /** Whether this process claimed (or gave up) the document after a read that started at `startedAt`. */
  private settledSince(key: string, startedAt: number): boolean {
    const at = this.recent.get(key);
    return at !== undefined && at >= startedAt;
  }

  get attempting(): number {
    return this.inFlight.size;
  }

  /** Resolves when an attempt of this process on this queue ends. */
  whenSettled(): Promise<void> {
    return this.settled.promise;
  }

  private readSize(): number {
    return Math.min(MAX_READ, Math.max(MIN_READ, 2 * this.active, 2 * this.spread));
  }

  /** The free candidates found by a read that started at or after `notBefore`, shared by the calls that need one. */
  async read(notBefore: number, run: (limit: number) => Promise<unknown[]>): Promise<ReadResult> {
    for (;;) {
      const current = this.reading;
      if (current && current.startedAt >= notBefore) return current.promise;
      if (current) {
        await current.promise.catch(() => undefined);
        continue;
      }
      const startedAt = performance.now();
      const promise = this.fill(startedAt, run(this.readSize()));
      this.reading = { startedAt, promise };
      void promise.then(
        () => this.doneReading(promise),
        () => this.doneReading(promise),
      );
      return promise;
    }
  }

  /** A read of this call only (it excludes documents this call found not matching). */
  readAlone(run: (limit: number) => Promise<unknown[]>): Promise<ReadResult> {
    return this.fill(performance.now(), run(this.readSize()));
  }

  private doneReading(promise: Promise<ReadResult>): void {
    if (this.reading?.promise === promise) this.reading = undefined;
  }

  private async fill(startedAt: number, ids: Promise<unknown[]>): Promise<ReadResult> {
    const found = (await ids).map((id) => ({ id, key: idKey(id), readAt: startedAt }));
    nextStats.reads++;
    if (startedAt >= this.poolReadAt) {
      this.pool = found.filter((candidate) => !this.inFlight.has(candidate.key) && !this.settledSince(candidate.key, startedAt));
      this.poolReadAt = startedAt;
    }
    return { startedAt, found };
  }
}

const queues = new WeakMap<object, Map<string, NextQueue>>();
/** Queues kept per collection (idle ones beyond it are dropped). */
const MAX_QUEUES = 64;

function queueFor(context: NextContext): NextQueue {
  let byKey = queues.get(context.documents);
  if (!byKey) queues.set(context.documents, (byKey = new Map()));
  const { EJSON } = (context.model.base as unknown as { mongo: typeof mongo }).mongo.BSON;
  const key = EJSON.stringify({ match: context.match, sort: context.sort ?? null }, { relaxed: false });
  let queue = byKey.get(key);
  if (!queue) {
    if (byKey.size >= MAX_QUEUES) {
      for (const [k, q] of byKey) if (q.active === 0 && q.attempting === 0) byKey.delete(k);
    }
    byKey.set(key, (queue = new NextQueue()));
  }
  return queue;
}

/**
 * How long this process may still count on a grant, on its monotonic clock: from when the request
 * was sent, the ttl the server granted (its expiry less its `$$NOW`) less a drift allowance of 1 %
 * + 2 ms (the lease rule of issue 16).
 */
function leaseLeft(grant: Grant, sentAt: number): number {
  const span = grant.expiresAt.getTime() - grant.serverNow.getTime();
  return sentAt + span - (span * 0.01 + 2) - performance.now();
}

/** The state of a lock granted by a request sent at `sentAt` (the lease is timed from the send). */
function grantedState(held: HeldLock, grant: Grant, sentAt: number): HeldLockState {
  const state = newHeldLockState(held, grant.serverNow);
  state.grantedAtMonotonic = sentAt;
  return state;
}

type Outcome = { kind: 'claimed'; claimed: Claimed } | { kind: 'held' } | { kind: 'notMatching' } | { kind: 'late'; expiresAt: Date };

async function attempt(context: NextContext, candidate: Candidate): Promise<Outcome> {
  const { store, call } = context;
  nextStats.attempts++;
  const result = await store.claimFree(candidate.id, context.ownerKey, call.ttl, call.label);
  if (!result) {
    nextStats.collisions++;
    return { kind: 'held' };
  }
  const { grant, sentAt } = result;
  const documentId = candidate.id;
  const late = () => {
    nextStats.late++;
    return { kind: 'late' as const, expiresAt: grant.expiresAt };
  };
  const held: HeldLock = {
    documentId,
    owner: context.owner,
    token: grant.token,
    fence: grant.fence,
    acquiredAt: grant.acquiredAt,
    expiresAt: grant.expiresAt,
    ttl: call.ttl,
    ticket: issueTicket(documentId, grant.token, grant.fence),
    label: grant.label,
  };
  const state = grantedState(held, grant, sentAt);
  const giveBack = () => store.release(state).catch(() => undefined);
  // A grant whose lease is already over when its reply arrives is never handed out (nor loaded).
  if (leaseLeft(grant, sentAt) <= 0) {
    await giveBack();
    return late();
  }
  let doc: object | null;
  try {
    // The filter AND the `_id`, after the lock was taken, from the primary: the document as it is
    // now, and only if it still matches (Mongoose casts the filter as Model.find does, and runs
    // the model's findOne middleware).
    doc = (await context.model.findOne({ $and: [context.filter, { _id: documentId }] }).read('primary')) as object | null;
  } catch (error) {
    await giveBack();
    throw error;
  }
  if (!doc) {
    nextStats.notMatching++;
    await giveBack();
    return { kind: 'notMatching' };
  }
  if (leaseLeft(grant, sentAt) <= 0) {
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
 * none (with `wait`: none until the deadline). Rejects with the signal's reason when it aborts.
 */
export async function claimNext(context: NextContext): Promise<Claimed | null> {
  const queue = queueFor(context);
  const { wait, signal } = context.call;
  const waiting = wait > 0;
  const started = performance.now();
  const deadline = started + wait;
  /** Documents this call found not matching after locking them: never proposed to it again. */
  const skip = new Map<string, unknown>();
  /** Reads that can answer "none" must start at or after this instant. */
  let notBefore = started;
  let late = 0;
  let round = 0;
  queue.active++;
  try {
    for (;;) {
      signal?.throwIfAborted();
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
        if (outcome.kind === 'notMatching') skip.set(candidate.key, candidate.id);
        if (outcome.kind === 'late' && ++late >= LATE_LIMIT) throw new LockExpiredError(candidate.id, outcome.expiresAt);
        continue;
      }
      // Nothing to try: read. A waiting call subscribes first, so no wake-up after the read is lost.
      const subscription = waiting ? context.feed.subscribe() : undefined;
      try {
        const run = (match: Document) => (limit: number) => readCandidates(context, match, limit);
        const result =
          skip.size === 0
            ? await queue.read(notBefore, run(context.match))
            : await queue.readAlone(run({ $and: [context.match, { _id: { $nin: [...skip.values()] } }] }));
        if (result.found.some((found) => !skip.has(found.key))) {
          // Free candidates exist. The loop takes one from the pool; when every one of them is
          // being tried by another call of this process, wait for one of those attempts to end.
          if (!queue.canTake(skip) && queue.attempting > 0) {
            await Promise.race([queue.whenSettled(), pause(SETTLE_WAIT_MS, signal)]);
            notBefore = performance.now();
          }
          continue;
        }
        // A read that started during the call found no free matching document: "none" (the
        // documents other calls of this process are trying were free at the read and would have
        // been found, so they are not hidden by it).
        if (!waiting) return null;
        const left = deadline - performance.now();
        if (left <= 0) return null;
        // Streams that were capturing before this read report every later change; otherwise
        // (none, or still opening) poll with backoff meanwhile.
        const poll = subscription!.wasLive ? SAFETY_POLL_MS : Math.random() * Math.min(POLL_CAP_MS, POLL_BASE_MS * 2 ** round++);
        const stop = new AbortController();
        const onAbort = () => stop.abort();
        signal?.addEventListener('abort', onAbort, { once: true });
        try {
          await Promise.race([subscription!.changed, pause(Math.min(left, poll), stop.signal)]);
        } finally {
          signal?.removeEventListener('abort', onAbort);
          stop.abort();
        }
        signal?.throwIfAborted();
        // Read again (a read that starts now); at the deadline, an empty read ends the call.
        notBefore = performance.now();
      } finally {
        subscription?.cancel();
      }
    }
  } finally {
    queue.active--;
  }
}
