/**
 * Every error the plugin throws extends LockError and carries a stable `code`, so callers can
 * branch on `err.code` (or `instanceof`) without parsing messages. Messages say what happened
 * and what to do; none of them contains another owner's identity.
 * Each also carries the HTTP status a web app should answer with (`status` and `statusCode`,
 * the two names Express and http-errors read), so an unhandled LockedError becomes a 423, not
 * a 500 with a stack trace.
 */
import { CLOCK_DRIFT_FACTOR, CLOCK_DRIFT_MS, MIN_LEASE_MS } from './lease';

/** The stable `code` of every error the plugin throws: branch on it rather than on messages. */
export type LockErrorCode =
  | 'DATABASE_ERROR'
  | 'LOCKED'
  | 'LOCK_NOT_HELD'
  | 'LOCK_EXPIRED'
  | 'DOCUMENT_NOT_FOUND'
  | 'INVALID_ARGUMENT'
  | 'INVALID_OPTION'
  | 'CONFIGURATION';

/**
 * The base class of every error the plugin throws: a stable `code`, whether retrying can help
 * (`retryable`) and the HTTP status a web app should answer with (`status`, `statusCode`).
 *
 * @example
 * ```ts
 * try {
 *   await Item.lock(id, owner);
 * } catch (error) {
 *   if (error instanceof LockError && error.retryable) scheduleRetry();
 *   else throw error;
 * }
 * ```
 */
export class LockError extends Error {
  /** What kind of error this is, stable across versions (see LockErrorCode). */
  readonly code: LockErrorCode;
  /**
   * Whether the same call may succeed if tried again as it is: true for a lock held by someone
   * else (later) and for transient database faults; false when the input, the lock's state or
   * the database's answer will not change by retrying.
   */
  readonly retryable: boolean;
  /**
   * The HTTP status that describes this error: 423 locked by someone else, 409 the caller's lock
   * is gone, 404 no such document, 400 bad input, 503 a transient database fault, 500 otherwise.
   */
  readonly status: number;
  /** The same as `status` (the name Node's `http` and some frameworks read). */
  readonly statusCode: number;

  constructor(code: LockErrorCode, message: string, options?: { cause?: unknown; retryable?: boolean; status?: number }) {
    super(message, options?.cause === undefined ? undefined : { cause: options.cause });
    this.name = new.target.name;
    this.code = code;
    this.retryable = options?.retryable ?? false;
    this.status = options?.status ?? 500;
    this.statusCode = this.status;
  }
}

/** Someone else holds an unexpired lock on the document. */
export class LockedError extends LockError {
  /** The locked document's `_id`. */
  readonly documentId: unknown;
  /** When the other owner's lock expires (server time), if known. */
  readonly expiresAt: Date | undefined;
  /** Milliseconds until that lock expires, measured on the server's clock, if known. */
  readonly retryAfterMs: number | undefined;
  /**
   * The display label the holder gave (`Model.lock(id, owner, { label })`), on every refusal the
   * holder's lock caused (a lock call, a wait that ran out, a guarded write) when the holder gave
   * one; otherwise null. Never the owner. It is user data: escape it before putting it in HTML.
   * It is not part of `message`.
   */
  readonly label: string | null;

  /** `cause`: for a wait ended by a timed-out AbortSignal, the signal's reason (a TimeoutError). */
  constructor(documentId: unknown, expiresAt: Date | undefined, detail = '', retryAfterMs?: number, label: string | null = null, cause?: unknown) {
    const until = expiresAt ? ` until ${expiresAt.toISOString()} unless its holder releases or renews it` : '';
    super(
      'LOCKED',
      `Document ${describeId(documentId)} is locked by another owner${until}.${detail} ` +
        'Try again later, or wait for the holder to release it.',
      { retryable: true, status: 423, cause },
    );
    this.documentId = documentId;
    this.expiresAt = expiresAt;
    this.retryAfterMs = retryAfterMs === undefined ? undefined : Math.max(0, retryAfterMs);
    this.label = label;
  }
}

/** Why a lock the caller thought it held is not held. */
export type LockLossReason =
  /** The document instance never carried a lock (it was not returned by `Model.lock`). */
  | 'not_locked'
  /** The lock was released: by `unlock()`, `saveAndUnlock()`, `releaseAllFor()` or `forceUnlock()`. */
  | 'released'
  /**
   * A later acquisition took the lock: another owner's after it expired, or the same owner's
   * newer `lock()` call (another tab of the same session). `LockNotHeldError.sameOwner` says which
   * when it is known.
   */
  | 'taken_over'
  /** The lock's TTL passed and nobody has taken it yet. */
  | 'expired'
  /**
   * The lock record is gone although nothing released the lock: the lock collection was dropped
   * or the record deleted by hand (or, for a ticket, purged by the TTL index after it expired or
   * was released). A released record purged by the TTL index is 'released' (lock-loss.ts, lossOf).
   */
  | 'vanished';

