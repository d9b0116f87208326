/**
 * The candidates of `Model.lockNext` (lock-next.ts), shared by the calls of one process that use
 * the same model collection, filter and sort.
 *
 * One read at a time fetches up to `readSize()` free candidates into a pool, and each call takes a
 * different one (never one another call of the process is trying), so the workers of one process
 * never collide with each other, and most claims need no read of their own. Workers in other
 * processes take from the same head of the queue: when an attempt finds its candidate held or no
 * longer matching (a collision), the queue doubles its `spread`, drops the rest of that read's
 * candidates, and picks at random among the first `spread` free candidates of later reads (reading
 * more of them); each successful claim narrows the spread by one. So under contention "first in
 * sort order" means "one of the first free candidates"; a single worker without competition claims
 * in exact sort order. A read's candidates are used for a limited time (POOL_MAX_AGE_MS, or ten
 * attempts' time on a slow server, at most POOL_AGE_CAP_MS), and a document this process claimed
 * after a read started is not offered from that read.
 */
import type { mongo } from 'mongoose';
import { idKey } from './id-key';
import type { LockNextSort } from './next-arguments';

type Document = mongo.Document;

/** Candidates of a read older than this are not used (they are re-read). */
const POOL_MAX_AGE_MS = 500;
const POOL_AGE_CAP_MS = 5_000;
const MIN_READ = 8;
/** A read never asks for more (one batch; mongod's default first batch is 101 documents). */
export const MAX_READ = 100;
const MAX_SPREAD = 64;

export interface Candidate {
  id: unknown;
  key: string;
  /** When the read that found it started. */
  readAt: number;
}

export interface ReadResult {
  startedAt: number;
  /** Every free candidate the read found, before any local exclusion. */
  found: Candidate[];
}

/** Statistics of this process's claims (tests and benchmarks read them). */
export const nextStats = { reads: 0, attempts: 0, collisions: 0, claims: 0, notMatching: 0, late: 0 };

function deferred(): { promise: Promise<void>; resolve(): void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

/** One model collection + filter + sort, shared by the calls of this process. */
export class NextQueue {
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
  /** The call of this process that reserves a held match for the queue's waiting calls (next-reservation.ts), if any. */
  reserver: object | undefined;

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

/**
 * The queue of `documents` (a model's collection on one connection) for one cast filter and sort:
 * the calls of this process with the same three share it. `bson` is the BSON library of the
 * model's Mongoose (its EJSON gives a canonical key for the filter, types included).
 */
export function queueFor(documents: object, bson: typeof mongo.BSON, match: Document, sort: LockNextSort | undefined): NextQueue {
  let byKey = queues.get(documents);
  if (!byKey) queues.set(documents, (byKey = new Map()));
  const key = bson.EJSON.stringify({ match, sort: sort ?? null }, { relaxed: false });
  let queue = byKey.get(key);
  if (!queue) {
    if (byKey.size >= MAX_QUEUES) {
      for (const [k, q] of byKey) if (q.active === 0 && q.attempting === 0) byKey.delete(k);
    }
    byKey.set(key, (queue = new NextQueue()));
  }
  return queue;
}

