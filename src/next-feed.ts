/**
 * Wake-ups for `Model.lockNext(filter, owner, { wait })`: a waiting call reads again when a
 * document may have become claimable. Two change streams per model collection, shared by every
 * waiting call of this process (where the deployment has change streams and `changeStreams` is
 * 'auto'; R15):
 *  - on the model's collection: `insert`, `update`, `replace` (a document may now match);
 *  - on its lock collection: `update`, `replace`, `delete`, except acquisitions (an update that
 *    sets `token` to a string): a lock may have been released (the same events LockWatch uses).
 * Every event wakes every waiting call; they then share one candidate read per filter (the queue's
 * single-flight read in lock-next.ts), so a burst of events costs one read, not one per waiter.
 * A lock that simply expires (its holder crashed) writes nothing and produces no event: waiters
 * also read again every SAFETY_POLL_MS. Without streams they poll with jittered backoff.
 * A release made by this process reaches the feed too (local-wake.ts, as it reaches LockWatch):
 * without live streams it wakes every waiting call, as a release's event would; with them, only
 * the call that reserved the released document (next-reservation.ts), the others hearing the
 * event a moment later as before (waking all of them twice cost throughput: LockWatch.wakeLocal).
 */
import type { mongo } from 'mongoose';
import { delist, enlist, type LocallyWakeable } from './local-wake';

type Document = mongo.Document;

const STREAM_AWAIT_MS = 1_000;
const IDLE_CLOSE_MS = 10_000;

export interface FeedSubscription {
  /** Resolves at the next event after the subscription (or when a stream fails). */
  changed: Promise<void>;
  /** Whether both streams were already capturing events when this subscription was made. */
  wasLive: boolean;
  /** Resolves to whether the streams deliver events (opening them if needed). */
  live: Promise<boolean>;
  cancel(): void;
}

interface Source {
  collection: mongo.Collection<Document>;
  pipeline: Document[];
  /** Events that free nothing and match nothing new. */
  ignore?(event: Document): boolean;
}

interface FeedWaiter {
  wake(): void;
  /** The idKey of the document the call reserves now, if any (next-reservation.ts). */
  reserved(): string | undefined;
}

export class NextFeed implements LocallyWakeable {
  private readonly waiters = new Set<FeedWaiter>();
  private streams: mongo.ChangeStream[] | undefined;
  private opening: Promise<boolean> | undefined;
  private idleTimer: NodeJS.Timeout | undefined;
  /** Number of times the streams were opened (visible to tests). */
  opened = 0;
  /** The scope this feed is listed under for releases of this process while it has waiters (local-wake.ts). */
  private listedAs: string | undefined;

  /** `scope`: the lock collection's LockStore.scope, read when the first waiter subscribes. */
  constructor(
    private readonly sources: Source[],
    private readonly canWatch: () => Promise<boolean>,
    private readonly scope?: () => string,
  ) {}

  /**
   * Registers synchronously, so no event after this call is missed once the streams are live.
   * `reserved`: the document the call reserves, asked when this process releases a lock.
   */
  subscribe(reserved: () => string | undefined = () => undefined): FeedSubscription {
    let wake!: () => void;
    const changed = new Promise<void>((resolve) => (wake = resolve));
    const waiter: FeedWaiter = { wake, reserved };
    this.waiters.add(waiter);
    if (this.listedAs === undefined && this.scope) enlist((this.listedAs = this.scope()), this);
    clearTimeout(this.idleTimer);
    const wasLive = this.streams !== undefined;
    const live = this.open().catch(() => false);
    return {
      changed,
      wasLive,
      live,
      cancel: () => {
        this.waiters.delete(waiter);
        if (this.waiters.size === 0) this.idle();
      },
    };
  }

  /**
   * A release by this process of the document `key` (local-wake.ts): without live streams every
   * waiting call reads again (a release's event would wake them all); with them, only the call
   * that reserved it (the freed document is its to take: asking before the event comes hands it
   * over sooner). Picks no LockWatch waiter's turn (false): the calls read, they do not queue.
   */
  wakeLocal(key: string): boolean {
    if (!this.streams) this.wakeAll();
    else for (const waiter of [...this.waiters]) if (waiter.reserved() === key) this.wakeOne(waiter);
    return false;
  }

  /** Whether a waiting call here reserves the document `key` (then no single waiter here is picked for it). */
  reserving(key: string): boolean {
    for (const waiter of this.waiters) if (waiter.reserved() === key) return true;
    return false;
  }

  wakeEveryone(): void {
    if (!this.streams) this.wakeAll();
  }

  private wakeOne(waiter: FeedWaiter): void {
    this.waiters.delete(waiter);
    if (this.waiters.size === 0) this.idle();
    waiter.wake();
  }

