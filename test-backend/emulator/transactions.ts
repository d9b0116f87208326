/**
 * Logical sessions, multi-document transactions (snapshot isolation with
 * first-writer-wins write conflicts) and retryable-write records.
 *
 * A transaction buffers its writes in an overlay and locks every document it
 * writes; commit replays the writes through the storage's committed path in
 * order, so change events appear at commit time.
 */
import { Long, type Document } from 'bson';
import { Codes, MongoCommandError, writeConflict } from './errors';
import { toNumber } from './numbers';
import type { Collection } from './storage/collection';
import type { DocWrite, LockHolder, Storage } from './storage/engine';

export function lsidKey(lsid: Document | undefined): string | undefined {
  const id = lsid?.id as { buffer?: Uint8Array; toString(enc?: string): string } | undefined;
  if (!id) return undefined;
  return id.buffer ? Buffer.from(id.buffer).toString('hex') : String(id);
}

function txnNum(v: unknown): number {
  return toNumber(v);
}

let nextTxnId = 1;

export class Transaction implements LockHolder {
  readonly id = `txn${nextTxnId++}`;
  state: 'active' | 'committed' | 'aborted' = 'active';
  /** ns -> _id key -> document (null: deleted by this transaction). */
  readonly overlay = new Map<string, Map<string, Document | null>>();
  readonly ops: DocWrite[] = [];
  /** Collections this transaction created (ns -> collection), registered with the storage at commit. */
  readonly pendingCollections = new Map<string, Collection>();
  readonly finished: Promise<void>;
  abortReason: string | undefined;
  timer: NodeJS.Timeout | undefined;
  private resolveFinished!: () => void;

  constructor(
    readonly lsid: Document,
    readonly txnNumber: number,
    readonly snapshot: number,
  ) {
    this.finished = new Promise((r) => (this.resolveFinished = r));
  }

  overlayFor(ns: string): Map<string, Document | null> | undefined {
    return this.overlay.get(ns);
  }

  markFinished(state: 'committed' | 'aborted'): void {
    this.state = state;
    if (this.timer) clearTimeout(this.timer);
    this.resolveFinished();
  }
}

interface SessionState {
  txn?: Transaction;
  /**
   * Highest txnNumber seen for retryable writes and its recorded reply; for an `update`, the
   * statements that wrote, by index (see executedStatements).
   */
  retry?: { txnNumber: number; reply: Document | undefined; statements?: Map<number, Document> };
}

/**
 * A logical session as mongod's LogicalSessionCache holds it (LogicalSessionRecord: `_id` {id,
 * uid}, `lastUse`); `endedAt` marks a session named by endSessions, which the cache drops at its
 * next refresh.
 */
export interface LocalSession {
  id: unknown;
  lastUse: Date;
  endedAt?: number;
}

/** logicalSessionRefreshMillis' default (5 minutes): ended sessions leave the cache at the next refresh. */
const SESSION_REFRESH_MS = 5 * 60 * 1000;

export class TransactionManager {
  private readonly sessions = new Map<string, SessionState>();
  /** Every session a command named (LogicalSessionCache::vivify, initializeOperationSessionInfo). */
  private readonly logicalSessions = new Map<string, LocalSession>();
  transactionLifetimeLimitSeconds = 60;

  constructor(private readonly storage: Storage) {
    storage.oldestSnapshot = () => {
      let min: number | undefined;
      for (const s of this.sessions.values()) {
        if (s.txn?.state === 'active' && (min === undefined || s.txn.snapshot < min)) min = s.txn.snapshot;
      }
      return min;
    };
  }

  private session(lsid: Document): SessionState {
    const k = lsidKey(lsid)!;
    let s = this.sessions.get(k);
    if (!s) this.sessions.set(k, (s = {}));
    return s;
  }

