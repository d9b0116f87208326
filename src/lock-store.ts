/**
 * The lock algorithm: every MongoDB operation on the lock collection, each written once.
 *
 * A lock is one record in the sibling collection, keyed by the locked document's `_id`:
 *   { _id, owner, token, fence, acquiredAt, expiresAt, lastWriteAt? }
 * Releasing does not delete the record: it expires it and clears owner and token, so the
 * record keeps the document's fencing counter. The TTL index removes records `purgeAfter`
 * after they expired.
 * Why this is race-free:
 *  - `_id` is unique in every MongoDB collection, so at most one record per document exists,
 *    and every operation below addresses it through the `_id` index (no scans).
 *  - Each operation is a single-document atomic command; its filter is evaluated against the
 *    record as it is when the write is applied (MongoDB re-checks the filter after a write
 *    conflict), so "check the holder, then write" never splits across two commands.
 *  - Expiry is always compared with `$$NOW`, the server's clock at the command, never with
 *    the client's clock. Every filter treats an expired record as free, so nobody waits for
 *    the TTL monitor, which only reclaims storage later.
 *  - Fencing tokens: each acquisition sets `fence` to the larger of the previous fence + 1 and
 *    the server's `$$NOW` in microseconds. While the record exists the counter only grows; once
 *    the TTL monitor purged it (at least `purgeAfter` after its last expiry), the server clock
 *    has moved past every fence it ever issued for that document.
 */
import { randomBytes } from 'node:crypto';
import type { mongo } from 'mongoose';
import { LockExpiredError, LockNotHeldError, LockedError } from './errors';
import { estimatedServerNow, type HeldLockState } from './held-lock';

type ClientSession = mongo.ClientSession;
type Collection<T extends mongo.Document> = mongo.Collection<T>;
type Document = mongo.Document;

export interface LockRecord {
  _id: unknown;
  /** The owner key (hashed owner unless `ownerStorage: 'plain'`); null once released. */
  owner: string | null;
  /** Unique to one acquisition; null once released. */
  token: string | null;
  /** Fencing token: strictly increasing per document across acquisitions. */
  fence: number;
  acquiredAt: Date;
  expiresAt: Date;
  /** When a guarded save last verified the lock inside a transaction. */
  lastWriteAt?: Date;
}

export interface Grant {
  token: string;
  fence: number;
  acquiredAt: Date;
  expiresAt: Date;
}

/** Public view of a lock: no owner, no token. */
export interface LockInfo {
  documentId: unknown;
  acquiredAt: Date;
  expiresAt: Date;
  /** Milliseconds until it expires, by the server's clock at the time of the read. */
  remainingMs: number;
}

/** A lock that stops a write: whose document, and (when still known) when it expires. */
export interface Blocker {
  documentId: unknown;
  expiresAt?: Date;
  remainingMs?: number;
}

/** `$expr` that is true while a record is unexpired by the server's clock. */
const UNEXPIRED = { $expr: { $gt: ['$expiresAt', '$$NOW'] } } as const;
const EXPIRED = { $expr: { $lte: ['$expiresAt', '$$NOW'] } } as const;
/** Pipeline stage that ends an acquisition: expired now, no owner, fence kept. */
const RELEASE = [{ $set: { expiresAt: '$$NOW', owner: null, token: null } }];
/** Next fence: previous + 1, but never below the server clock in microseconds. */
const NEXT_FENCE = { $max: [{ $add: [{ $ifNull: ['$fence', 0] }, 1] }, { $multiply: [{ $toLong: '$$NOW' }, 1000] }] };

/** How often acquire retries when the holder vanished between our attempt and our read. */
const ACQUIRE_ATTEMPTS = 3;

export function newLockToken(): string {
  return randomBytes(16).toString('base64url');
}

const NO_DUPLICATE = Symbol('no duplicate key');

/**
 * Which of `ids` a failed bulk upsert could not claim. Outside transactions mongod reports
 * per-operation writeErrors (with the operation's index); inside a transaction the first write
 * error aborts it and comes back as the command's error, naming the key in `keyValue`.
 */
