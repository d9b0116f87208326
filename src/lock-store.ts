/**
 * The lock algorithm: every MongoDB operation on the lock collection, each written once.
 *
 * A lock is one record in the sibling collection, keyed by the locked document's `_id`:
 *   { _id, owner, token, acquiredAt, expiresAt, lastWriteAt? }
 * Why this is race-free:
 *  - `_id` is unique in every MongoDB collection, so at most one record per document exists,
 *    and every operation below addresses it through the `_id` index (no scans).
 *  - Each operation is a single-document atomic command; its filter is evaluated against the
 *    record as it is when the write is applied (MongoDB re-checks the filter after a write
 *    conflict), so "check the holder, then write" never splits across two commands.
 *  - Expiry is always compared with `$$NOW`, the server's clock at the command, never with
 *    the client's clock. Records stay meaningful after expiry until the TTL index on
 *    `expiresAt` deletes them (within about a minute); every filter treats an expired record
 *    as free, so nobody waits for the TTL monitor.
 */
import { randomBytes } from 'node:crypto';
import type { mongo } from 'mongoose';

type ClientSession = mongo.ClientSession;
type Collection<T extends mongo.Document> = mongo.Collection<T>;
type Document = mongo.Document;
import { LockExpiredError, LockNotHeldError, LockedError } from './errors';
import { estimatedServerNow, type HeldLockState } from './held-lock';

export interface LockRecord {
  _id: unknown;
  /** The owner key (hashed owner unless `ownerStorage: 'plain'`). */
  owner: string;
  token: string;
  acquiredAt: Date;
  expiresAt: Date;
  /** When a guarded save last verified the lock inside a transaction. */
  lastWriteAt?: Date;
}

export interface Grant {
  token: string;
  acquiredAt: Date;
  expiresAt: Date;
}

/** Public view of a lock: no owner, no token. */
export interface LockInfo {
  documentId: unknown;
  acquiredAt: Date;
  expiresAt: Date;
}

/** `$expr` that is true while a record is unexpired by the server's clock. */
const UNEXPIRED = { $expr: { $gt: ['$expiresAt', '$$NOW'] } } as const;
const EXPIRED = { $expr: { $lte: ['$expiresAt', '$$NOW'] } } as const;

/** How often acquire retries when the holder vanished between our attempt and our read. */
const ACQUIRE_ATTEMPTS = 3;

export function newLockToken(): string {
  return randomBytes(16).toString('base64url');
}

function isDuplicateKey(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === 11000;
}

export class LockStore {
  constructor(private readonly locks: Collection<Document>) {}

  /**
   * Takes the lock for `ownerKey` if it is free, expired, or already held by the same owner
   * (then it is renewed under a new token). One `findAndModify` with upsert:
   *  - a record that is expired or ours matches the filter and is overwritten atomically;
   *  - no record: the upsert inserts one (seeded with `_id` from the filter's equality);
   *  - a record held by another owner and unexpired does not match, so the upsert tries to
   *    insert a second record with the same `_id` and the unique `_id` index refuses it
   *    (E11000). Because the filter is not pure `_id` equality, the server does not retry
   *    that upsert as an update, so the duplicate-key error is exactly "someone else holds it".
   * Two racing acquirers of a free or expired lock: the server applies one write first; the
   * other re-evaluates the filter against the new record, no longer matches, and gets E11000.
   */
  async acquire(documentId: unknown, ownerKey: string, ttl: number): Promise<Grant> {
    for (let attempt = 1; ; attempt++) {
      const token = newLockToken();
      try {
        const record = await this.locks.findOneAndUpdate(
          { _id: documentId, $or: [{ owner: ownerKey }, EXPIRED] } as Document,
          [{ $set: { owner: ownerKey, token, acquiredAt: '$$NOW', expiresAt: { $add: ['$$NOW', ttl] } } }],
          { upsert: true, returnDocument: 'after', projection: { token: 1, acquiredAt: 1, expiresAt: 1 } },
        );
        if (!record || record.token !== token) {
          throw new Error('mongoose-pessimistic-lock: the server did not return the lock record it just wrote');
        }
        return { token, acquiredAt: record.acquiredAt as Date, expiresAt: record.expiresAt as Date };
      } catch (error) {
        if (!isDuplicateKey(error)) throw error;
        // Held by someone else, or it was at the instant of our write. Read its expiry for the error.
        const holder = await this.findActive(documentId);
        if (holder) throw new LockedError(documentId, holder.expiresAt);
        // Released or expired in the meantime: try again, a bounded number of times.
        if (attempt >= ACQUIRE_ATTEMPTS) throw new LockedError(documentId, undefined, ' It changed hands several times during this call.');
      }
    }
  }