/** The caller does not hold the lock it tried to use. */
export class LockNotHeldError extends LockError {
  /** The document whose lock is not held (its `_id`). */
  readonly documentId: unknown;
  /** Why the lock is not held: never taken, released, taken over or expired. */
  readonly reason: LockLossReason;
  /**
   * For `reason: 'taken_over'`, whose acquisition took the lock over: `true` the caller's own
   * owner's (the same owner locked the document again, for example the same session in another
   * browser tab), `false` another owner's, `undefined` when it is not known (that acquisition has
   * since been released, or the refusal did not come from a ticket). The server compares the owner,
   * so no owner ever reaches this process. Always `undefined` for the other reasons.
   */
  readonly sameOwner: boolean | undefined;

  constructor(
    documentId: unknown,
    reason: LockLossReason,
    message?: string,
    code: LockErrorCode = 'LOCK_NOT_HELD',
    options?: { retryable?: boolean; status?: number; sameOwner?: boolean },
  ) {
    const { sameOwner: given, ...http } = options ?? {};
    const sameOwner = reason === 'taken_over' ? given : undefined;
    super(code, message ?? LockNotHeldError.describe(documentId, reason, sameOwner), { status: 409, ...http });
    this.documentId = documentId;
    this.reason = reason;
    this.sameOwner = sameOwner;
  }

  private static describe(documentId: unknown, reason: LockLossReason, sameOwner: boolean | undefined): string {
    const id = describeId(documentId);
    switch (reason) {
      case 'not_locked':
        return `Document ${id} does not carry a lock: get it from Model.lock(id, owner) before saving or unlocking it.`;
      case 'released':
        return `The lock on document ${id} was already released; nothing was written. Lock it again to continue.`;
      case 'taken_over':
        if (sameOwner === true) {
          return (
            `The lock on document ${id} was locked again by the same owner (for example in another browser tab), and that newer acquisition holds it now; ` +
            'nothing was written with this older one. Continue where the document was opened last, or lock it again here.'
          );
        }
        return `The lock on document ${id} is no longer yours: it was taken over by a newer acquisition; nothing was written. Reload the document and lock it again.`;
      case 'expired':
        return `The lock on document ${id} expired; nothing was written. Lock it again (a longer ttl may help).`;
      case 'vanished':
        return `The lock record of document ${id} is gone although the lock had not expired: the lock collection was dropped or the record deleted. Nothing was written; lock it again.`;
    }
  }
}

/** The lock's TTL passed (by the server's clock); nobody has taken it over yet. */
export class LockExpiredError extends LockNotHeldError {
  /** When the lock expired (server time), if known. */
  readonly expiredAt: Date | undefined;

  constructor(documentId: unknown, expiredAt: Date | undefined, message?: string, options?: { retryable?: boolean; status?: number }) {
    const when = expiredAt ? ` at ${expiredAt.toISOString()}` : '';
    super(
      documentId,
      'expired',
      message ??
        `The lock on document ${describeId(documentId)} expired${when} (server time); nothing was written. ` +
          'Lock it again, and use a longer ttl if the work takes longer.',
      'LOCK_EXPIRED',
      options,
    );
    this.expiredAt = expiredAt;
  }
}

/**
 * The database answered a lock, resume or extend later than the lock's ttl allows: the lease is
 * timed from when the request was sent, less an allowance for clock drift (PRODUCT.md property
 * 13, lease.ts), so the lock may have expired before the answer arrived, and it was not handed
 * out (or, for an extension, not kept). A release by its token was sent (best effort: it may
 * already have been free, or the release may not have arrived: then the lock expires by its ttl on
 * the server). A LockExpiredError (code LOCK_EXPIRED, reason 'expired'): the lock, as far as this
 * process can tell, expired. Unlike a lock that expired while held, trying again can succeed
 * (`retryable`, HTTP 503): the database was slow; a longer ttl makes it unlikely.
 */
export class LockExpiredOnArrivalError extends LockExpiredError {
  /** The ttl asked for, in milliseconds. */
  readonly ttl: number;
  /** How long the last attempt took, from sending the request to the answer (and the document) arriving, in milliseconds. */
  readonly elapsedMs: number;
  /** How many times the lock was granted and found expired on arrival. */
  readonly attempts: number;

  constructor(documentId: unknown, expiredAt: Date | undefined, details: { operation: 'lock' | 'resume' | 'extend'; ttl: number; elapsedMs: number; attempts: number }) {
    const { operation, ttl, elapsedMs, attempts } = details;
    const what = operation === 'extend' ? 'The extension of the lock' : operation === 'resume' ? 'The resume of the lock' : 'The lock (with the document)';
    const tries = attempts > 1 ? ` (the last of ${attempts} attempts)` : '';
    const drift = ttl * CLOCK_DRIFT_FACTOR + CLOCK_DRIFT_MS;
    const elapsed = Math.round(elapsedMs);
    // The lease ran out through the wait alone, or (an extension or resume) because another, shorter
    // extension of the same acquisition was sent meanwhile (held-lock.ts, finishExtension).
    const cause =
      elapsedMs >= ttl - drift - MIN_LEASE_MS
        ? `of its ttl of ${ttl} ms, less ${Math.round(drift * 10) / 10} ms set aside for clock drift, less than ${MIN_LEASE_MS} ms was left to count on`
        : `less than ${MIN_LEASE_MS} ms was left to count on (another, shorter extension of the same lock was sent meanwhile)`;
    const outcome = operation === 'extend' ? 'it was not kept' : 'it was not handed out';
    super(
      documentId,
      expiredAt,
      `${what} on document ${describeId(documentId)} arrived ${elapsed} ms after the request was sent${tries}: ${cause}, so ${outcome}: ` +
        'the server may have freed it before the answer arrived. A release by its token was sent (if it did not arrive, the lock expires by its ttl); ' +
        'this call holds nothing. Use a longer ttl, or try again when the database answers faster.',
      { retryable: true, status: 503 },
    );
    this.ttl = ttl;
    this.elapsedMs = elapsedMs;
    this.attempts = attempts;
  }
}

