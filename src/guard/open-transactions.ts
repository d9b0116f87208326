/**
 * Which lock records are being written by a caller's transaction that is still open in this
 * process. Inside the caller's transaction the guard writes the lock records of the documents it
 * writes (claims, a holder's verify or release). A write of such a record from outside that
 * transaction (`Model.lock`, `unlock`, `extendLock`, `forceUnlock` ...) waits on the server until
 * the transaction ends (docs/mongodb-compatibility.md, R17: "A non-transactional (single
 * document) write should keep retrying when attempting to insert a document that conflicts with a
 * previous write done by a running transaction"; jstests/core/txns/write_conflicts_with_non_txns.js).
 * When the caller awaits that lock call inside its own transaction, the transaction never ends:
 * the caller deadlocks with itself until mongod's transactionLifetimeLimitSeconds (60 s by
 * default) aborts the transaction. The lock store asks this registry first and refuses such a call
 * at once (LockedByTransactionError); so does the guard before a write in a transaction of its own
 * (its claim would conflict with the open transaction on every retry). Only ids whose lock records
 * the guard actually wrote in the transaction are noted (a refused claim writes nothing).
 *
 * A transaction counts as open while the driver's Transaction object of that attempt is starting
 * or in progress (mongodb/lib/transactions.js, TxnState; a new object per startTransaction()),
 * and at most OPEN_TRANSACTION_LIMIT_MS after the guard first wrote in it: by then mongod's default
 * transactionLifetimeLimitSeconds has aborted it on the server, even if the application never
 * ended its session.
 */
import type { mongo } from 'mongoose';
import { idKey } from '../id-key';
import { monotonicNow } from '../lease';

/** mongod's default transactionLifetimeLimitSeconds (60), in milliseconds. */
export const OPEN_TRANSACTION_LIMIT_MS = 60_000;
const PRUNE_FROM = 1_024;

interface Entry {
  transaction: object;
  /**
   * monotonicNow() when the guard first wrote in it: the monotonic clock, never Date.now(), so a
   * wall-clock step (NTP, a resumed VM) cannot make an open transaction look 60 s old (or young).
   */
  since: number;
}

function open(entry: Entry, now: number): boolean {
  const state = (entry.transaction as { state?: unknown }).state;
  return (state === 'STARTING_TRANSACTION' || state === 'TRANSACTION_IN_PROGRESS') && now - entry.since < OPEN_TRANSACTION_LIMIT_MS;
}

export class CallerTransactions {
  private readonly entries = new Map<string, Entry[]>();
  private pruneAt = PRUNE_FROM;

  /**
   * Notes that the transaction running on `session` writes the lock records of `ids` in the lock
   * collection `scope` names (LockStore.scope: its deployment and namespace; a namespace alone
   * names a collection only within one deployment, and another deployment's server knows nothing
   * of this transaction).
   */
  note(scope: string, ids: unknown[], session: mongo.ClientSession): void {
    const transaction = (session as unknown as { transaction?: object }).transaction;
    if (!transaction) return;
    const now = monotonicNow();
    for (const id of ids) {
      const key = `${scope} ${idKey(id)}`;
      const list = this.entries.get(key);
      if (!list) this.entries.set(key, [{ transaction, since: now }]);
      else if (!list.some((entry) => entry.transaction === transaction)) list.push({ transaction, since: now });
    }
    if (this.entries.size >= this.pruneAt) {
      for (const [key, list] of this.entries) {
        const kept = list.filter((entry) => open(entry, now));
        if (kept.length === 0) this.entries.delete(key);
        else this.entries.set(key, kept);
      }
      this.pruneAt = Math.max(PRUNE_FROM, this.entries.size * 2);
    }
  }

  /** Whether no caller transaction is noted (the usual case): a caller can skip building the scope it would ask with. */
  get empty(): boolean {
    return this.entries.size === 0;
  }

  /** Whether an open caller transaction of this process has written the lock record of `id` in the lock collection `scope` names. */
  writing(scope: string, id: unknown): boolean {
    // Asked before every lock-record write: with no caller transaction noted (the usual case), no key to compute.
    if (this.entries.size === 0) return false;
    const key = `${scope} ${idKey(id)}`;
    const list = this.entries.get(key);
    if (!list) return false;
    const now = monotonicNow();
    const kept = list.filter((entry) => open(entry, now));
    if (kept.length === 0) this.entries.delete(key);
    else this.entries.set(key, kept);
    return kept.length > 0;
  }
}

/** One registry per process: every model and connection of a lock collection shares it. */
export const callerTransactions = new CallerTransactions();