function duplicateKeyTarget(error: unknown, ids: unknown[]): unknown {
  const failure = error as { code?: number; keyValue?: { _id?: unknown }; writeErrors?: { code?: number; index?: number }[] };
  const writeError = failure.writeErrors?.find((e) => e.code === 11000);
  if (writeError && writeError.index !== undefined) return ids[writeError.index];
  if (failure.code === 11000) return failure.keyValue && '_id' in failure.keyValue ? failure.keyValue._id : ids[0];
  return NO_DUPLICATE;
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
          [{ $set: { owner: ownerKey, token, fence: NEXT_FENCE, acquiredAt: '$$NOW', expiresAt: { $add: ['$$NOW', ttl] } } }],
          { upsert: true, returnDocument: 'after', projection: { token: 1, fence: 1, acquiredAt: 1, expiresAt: 1 } },
        );
        if (!record || record.token !== token) {
          throw new Error('mongoose-pessimistic-lock: the server did not return the lock record it just wrote');
        }
        return { token, fence: Number(record.fence), acquiredAt: record.acquiredAt as Date, expiresAt: record.expiresAt as Date };
      } catch (error) {
        if (!isDuplicateKey(error)) throw error;
        // Held by someone else, or it was at the instant of our write. Read its expiry for the error.
        const holder = await this.findActive(documentId);
        if (holder) throw new LockedError(documentId, holder.expiresAt, '', holder.remainingMs);
        // Released or expired in the meantime: try again, a bounded number of times.
        if (attempt >= ACQUIRE_ATTEMPTS) throw new LockedError(documentId, undefined, ' It changed hands several times during this call.');
      }
    }
  }

  /**
   * Releases this acquisition only: the filter names the token (so nobody else's lock is ever
   * released) and requires the record to be unexpired by server time. When nothing matched,
   * `explainLoss` says why.
   */
  async release(state: HeldLockState, session?: ClientSession): Promise<void> {
    const { documentId, token } = state.lock;
    const result = await this.locks.updateOne({ _id: documentId, token, ...UNEXPIRED } as Document, RELEASE, { session });
    if (result.matchedCount === 1) return;
    throw await this.explainLoss(state, session);
  }

  /**
   * Extends this acquisition to `ttl` from now (server time), only while it is still current.
   * Returns the new expiry.
   */
  async extend(state: HeldLockState, ttl: number): Promise<Date> {
    const { documentId, token } = state.lock;
    const record = await this.locks.findOneAndUpdate(
      { _id: documentId, token, ...UNEXPIRED } as Document,
      [{ $set: { expiresAt: { $add: ['$$NOW', ttl] } } }],
      { returnDocument: 'after', projection: { expiresAt: 1 } },
    );
    if (record) return record.expiresAt as Date;
    throw await this.explainLoss(state);
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
    throw this.lossFrom(state, record);
  }

  /** The unexpired lock on a document, if any, with the server's view of its remaining time. */
  async findActive(documentId: unknown, session?: ClientSession): Promise<LockInfo | null> {
    const record = await this.locks.findOne({ _id: documentId, ...UNEXPIRED } as Document, {
      projection: { acquiredAt: 1, expiresAt: 1, now: '$$NOW' },
      session,
    });
    if (!record) return null;
    const expiresAt = record.expiresAt as Date;
    return { documentId, acquiredAt: record.acquiredAt as Date, expiresAt, remainingMs: expiresAt.getTime() - (record.now as Date).getTime() };
  }

  /**
   * The first of `ids` locked (unexpired) by anyone but `ownerKey`, if any: one query through
   * the `_id` index.
   */
  async findBlocking(ids: unknown[], ownerKey: string | undefined, session?: ClientSession): Promise<Blocker | null> {
    const filter: Document = { _id: { $in: ids }, ...UNEXPIRED };
    if (ownerKey !== undefined) filter.owner = { $ne: ownerKey };
    const record = await this.locks.findOne(filter, { projection: { expiresAt: 1, now: '$$NOW' }, session });
    if (!record) return null;
    const expiresAt = record.expiresAt as Date;
    return { documentId: record._id, expiresAt, remainingMs: expiresAt.getTime() - (record.now as Date).getTime() };
  }

  /**
   * Inside a transaction: writes the lock record of every target that is free, expired or
   * held by `ownerKey` (creating an already-expired record where none exists), in one
   * unordered bulk write. A target held by someone else does not match its filter, so its
   * upsert fails on the unique `_id` index; that target is returned. Because every target's
   * record is now written by the transaction, an acquisition racing with it conflicts or
   * waits for the commit.
   */
  async claimForWrite(ids: unknown[], ownerKey: string | undefined, session: ClientSession): Promise<Blocker | null> {
    const holderMatch = ownerKey === undefined ? EXPIRED : { $or: [{ owner: ownerKey }, EXPIRED] };
    const touch = [{ $set: { lastWriteAt: '$$NOW', expiresAt: { $ifNull: ['$expiresAt', '$$NOW'] }, fence: { $ifNull: ['$fence', 0] } } }];
    try {
      await this.locks.bulkWrite(
        ids.map((id) => ({ updateOne: { filter: { _id: id, ...holderMatch } as Document, update: touch, upsert: true } })),
        { ordered: false, session },
      );
      return null;
    } catch (error) {
      const blocked = duplicateKeyTarget(error, ids);
      if (blocked === NO_DUPLICATE) throw error;
      // A write error aborts the transaction, so the holder's expiry is read outside it.
      return (await this.findActive(blocked)) ?? { documentId: blocked };
    }
  }

  /** Whether `ownerKey` holds an unexpired lock on the document. */
  async isHeldBy(documentId: unknown, ownerKey: string, session?: ClientSession): Promise<boolean> {
    const record = await this.locks.findOne({ _id: documentId, owner: ownerKey, ...UNEXPIRED } as Document, { projection: { _id: 1 }, session });
    return record !== null;
  }

  /** Releases every unexpired lock of one owner (one `updateMany` through the owner index). */
  async releaseAll(ownerKey: string): Promise<number> {
    const result = await this.locks.updateMany({ owner: ownerKey, ...UNEXPIRED } as Document, RELEASE);
    return result.modifiedCount;
  }

  /** Administrative release of whoever holds the lock. */
  async forceRelease(documentId: unknown): Promise<boolean> {
    const result = await this.locks.updateOne({ _id: documentId, ...UNEXPIRED } as Document, RELEASE);
    return result.modifiedCount === 1;
  }

  /** Reads the lock record and works out why an acquisition is no longer current. */
  private async explainLoss(state: HeldLockState, session?: ClientSession): Promise<LockNotHeldError> {
    const record = await this.locks.findOne({ _id: state.lock.documentId } as Document, { projection: { token: 1 }, session });
    return this.lossFrom(state, record);
  }

  /** The error for a lost acquisition, given its record as just read (or null if purged). */
  private lossFrom(state: HeldLockState, record: Document | null): LockNotHeldError {
    const { documentId, token, expiresAt } = state.lock;
    let error: LockNotHeldError;
    if (record && record.token === token) error = new LockExpiredError(documentId, expiresAt);
    else if (record && record.token !== null) error = new LockNotHeldError(documentId, 'taken_over');
    else if (!record && estimatedServerNow(state) >= expiresAt.getTime()) error = new LockExpiredError(documentId, expiresAt);
    else error = new LockNotHeldError(documentId, 'released');
    state.lost = error.reason;
    return error;
  }
}