/** `Model.lock` took the lock, but the document does not exist; the lock was released again. */
export class LockTargetNotFoundError extends LockError {
  /** The `_id` that matched no document. */
  readonly documentId: unknown;

  constructor(documentId: unknown, modelName: string) {
    super('DOCUMENT_NOT_FOUND', `No ${modelName} document with _id ${describeId(documentId)} exists, so it cannot be locked. Create it first.`, { status: 404 });
    this.documentId = documentId;
  }
}

/** A call received an argument it cannot use; nothing was sent to the database. */
export class InvalidLockArgumentError extends LockError {
  /** The name of the argument that was wrong (`id`, `owner`, ...). */
  readonly argument: string;

  constructor(argument: string, problem: string) {
    super('INVALID_ARGUMENT', `Invalid ${argument}: ${problem}`, { status: 400 });
    this.argument = argument;
  }
}

/** The plugin (or a call) was given an option it does not know or a value it cannot use. */
export class InvalidLockOptionError extends LockError {
  /** The name of the option that was wrong or unknown (`ttl`, `wait`, ...). */
  readonly option: string;

  constructor(option: string, problem: string) {
    super('INVALID_OPTION', `Invalid lock option "${option}": ${problem}`, { status: 400 });
    this.option = option;
  }
}

/**
 * The plugin is wired in a way that cannot work, found at the moment it matters (for example
 * `schema.plugin(lockPlugin)` after `model()`, or `lockOwnerMiddleware()` before `session()`).
 * The message names the fix. A server-side mistake, so its status is 500.
 */
export class LockConfigurationError extends LockError {
  constructor(problem: string) {
    super('CONFIGURATION', `mongoose-pessimistic-lock is set up wrong: ${problem}`, { status: 500 });
  }
}

/**
 * The database failed during a lock operation: a network error, a timeout, a failover, or an
 * error the server returned. `retryable` says whether trying again can help; `cause` is the
 * driver's error. After a retryable fault the operation may or may not have been applied:
 * retrying `lock` with the same owner is safe (it renews), and a lock that was taken expires
 * after its ttl in any case.
 */
export class LockDatabaseError extends LockError {
  /** The plugin operation that failed, e.g. 'lock' or 'unlock'. */
  readonly operation: string;

  constructor(operation: string, cause: Error, retryable: boolean) {
    super(
      'DATABASE_ERROR',
      `${operation} failed in the database: ${cause.message}. ` +
        (retryable ? 'This is transient; trying again may succeed.' : 'Trying again will not help; check the database and the connection settings.'),
      { cause, retryable, status: retryable ? 503 : 500 },
    );
    this.operation = operation;
  }
}

/** Short, safe rendering of an `_id` for messages (ids are the caller's own data). */
export function describeId(id: unknown): string {
  if (typeof id === 'string') return JSON.stringify(id.length > 64 ? `${id.slice(0, 61)}...` : id);
  if (id instanceof Date) return id.toISOString();
  if (typeof id === 'bigint') return `${id}`;
  if (id === null || typeof id !== 'object') return String(id);
  const bsonType = (id as { _bsontype?: unknown })._bsontype;
  const short = (hex: string) => (hex.length > 64 ? `${hex.slice(0, 61)}...` : hex);
  // Bytes as hex: printed raw they would be control characters. A UUID (Binary subtype 4, which
  // Mongoose 8 returns for a UUID _id) in its usual form.
  const bytes = (data: Uint8Array, subtype: number) => {
    const hex = Buffer.from(data).toString('hex');
    if (subtype === 4 && hex.length === 32) return `UUID("${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}")`;
    return `Binary(${subtype}, ${short(hex)})`;
  };
  if (Buffer.isBuffer(id)) return bytes(id, (id as { _subtype?: number })._subtype ?? 0);
  if (bsonType === 'Binary') {
    const binary = id as { buffer: Uint8Array; sub_type: number; position?: number };
    return bytes(binary.buffer.subarray(0, binary.position ?? binary.buffer.length), binary.sub_type);
  }
  if (typeof (id as { toHexString?: unknown }).toHexString === 'function') return (id as { toHexString(): string }).toHexString();
  if (typeof bsonType === 'string') return `${bsonType}(${String(id)})`; // Decimal128, Long, Int32, Double, ...
  try {
    return short(JSON.stringify(id)); // an embedded-document _id
  } catch {
    return String(id);
  }
}