  /**
   * Releases this acquisition only: the filter names the token (so nobody else's lock is ever
   * deleted) and requires the record to be unexpired by server time. When nothing matched,
   * `explainLoss` says why (and removes our own expired record).
   */
  async release(state: HeldLockState, session?: ClientSession): Promise<void> {
    const { documentId, token } = state.lock;
    const result = await this.locks.deleteOne({ _id: documentId, token, ...UNEXPIRED } as Document, { session });
    if (result.deletedCount === 1) return;
    throw await this.explainLoss(state, session);
  }

  /**
   * Confirms that this acquisition is still current, for a guarded save.
   * Inside a transaction it writes the lock record (`lastWriteAt`), which makes the check and
   * the document write commit together: a concurrent takeover either conflicts with the
   * transaction (WriteConflict) or waits for it to commit. Outside a transaction it reads the
   * record with the server's time; the save follows in a separate command (see README, Limits).
   */
  async verify(state: HeldLockState, session?: ClientSession): Promise<void> {
    const { documentId, token } = state.lock;
    if (session?.inTransaction()) {
      const result = await this.locks.updateOne(
        { _id: documentId, token, ...UNEXPIRED } as Document,
        [{ $set: { lastWriteAt: '$$NOW' } }],
        { session },
      );
      if (result.matchedCount === 1) return;
      throw await this.explainLoss(state, session);
    }
    const record = await this.locks.findOne({ _id: documentId } as Document, {
      projection: { token: 1, expiresAt: 1, now: '$$NOW' },
      session,
    });
    if (record && record.token === token && (record.expiresAt as Date) > (record.now as Date)) return;
    throw await this.explainLoss(state, session, record);
  }

  /** The unexpired lock on a document, if any. */
  async findActive(documentId: unknown, session?: ClientSession): Promise<LockInfo | null> {
    const record = await this.locks.findOne({ _id: documentId, ...UNEXPIRED } as Document, {
      projection: { acquiredAt: 1, expiresAt: 1 },
      session,
    });
    return record ? { documentId, acquiredAt: record.acquiredAt as Date, expiresAt: record.expiresAt as Date } : null;
  }

  /** Releases every unexpired lock of one owner (one `deleteMany` through the owner index). */
  async releaseAll(ownerKey: string): Promise<number> {
    const result = await this.locks.deleteMany({ owner: ownerKey, ...UNEXPIRED } as Document);
    return result.deletedCount;
  }

  /** Administrative release of whoever holds the lock. */
  async forceRelease(documentId: unknown): Promise<boolean> {
    const result = await this.locks.deleteOne({ _id: documentId, ...UNEXPIRED } as Document);
    return result.deletedCount === 1;
  }

  /**
   * Works out why an acquisition is no longer current, for the error the caller gets.
   * Our own expired record is deleted on the way (it would only wait for the TTL monitor).
   */
  private async explainLoss(state: HeldLockState, session?: ClientSession, known?: Document | null): Promise<LockNotHeldError> {
    const { documentId, token, expiresAt } = state.lock;
    const ownExpired = await this.locks.deleteOne({ _id: documentId, token, ...EXPIRED } as Document, { session });
    let error: LockNotHeldError;
    if (ownExpired.deletedCount === 1) {
      error = new LockExpiredError(documentId, expiresAt);
    } else {
      const record = known !== undefined ? known : await this.locks.findOne({ _id: documentId } as Document, { projection: { token: 1 }, session });
      if (record && record.token !== token) error = new LockNotHeldError(documentId, 'taken_over');
      else if (record) error = new LockExpiredError(documentId, expiresAt); // ours, expired at the instant of the check
      else if (estimatedServerNow(state) >= expiresAt.getTime()) error = new LockExpiredError(documentId, expiresAt);
      else error = new LockNotHeldError(documentId, 'released');
    }
    state.lost = error.reason;
    return error;
  }
}