  /** No waiter left: the streams close after a while, and no release of this process looks here. */
  private idle(): void {
    this.scheduleIdleClose();
    if (this.listedAs !== undefined) delist(this.listedAs, this);
    this.listedAs = undefined;
  }

  private open(): Promise<boolean> {
    if (this.streams) return Promise.resolve(true);
    this.opening ??= (async () => {
      if (!(await this.canWatch())) return false;
      const streams = this.sources.map((source) => source.collection.watch(source.pipeline, { maxAwaitTimeMS: STREAM_AWAIT_MS }));
      try {
        // The first tryNext sends the aggregate: once it returns, events are being captured.
        await Promise.all(streams.map((stream) => stream.tryNext()));
      } catch (error) {
        await Promise.all(streams.map((stream) => stream.close().catch(() => undefined)));
        throw error;
      }
      this.streams = streams;
      this.opened++;
      streams.forEach((stream, i) => void this.pump(stream, this.sources[i]));
      return true;
    })().finally(() => {
      this.opening = undefined;
    });
    return this.opening;
  }

  private async pump(stream: mongo.ChangeStream, source: Source): Promise<void> {
    try {
      while (this.streams?.includes(stream)) {
        const event = (await stream.next()) as Document;
        if (source.ignore?.(event)) continue;
        this.wakeAll();
      }
    } catch {
      // Closed, or the deployment lost the stream: close the other one too; waiters poll or reopen.
    } finally {
      if (this.streams?.includes(stream)) void this.close();
      this.wakeAll();
    }
  }

  private wakeAll(): void {
    const waiters = [...this.waiters];
    this.waiters.clear();
    if (waiters.length > 0) this.idle();
    for (const waiter of waiters) waiter.wake();
  }

  private scheduleIdleClose(): void {
    clearTimeout(this.idleTimer);
    this.idleTimer = setTimeout(() => {
      if (this.waiters.size === 0) void this.close();
    }, IDLE_CLOSE_MS);
    this.idleTimer.unref();
  }

  async close(): Promise<void> {
    clearTimeout(this.idleTimer);
    const streams = this.streams;
    this.streams = undefined;
    if (streams) await Promise.all(streams.map((stream) => stream.close().catch(() => undefined)));
  }
}

/**
 * Lock-record fields written by calls that free nothing: a waiter's reservation
 * (group-reservation.ts; lockNext ignores reservations, so one coming or going changes nothing it
 * can claim) and a guarded write's claim on the record (LockStore.claimForWrite: `claim`,
 * `lastWriteAt`; the holder keeps its lock).
 */
const FREE_NOTHING_FIELDS: ReadonlySet<string> = new Set(['reservedBy', 'reservedUntil', 'reservedSince', 'claim', 'lastWriteAt']);

/**
 * Lock-collection events that free nothing for lockNext: an acquisition (an update that gave the
 * record a token), a renewal (an update of `expiresAt` alone, as LockWatch.pump skips it; a
 * renewal that shortens a lease is not heard either: the safety poll reads it), and an update that
 * wrote or removed only FREE_NOTHING_FIELDS. An update event's updateDescription names every field
 * the update set or removed (the manual's change events, "update Event"; a pipeline update's is
 * the diff, PipelineExecutor::applyUpdate -> doc_diff::computeOplogDiff, see LockWatch.pump; a
 * reserve or a guarded write that upserts a new record is an `insert`, which this stream does not
 * watch: nothing was held there). A release sets `owner` and `token` to null (RELEASE in
 * lock-store.ts), so it is always heard.
 */
function freesNothing(event: Document): boolean {
  if (event.operationType !== 'update') return false;
  const description = event.updateDescription as { updatedFields?: Record<string, unknown>; removedFields?: string[] } | undefined;
  const updated = description?.updatedFields ?? {};
  if (typeof updated.token === 'string') return true;
  const removed = description?.removedFields ?? [];
  if (removed.length === 0 && Object.keys(updated).length === 1 && 'expiresAt' in updated) return true;
  const fields = [...Object.keys(updated), ...removed];
  return fields.length > 0 && fields.every((field) => FREE_NOTHING_FIELDS.has(field));
}

/** The feed for a model collection and its lock collection. */
export function nextFeed(documents: mongo.Collection<Document>, locks: mongo.Collection<Document>, canWatch: () => Promise<boolean>, scope?: () => string): NextFeed {
  return new NextFeed(
    [
      { collection: documents, pipeline: [{ $match: { operationType: { $in: ['insert', 'update', 'replace'] } } }] },
      { collection: locks, pipeline: [{ $match: { operationType: { $in: ['update', 'replace', 'delete'] } } }], ignore: freesNothing },
    ],
    canWatch,
    scope,
  );
}
