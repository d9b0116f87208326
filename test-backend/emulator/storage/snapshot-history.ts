/**
 * Point-in-time history for snapshot reads outside transactions (readConcern `snapshot`, with or
 * without `atClusterTime`; MongoDB 5.0+).
 *
 * mongod keeps `minSnapshotHistoryWindowInSeconds` (default 300) of history: the storage engine's
 * oldest timestamp trails the stable timestamp by that many seconds
 * (WiredTigerKVEngine::_calculateHistoryLagFromStableTimestamp,
 * src/mongo/db/storage/wiredtiger/wiredtiger_kv_engine.cpp), and a read below the oldest timestamp
 * fails with SnapshotTooOld (WiredTigerRecoveryUnit::_txnOpen, wiredtiger_recovery_unit.cpp).
 *
 * The emulator keeps the same before-images the transactions use (Collection.history, one entry per
 * committed document write, keyed by commit sequence) and adds, while enabled, a time index mapping
 * cluster times to commit sequences. It is enabled by the first snapshot read (so the plain write
 * path pays nothing until then), disabled again after a window without snapshot reads, and bounded:
 * at most MAX_VERSIONS document versions. Reads at a time whose history the emulator did not keep
 * (before it was enabled, or trimmed by the bound) are refused with NotImplemented; reads below
 * mongod's own window answer SnapshotTooOld as mongod does.
 */
import type { Timestamp } from 'bson';

/** minSnapshotHistoryWindowInSeconds' default (src/mongo/db/storage/storage_parameters.idl). */
export const HISTORY_WINDOW_SECONDS = 300;
/**
 * How far mongod's stable timestamp may lag the wall clock on an idle primary: the periodic no-op
 * writer (periodicNoopIntervalSecs, default 10; src/mongo/db/repl/noop_writer.cpp) advances it.
 * Below (now - window - this), a time is older than mongod's oldest timestamp for certain.
 */
export const NOOP_INTERVAL_SECONDS = 10;
/** The emulator's bound on kept document versions (its own limit, not mongod's). */
export const MAX_VERSIONS = 100_000;

/** A commit boundary: after the commit at `seq` (a whole transaction counts as one), the cluster time was `ts`. */
interface Boundary {
  ts: Timestamp;
  seq: number;
}

export type ResolveResult = { kind: 'ok'; seq: number } | { kind: 'notKept'; reason: string };

/** Timestamps compare by (t, i); bson's Timestamp is a Long with t in the high bits. */
export function compareTs(a: Timestamp, b: Timestamp): number {
  return a.t !== b.t ? (a.t < b.t ? -1 : 1) : a.i === b.i ? 0 : a.i < b.i ? -1 : 1;
}

export class SnapshotHistory {
  /** Boundaries in commit order; entries before `head` were trimmed. */
  private readonly boundaries: Boundary[] = [];
  private head = 0;
  /** Drops of collections while enabled: ns -> cluster time of the latest drop. */
  private readonly drops = new Map<string, Timestamp>();
  /** Wall-clock ms of the last snapshot read (the history is disabled after a window without any). */
  lastUsed = Date.now();
  /** Commits since the last maintenance pass. */
  commitsSinceMaintain = 0;

  constructor(ts: Timestamp, seq: number) {
    this.boundaries.push({ ts, seq });
  }

  /** The oldest snapshot whose before-images are all kept. */
  get floor(): Boundary {
    return this.boundaries[this.head];
  }

  /** Records a commit boundary (called once per committed write, once per committed transaction). */
  record(ts: Timestamp, seq: number): void {
    this.boundaries.push({ ts, seq });
  }

  noteDrop(ns: string, ts: Timestamp): void {
    this.drops.set(ns, ts);
  }

  /** Whether collection `ns` was dropped after time `ts` (its data at `ts` is gone). */
  droppedAfter(ns: string, ts: Timestamp): boolean {
    const d = this.drops.get(ns);
    return d !== undefined && compareTs(d, ts) > 0;
  }

  /** The commit sequence a read at cluster time `ts` sees (the last boundary at or before it). */
  resolve(ts: Timestamp): ResolveResult {
    const b = this.boundaries;
    if (compareTs(ts, b[this.head].ts) < 0) {
      return { kind: 'notKept', reason: `the emulator keeps snapshot history from ${fmt(b[this.head].ts)} only` };
    }
    let lo = this.head;
    let hi = b.length - 1;
    while (lo < hi) {
      const mid = (lo + hi + 1) >> 1;
      if (compareTs(b[mid].ts, ts) <= 0) lo = mid;
      else hi = mid - 1;
    }
    return { kind: 'ok', seq: b[lo].seq };
  }

  /**
   * Moves the floor forward: past boundaries older than the window (keeping the last of them, whose
   * state lasts until the next commit), and past enough commits to keep at most MAX_VERSIONS
   * versions. Returns true if the floor moved (before-images up to it may be dropped).
   */
  trim(nowSecs: number, currentSeq: number): boolean {
    const b = this.boundaries;
    const start = this.head;
    const oldestSecs = nowSecs - HISTORY_WINDOW_SECONDS;
    while (this.head + 1 < b.length && b[this.head + 1].ts.t < oldestSecs) this.head++;
    const minSeq = currentSeq - MAX_VERSIONS / 2;
    if (currentSeq - b[this.head].seq > MAX_VERSIONS) {
      while (this.head + 1 < b.length && b[this.head].seq < minSeq) this.head++;
    }
    if (this.head === start) return false;
    for (const [ns, ts] of this.drops) if (compareTs(ts, b[this.head].ts) <= 0) this.drops.delete(ns);
    // Trimmed boundaries are removed in bulk once they are the larger part (amortized O(1)).
    if (this.head > 1024 && this.head * 2 > b.length) {
      b.splice(0, this.head);
      this.head = 0;
    }
    return true;
  }
}

/** Timestamp::toString (src/mongo/bson/timestamp.cpp): `Timestamp(<secs>, <inc>)`. */
export function fmt(ts: Timestamp): string {
  return `Timestamp(${ts.t}, ${ts.i})`;
}