  /**
   * Resolves the transaction a command belongs to (`autocommit: false`), starting
   * one on `startTransaction`. Mirrors mongod's NoSuchTransaction rules.
   */
  forCommand(cmd: Document, commandName: string): Transaction {
    const lsid = cmd.lsid as Document | undefined;
    if (!lsid || cmd.txnNumber === undefined) {
      throw new MongoCommandError(Codes.InvalidOptions, 'Transaction commands require lsid and txnNumber');
    }
    const n = txnNum(cmd.txnNumber);
    const s = this.session(lsid);
    const cur = s.txn;
    // TransactionParticipant keeps one active txnNumber per session for transactions and retryable
    // writes alike (kUninitializedTxnNumber, -1, before the first).
    const active = Math.max(cur?.txnNumber ?? -1, s.retry?.txnNumber ?? -1);
    if (cmd.startTransaction) {
      // _verifyCanBeginMultiDocumentTransaction (src/mongo/db/transaction/transaction_participant.cpp):
      // only a shard server may start a transaction again at the active number; on a replica set it
      // is ConflictingOperationInProgress, whatever that number's state (running, committed,
      // aborted, or a retryable write's).
      if (n === active) {
        throw new MongoCommandError(Codes.ConflictingOperationInProgress, 'Only servers in a sharded cluster can start a new transaction at the active transaction number');
      }
      if (cur && cur.txnNumber >= n) {
        throw new MongoCommandError(Codes.TransactionTooOld, `Cannot start transaction ${n} on session because a newer transaction ${cur.txnNumber} has already started`);
      }
      if (cur?.state === 'active') this.abort(cur, 'superseded by a newer transaction');
      const txn = new Transaction(lsid, n, this.storage.seq);
      txn.timer = setTimeout(() => this.abort(txn, 'transactionLifetimeLimitSeconds exceeded'), this.transactionLifetimeLimitSeconds * 1000);
      txn.timer.unref();
      s.txn = txn;
      return txn;
    }
    // _continueMultiDocumentTransaction: a number above the active one (or the active number of a
    // retryable write) continues nothing. (A number below it is TransactionTooOld on mongod, with the
    // session rendered in the message; that rendering is not sourced here, so it keeps the older
    // answer below.)
    if (n > active || (n === active && (!cur || cur.txnNumber !== n))) {
      throw new MongoCommandError(
        Codes.NoSuchTransaction,
        `Given transaction number ${n} does not match any in-progress transactions. The active transaction number is ${active}`,
        { errorLabels: ['TransientTransactionError'] },
      );
    }
    if (!cur || cur.txnNumber !== n) throw noSuchTransaction(n);
    if (cur.state === 'aborted') throw noSuchTransaction(n);
    if (cur.state === 'committed' && commandName !== 'commitTransaction') {
      throw new MongoCommandError(Codes.TransactionCommitted, `Transaction ${n} has been committed.`);
    }
    return cur;
  }

  commit(txn: Transaction): void {
    if (txn.state === 'committed') return; // commitTransaction is idempotent on retry
    if (txn.state === 'aborted') throw noSuchTransaction(txn.txnNumber);
    // Safety net: never let a commit overwrite another document's unique index entry.
    // Writes check this up front (non-transactional writes wait for a transaction
    // holding a clashing key), so reaching it means a race the checks missed: the
    // transaction fails as mongod reports lost races, with WriteConflict.
    const clash = this.commitClash(txn);
    if (clash) {
      this.abort(txn, `unique index clash at commit: ${clash.message}`);
      throw writeConflict();
    }
    // The collections the transaction created and its writes are one applyOps entry: one cluster time.
    this.storage.atOneTime(() => {
      for (const coll of txn.pendingCollections.values()) {
        if (!this.storage.adoptCollection(coll, { txnNumber: Long.fromNumber(txn.txnNumber), lsid: txn.lsid })) {
          // Created outside while the transaction ran: mongod's catalog write conflicts the same way.
          this.abort(txn, `collection ${coll.ns} was created outside the transaction`);
          throw writeConflict();
        }
      }
      for (const op of txn.ops) {
        this.storage.locks.delete(this.storage.lockKey(op.coll, op.key));
      }
      txn.markFinished('committed');
      this.storage.commitAll(txn.ops, { txnNumber: Long.fromNumber(txn.txnNumber), lsid: txn.lsid });
    });
    this.storage.pruneHistory();
  }

