/**
 * Server-side cursors: array-backed cursors for find/aggregate results and
 * asynchronous `CursorSource`s (change streams). Ids are Longs; idle cursors
 * are reaped like mongod's cursorTimeoutMillis (10 minutes).
 */
import { Long, calculateObjectSize, type Document, type Timestamp } from 'bson';
import type { CursorSource } from './hooks';
import { Codes, MongoCommandError } from './errors';

const IDLE_MS = 10 * 60 * 1000;

/**
 * Bytes of documents one batch holds: FindCommon::kMaxBytesToReturnToClientAtOnce =
 * BSONObjMaxUserSize (src/mongo/db/query/find_common.cpp). FindCommon::haveSpaceForNext admits
 * the first document of a batch whatever its size ("to ensure we can always make progress"),
 * then the next only while the batch stays within this many bytes (fitsInBatch); the batch's
 * array overhead is counted per document (BSONArrayResponseSizeTracker: type byte, the index's
 * digits, its NUL).
 */
const MAX_BATCH_BYTES = 16 * 1024 * 1024;

class ArraySource implements CursorSource {
  private pos = 0;
  constructor(
    readonly ns: string,
    private readonly docs: Document[],
  ) {}
  /** The next batch: at most `n` documents (0: no count limit), at most MAX_BATCH_BYTES (see above). */
  take(n: number): Document[] {
    const end = n > 0 ? Math.min(this.docs.length, this.pos + n) : this.docs.length;
    let stop = this.pos;
    let bytes = 0;
    while (stop < end) {
      const size = calculateObjectSize(this.docs[stop]!) + 2 + String(stop - this.pos).length;
      if (stop > this.pos && bytes + size > MAX_BATCH_BYTES) break;
      bytes += size;
      stop++;
    }
    const out = this.docs.slice(this.pos, stop);
    this.pos = stop;
    return out;
  }
  get exhausted(): boolean {
    return this.pos >= this.docs.length;
  }
  async nextBatch(n: number): Promise<Document[]> {
    return this.take(n);
  }
  close(): void {}
}

interface Entry {
  source: CursorSource;
  lastUsed: number;
  busy: boolean;
  /** A snapshot read's time (snapshot-reads.ts): every getMore reply repeats it. */
  atClusterTime?: Timestamp;
}

export class CursorRegistry {
  private readonly cursors = new Map<string, Entry>();
  private next = 1;
  private readonly reaper: NodeJS.Timeout;

  constructor() {
    this.reaper = setInterval(() => this.reap(), 60_000);
    this.reaper.unref();
  }

  /** First batch of an array result; registers a cursor only if more remain. */
  fromArray(ns: string, docs: Document[], batchSize: number | undefined, singleBatch = false): Document {
    const src = new ArraySource(ns, docs);
    const first = src.take(batchSize === undefined ? 101 : batchSize);
    let id = Long.ZERO;
    if (!src.exhausted && !singleBatch) id = this.register(src);
    return { cursor: { firstBatch: first, id, ns }, ok: 1 };
  }

  /** First batch of an asynchronous source (the cursor always stays open until closed). */
  async fromSource(src: CursorSource, batchSize: number | undefined, maxAwaitTimeMS?: number): Promise<Document> {
    const first = batchSize === 0 ? [] : await src.nextBatch(batchSize ?? 101, { maxAwaitTimeMS: maxAwaitTimeMS ?? 0 });
    // integration: change streams — a stream that already ended (invalidate) is closed at once, id 0.
    const id = src.exhausted ? Long.ZERO : this.register(src);
    if (src.exhausted) src.close();
    const cursor: Document = { firstBatch: first, id, ns: src.ns };
    const token = src.postBatchResumeToken?.();
    if (token) cursor.postBatchResumeToken = token;
    return { cursor, ok: 1 };
  }

  /** Namespaces of the open asynchronous cursors (change streams), for $out's refusal (aggregate-write.ts). */
  streamNamespaces(): string[] {
    const out: string[] = [];
    for (const e of this.cursors.values()) if (!(e.source instanceof ArraySource)) out.push(e.source.ns);
    return out;
  }

  private register(src: CursorSource): Long {
    const id = Long.fromNumber(this.next++ * 7919 + 1000);
    this.cursors.set(id.toString(), { source: src, lastUsed: Date.now(), busy: false });
    return id;
  }

  /** Marks a snapshot read's cursor (CursorResponseBuilder::done adds `atClusterTime` after `ns`). */
  setAtClusterTime(id: Long | number, ts: Timestamp): void {
    const e = this.cursors.get(String(id));
    if (e) e.atClusterTime = ts;
  }

  async getMore(id: Long | number, ns: string, batchSize: number | undefined, maxAwaitTimeMS: number | undefined, afterCheckout?: (isChangeStream: boolean) => void): Promise<Document> {
    const key = String(id);
    const e = this.cursors.get(key);
    if (!e) throw new MongoCommandError(Codes.CursorNotFound, `cursor id ${key} not found`);
    if (e.source.ns !== ns) throw new MongoCommandError(Codes.Unauthorized, `Requested getMore on namespace '${ns}', but cursor belongs to a different namespace ${e.source.ns}`);
    if (e.busy) throw new MongoCommandError(Codes.BadValue, `cursor id ${key} is already in use`);
    e.busy = true;
    try {
      const src: CursorSource = e.source;
      try {
        afterCheckout?.(!(src instanceof ArraySource));
      } catch (err) {
        // A getMore that fails after checking out its cursor kills it.
        src.close();
        this.cursors.delete(key);
        throw err;
      }
      const batch = src instanceof ArraySource ? src.take(batchSize ?? 0) : await src.nextBatch(batchSize ?? 101, { maxAwaitTimeMS });
      let outId = Long.fromString(key);
      if (src.exhausted) {
        // integration: change streams — also closes an asynchronous source that ended (invalidate).
        if (!(src instanceof ArraySource)) src.close();
        this.cursors.delete(key);
        outId = Long.ZERO;
      }
      const cursor: Document = { nextBatch: batch, id: outId, ns: src.ns };
      if (e.atClusterTime) cursor.atClusterTime = e.atClusterTime;
      const token = e.source.postBatchResumeToken?.();
      if (token) cursor.postBatchResumeToken = token;
      return { cursor, ok: 1 };
    } finally {
      e.busy = false;
      e.lastUsed = Date.now();
    }
  }

  kill(ids: Array<Long | number>): { killed: Long[]; notFound: Long[] } {
    const killed: Long[] = [];
    const notFound: Long[] = [];
    for (const id of ids) {
      const key = String(id);
      const e = this.cursors.get(key);
      const l = typeof id === 'number' ? Long.fromNumber(id) : id;
      if (e) {
        e.source.close();
        this.cursors.delete(key);
        killed.push(l);
      } else notFound.push(l);
    }
    return { killed, notFound };
  }

  private reap(): void {
    const now = Date.now();
    for (const [k, e] of this.cursors) {
      if (!e.busy && now - e.lastUsed > IDLE_MS) {
        e.source.close();
        this.cursors.delete(k);
      }
    }
  }

  close(): void {
    clearInterval(this.reaper);
    for (const e of this.cursors.values()) e.source.close();
    this.cursors.clear();
  }
}