  /** The DuplicateKey error the transaction's final writes would cause against committed state, if any. */
  private commitClash(txn: Transaction): MongoCommandError | undefined {
    for (const op of txn.ops) {
      const ov = txn.overlay.get(op.coll.ns);
      const after = ov?.get(op.key);
      if (!after) continue;
      for (const idx of op.coll.indexes) {
        if (!idx.spec.unique) continue;
        const owner = idx.conflictOwner(idx.entries(after), op.key);
        // An owner the transaction itself rewrote releases (or was checked for) the entry.
        if (owner !== undefined && !ov?.has(owner)) return idx.duplicateKeyError(op.coll.ns, after);
      }
    }
    return undefined;
  }

  /**
   * The running transaction (other than `self`) whose uncommitted documents hold
   * one of `after`'s unique index keys. A non-transactional write waits for it,
   * as mongod's write blocks on the transaction's index key, then re-checks.
   */
  uncommittedUniqueHolder(coll: Collection, key: string, after: Document): Transaction | undefined {
    const uniques = coll.indexes.filter((i) => i.spec.unique);
    if (!uniques.length) return undefined;
    for (const s of this.sessions.values()) {
      const t = s.txn;
      if (!t || t.state !== 'active') continue;
      const ov = t.overlay.get(coll.ns);
      if (!ov) continue;
      for (const idx of uniques) {
        const entries = idx.entries(after);
        if (!entries.length) continue;
        for (const [k, d] of ov) if (k !== key && d && idx.entries(d).some((e) => entries.includes(e))) return t;
      }
    }
    return undefined;
  }

  abort(txn: Transaction, reason = 'aborted'): void {
    if (txn.state !== 'active') return;
    for (const op of txn.ops) {
      const lk = this.storage.lockKey(op.coll, op.key);
      if (this.storage.locks.get(lk) === txn) this.storage.locks.delete(lk);
    }
    txn.abortReason = reason;
    txn.markFinished('aborted');
    this.storage.pruneHistory();
  }

  /** A transactional document write: conflict checks, lock, overlay. */
  write(txn: Transaction, w: DocWrite): void {
    const { coll, key } = w;
    const lk = this.storage.lockKey(coll, key);
    const holder = this.storage.locks.get(lk);
    if (holder && holder !== txn) throw writeConflict();
    if (!holder && coll.lastWriteSeq(key) > txn.snapshot) throw writeConflict();
    if (w.after) this.checkUniqueInTxn(txn, coll, key, w.after);
    this.storage.locks.set(lk, txn);
    let ov = txn.overlay.get(coll.ns);
    if (!ov) txn.overlay.set(coll.ns, (ov = new Map()));
    ov.set(key, w.after);
    txn.ops.push(w);
  }

  private checkUniqueInTxn(txn: Transaction, coll: Collection, key: string, after: Document): void {
    const ov = txn.overlay.get(coll.ns);
    for (const idx of coll.indexes) {
      if (!idx.spec.unique) continue;
      const entries = idx.entries(after);
      if (!entries.length) continue;
      // Committed holders of the same key.
      const owner = idx.conflictOwner(entries, key);
      if (owner !== undefined) {
        const mine = ov?.get(owner);
        if (ov?.has(owner)) {
          if (mine && idx.entries(mine).some((e) => entries.includes(e))) throw idx.duplicateKeyError(coll.ns, after);
        } else if (coll.getAt(owner, txn.snapshot)) {
          throw idx.duplicateKeyError(coll.ns, after);
        } else {
          throw writeConflict();
        }
      }
      // Own uncommitted documents.
      if (ov) {
        for (const [k, d] of ov) {
          if (k !== key && d && idx.entries(d).some((e) => entries.includes(e))) throw idx.duplicateKeyError(coll.ns, after);
        }
      }
      // Other running transactions' uncommitted documents.
      for (const s of this.sessions.values()) {
        const other = s.txn;
        if (!other || other === txn || other.state !== 'active') continue;
        const oov = other.overlay.get(coll.ns);
        if (!oov) continue;
        for (const [k, d] of oov) if (k !== key && d && idx.entries(d).some((e) => entries.includes(e))) throw writeConflict();
      }
    }
  }

  // ---- retryable writes ----------------------------------------------------
  /** The recorded reply if this (lsid, txnNumber) write already ran. */
  retryResult(cmd: Document): Document | undefined {
    const lsid = cmd.lsid as Document | undefined;
    if (!lsid || cmd.txnNumber === undefined) return undefined;
    const s = this.session(lsid);
    const n = txnNum(cmd.txnNumber);
    // _beginOrContinueRetryableWrite (transaction_participant.cpp): the active number belongs to a
    // transaction, not to a retryable write.
    if (s.txn && s.txn.txnNumber === n && (!s.retry || s.retry.txnNumber < n)) {
      throw new MongoCommandError(Codes.IncompleteTransactionHistory, 'Cannot retry a retryable write that has been converted into a transaction');
    }
    if (s.retry && s.retry.txnNumber === n) return s.retry.reply;
    if (s.retry && s.retry.txnNumber > n) {
      throw new MongoCommandError(Codes.TransactionTooOld, `Retryable write with txnNumber ${n} is prohibited on session because a newer retryable write with txnNumber ${s.retry.txnNumber} has already started on this session.`);
    }
    return undefined;
  }

  /**
   * The statements of a retryable `update` (lsid, txnNumber) that already wrote, by index, each
   * with the result mongod rebuilds from its oplog entry (parseOplogEntryForUpdate in
   * src/mongo/db/query/write_ops/write_ops_retryability.cpp); performUpdates answers those and
   * runs the others (write_ops_exec.cpp, checkStatementExecutedAndFetchOplogEntry per stmtId). The
   * map is the session's own record: the handler adds the statements it runs that write.
   */
  executedStatements(cmd: Document): Map<number, Document> | undefined {
    const lsid = cmd.lsid as Document | undefined;
    if (!lsid || cmd.txnNumber === undefined) return undefined;
    this.retryResult(cmd); // TransactionTooOld for an older txnNumber
    const s = this.session(lsid);
    const n = txnNum(cmd.txnNumber);
    if (!s.retry || s.retry.txnNumber !== n || !s.retry.statements) s.retry = { txnNumber: n, reply: undefined, statements: new Map() };
    return s.retry.statements;
  }

  /** `reply` undefined: the write changed nothing, so a retry with this txnNumber runs it again. */
  recordRetry(cmd: Document, reply: Document | undefined): void {
    const lsid = cmd.lsid as Document | undefined;
    if (!lsid || cmd.txnNumber === undefined) return;
    this.session(lsid).retry = { txnNumber: txnNum(cmd.txnNumber), reply };
  }

  /** Registers the session of a command carrying `lsid` (first use; vivify adds a record only when absent). */
  touchSession(lsid: Document): void {
    const k = lsidKey(lsid);
    if (!k) return;
    const s = this.logicalSessions.get(k);
    if (!s) this.logicalSessions.set(k, { id: lsid.id, lastUse: new Date() });
    else if (s.endedAt !== undefined) s.endedAt = undefined;
  }

  /** The sessions $listLocalSessions reports: those in the cache (ended ones until the next refresh). */
  localSessions(now = Date.now()): LocalSession[] {
    for (const [k, s] of this.logicalSessions) if (s.endedAt !== undefined && now - s.endedAt >= SESSION_REFRESH_MS) this.logicalSessions.delete(k);
    return [...this.logicalSessions.values()];
  }

  endSessions(ids: Document[]): void {
    for (const lsid of ids) {
      const k = lsidKey(lsid);
      if (!k) continue;
      const ls = this.logicalSessions.get(k);
      if (ls) ls.endedAt = Date.now();
      const s = this.sessions.get(k);
      if (s?.txn?.state === 'active') this.abort(s.txn, 'session ended');
      this.sessions.delete(k);
    }
  }

  /** Aborts everything (server stop). */
  close(): void {
    for (const s of this.sessions.values()) if (s.txn?.state === 'active') this.abort(s.txn, 'server shutting down');
    this.sessions.clear();
    this.logicalSessions.clear();
  }
}

export function noSuchTransaction(n: number): MongoCommandError {
  return new MongoCommandError(Codes.NoSuchTransaction, `Transaction with { txnNumber: ${n} } has been aborted.`, {
    errorLabels: ['TransientTransactionError'],
  });
}
