/**
 * The lock algorithm: every MongoDB operation on the lock collection, each written once.
 *
 * A lock is one record in the sibling collection, keyed by the locked document's `_id`:
 *   { _id, owner, token, fence, acquiredAt, expiresAt, label, ttl, claim?, lastWriteAt?,
 *     reservedBy?, reservedUntil? }
 * Releasing does not delete the record: it expires it and clears owner and token, so the
 * record keeps the document's fencing counter. The TTL index removes records `purgeAfter`
 * after they expired.
 * Why this is race-free on mongod (each rule is cited in docs/mongodb-compatibility.md):
 *  - `_id` is unique in every MongoDB collection, so at most one record per document exists,
 *    and every operation below addresses it through the `_id` index (no scans).
 *  - Each operation is one single-document atomic command. Where the decision depends on the
 *    record (free, expired, ours), it is taken by the server inside that command: a filter on
 *    a plain update (re-checked after a write conflict), or a `$cond` in a pipeline update of
 *    an upsert, whose filter must be `_id` equality alone (mongod refuses `$expr` in an
 *    upsert's filter: QueryFeatureNotAllowed, 224).
 *  - Expiry is always compared with `$$NOW`, the server's clock at the command, never with
 *    the client's clock. Every decision treats an expired record as free, so nobody waits for
 *    the TTL monitor, which only reclaims storage later.
 *  - No caller value is ever evaluated: owners, tokens and ttls enter pipelines, `$expr` and
 *    projections only inside `$literal`.
 *  - Fencing tokens: each acquisition sets `fence` to the larger of the previous fence + 1 and
 *    the server's `$$NOW` in microseconds. While the record exists the counter only grows. Once
 *    the TTL monitor purged it (at least `purgeAfter` after its last expiry) nothing remembers
 *    the old fences, and a new one is above them only if no clock that reads `$$NOW` for this
 *    collection reads `purgeAfter / 2` or more behind an earlier reading (skew between primaries
 *    or mongos, or a clock stepped back): an assumption, not a guarantee (known divergence 6 in
 *    docs/mongodb-compatibility.md).
 */
import { randomBytes } from 'node:crypto';
import type { Connection, mongo } from 'mongoose';
import { LockConfigurationError, LockExpiredError, LockExpiredOnArrivalError, LockNotHeldError, LockedError, describeId } from './errors';
import { LockedByTransactionError } from './guard/errors';
import { callerTransactions } from './guard/open-transactions';
import { distinctIds, idKey } from './id-key';
import { deploymentOf } from './deployment-key';
import { finishExtension, leaseLeft, startExtension, startResume, type HeldLockState } from './held-lock';
import { MIN_LEASE_MS, monotonicNow, type GrantTiming } from './lease';
import type { TicketParts } from './ticket';
import { bulkWriteErrors, onlyDuplicateKeys, unwrapBulkError } from './bulk-errors';
import { lossOf, type RecordView } from './lock-loss';
import { anyoneWaiting, releasedHere, releasedManyHere } from './local-wake';

type ClientSession = mongo.ClientSession;
type Collection<T extends mongo.Document> = mongo.Collection<T>;
type Document = mongo.Document;

/**
 * A record of the lock collection (`<collection>.locks`), one per document ever locked, as
 * `Model.lockModel()` reads it. It holds the owner key and the token: keep it away from users
 * (LockInfo is the public view).
 */
export interface LockRecord {
  /** The locked document's `_id`. */
  _id: unknown;
  /** The owner key (hashed owner unless `ownerStorage: 'plain'`); null once released. */
  owner: string | null;
  /** Unique to one acquisition; null once released. */
  token: string | null;
  /** Fencing token: strictly increasing per document across acquisitions. */
  fence: number;
  /** When the current (or last) acquisition was granted (server time). */
  acquiredAt: Date;
  /** When the lock expires (server time); in the past once released. */
  expiresAt: Date;
  /** The holder's display label (`lock(id, owner, { label })`), stored in clear; null once released. */
  label?: string | null;
  /**
   * The ttl the acquisition asked for, in ms: what a resume without `ttl` extends by. Absent on
   * records written before it existed (a resume then uses the plugin's ttl).
   */
  ttl?: number;
  /** When a guarded write last verified or claimed the lock inside a transaction. */
  lastWriteAt?: Date;
  /** Random value written by a guarded write's transaction, so that its write is never a no-op. */
  claim?: string;
  /**
   * The reservation of a waiter (group-reservation.ts): the random key of the one waiting call
   * (`lockMany` / `lockAll` in ordered waiting, or `lock` with `wait`) that waits for this
   * document. A reservation is no lock: while `reservedUntil` is ahead of the server's clock, a
   * free record is taken by that call alone; holders, readers, releaseAllFor and the write guard
   * ignore it.
   */
  reservedBy?: string;
  /** When the reservation lapses unless its waiter renews it (server time). */
  reservedUntil?: Date;
  /**
   * When the reserving call was first refused (server time): an older waiter takes a live
   * reservation over (reserve). Absent on reservations written before it existed (read as newest).
   */
  reservedSince?: Date;
}

/**
 * A waiting single-document call as an acquirer (single-waiter-reservation.ts): its reservation
 * key, and the server time of its first refusal, which `acquire` records from the refusal's reply.
 */
export interface ReservingWaiter {
  readonly key: string;
  since: Date | undefined;
  /**
   * Asked as an attempt is sent: whether it is to remove the call's own reservation when it is
   * granted (the call has reserved, and no reserve is on its way): a mark to hand back to
   * `granted`, else undefined.
   */
  clearingMark?(): number | undefined;
  /** Told of each grant: the mark its attempt carried (undefined: it removed no reservation). */
  granted?(mark: number | undefined): void;
  /**
   * Told that the last grant arrived too late to count on, before it is released: writes back the
   * reservation that grant removed, if it did (resolves once answered; never rejects).
   */
  lateGrant?(): Promise<void>;
}

/** A lock granted (or resumed) by one command, with that command's timing (lease.ts). */
export interface Grant extends GrantTiming {
  token: string;
  fence: number;
  acquiredAt: Date;
  label: string | null;
  /** A resume without a ttl of its own: the acquisition's ttl it extended by (read from the record). */
  ttl?: number;
}

/** Public view of a lock: no owner, no token. */
export interface LockInfo {
  /** The locked document's `_id`. */
  documentId: unknown;
  /** When the lock was granted (server time). */
  acquiredAt: Date;
  /** When it expires unless renewed or released (server time). */
  expiresAt: Date;
  /** Milliseconds until it expires, by the server's clock at the time of the read. */
  remainingMs: number;
  /** The display label its holder gave (`Model.lock(id, owner, { label })`), or null. */
  label: string | null;
}

/** One entry of `Model.lockStatus(ids, { owner })`: a lock, and whether `owner` holds it. */
export interface LockStatus extends LockInfo {
  /** Whether the owner passed to `lockStatus` holds this lock (false when none was passed). */
  mine: boolean;
}

/** One page of `Model.listLocks()`. */
export interface LockPage {
  /** The locks of this page, in `_id` order. */
  locks: LockInfo[];
  /** Pass as `after` to get the next page; null on the last page. Opaque. */
  next: string | null;
}

/** What claimForWrite did: the first target held by someone else, and the records it inserted. */
export interface ClaimResult {
  blocker: Blocker | null;
  /** `_id`s of records the claim inserted (they had none); deleted again by releaseClaims. */
  inserted: unknown[];
  /** The random value written into every claimed record. */
  claim: string;
  /**
   * `_id`s whose lock records the claim wrote (or, once a write was sent, may have written): none
   * when it was refused before writing (a record held by someone else is left unchanged).
   */
  written: unknown[];
}

/**
 * An upsert of a claim lost an insert race inside a transaction and got a duplicate-key error.
 * Whether mongod retries such an upsert itself inside a transaction depends on the version (R9 in
 * docs/mongodb-compatibility.md: 6.0-8.0 retry it there too, current master never does,
 * shouldRetryDuplicateKeyException in write_ops_exec.cpp), so the guard cannot count on it and
 * retries the transaction. Carries the TransientTransactionError label for that reason.
 */
export class ClaimRaceError extends Error {
  readonly errorLabels = ['TransientTransactionError'];

  constructor(override readonly cause: unknown) {
    super('mongoose-pessimistic-lock: a lock record was created concurrently; the transaction is retried');
    this.name = 'ClaimRaceError';
  }

  hasErrorLabel(label: string): boolean {
    return this.errorLabels.includes(label);
  }
}

/** A lock that stops a write: whose document, and (when still known) when it expires. */
export interface Blocker {
  documentId: unknown;
  expiresAt?: Date;
  remainingMs?: number;
  /** The holder's display label, as `Model.lock` refused by the same lock reports it (null: none given, or unknown). */
  label?: string | null;
}

/**
 * Every caller value that enters an aggregation expression (a pipeline update, `$expr`, a
 * projection) goes in wrapped, so the server never evaluates it: `'$_id'` stays a string.
 * (Rule: `$literal` returns its argument unparsed; manual, `$literal` (aggregation).)
 */
const lit = (value: unknown) => ({ $literal: value });

/** `$expr` (query filter) true while a record is unexpired by the server's clock. Never used in an upsert. */
const UNEXPIRED = { $expr: { $gt: ['$expiresAt', '$$NOW'] } } as const;
/**
 * Aggregation expression: the record is free (no record yet, released, or expired by `$$NOW`).
 * A missing or null `expiresAt` (a record the upsert is about to insert) reads as the epoch, so
 * the comparison is between two dates and never relies on cross-type ordering.
 */
const EXPIRED_EXPR = { $lte: [{ $ifNull: ['$expiresAt', lit(new Date(0))] }, '$$NOW'] };
/**
 * Free, or held by `ownerKey` (a renewal by the same owner): the write guard's condition for its
 * claims, and (without an owner) lockNext's claim (claimFree). It ignores reservations: a reserved
 * document nobody holds is writable, and claimable by lockNext, by anyone.
 */
function freeOrHeldBy(ownerKey: string | undefined): unknown {
  return ownerKey === undefined ? EXPIRED_EXPR : { $or: [EXPIRED_EXPR, { $eq: ['$owner', lit(ownerKey)] }] };
}
/**
 * Aggregation expression: the record's reservation lets the caller with reservation key `key`
 * take the free document: there is none, it lapsed by `$$NOW` (a missing `reservedUntil` reads as
 * the epoch, as EXPIRED_EXPR reads `expiresAt`: a comparison of two dates, R11), or it is `key`'s
 * own. Without a key (every caller but a waiting group), only when none is live.
 */
function reservationLetsIn(key: string | undefined): unknown {
  const lapsed = { $lte: [{ $ifNull: ['$reservedUntil', lit(new Date(0))] }, '$$NOW'] };
  return key === undefined ? lapsed : { $or: [lapsed, { $eq: ['$reservedBy', lit(key)] }] };
}
/**
 * Aggregation expression: a waiter first refused at `since` (server time) with reservation key
 * `key` is older than the record's reserver, so it takes the reservation over (reserve): its
 * `since` is earlier than `reservedSince`, or equal with a smaller key (a total order: every
 * waiter has one place in it). A missing `reservedSince` (a reservation written before it
 * existed) reads as the latest Date, so any waiter with a `since` is older. `$lt` and `$eq` of two
 * dates, and of two strings (random base64url keys; the lock collection is created without a
 * collation, so binary; were a collation to make two keys equal, neither would take over: the
 * first keeps it, as before). Both values are caller-free, and go in as `$literal` all the same.
 */
function olderThanReserver(key: string, since: Date): unknown {
  const theirs = { $ifNull: ['$reservedSince', lit(LATEST_DATE)] };
  return { $or: [{ $lt: [lit(since), theirs] }, { $and: [{ $eq: [lit(since), theirs] }, { $lt: [lit(key), { $ifNull: ['$reservedBy', ''] }] }] }] };
}
/** The latest date a JavaScript Date holds (ECMA-262 Time Values: ±8.64e15 ms), stored as a BSON date. */
const LATEST_DATE = new Date(8.64e15);
/**
 * The acquisition condition of `lock`, `tryLock` and groups (acquire, takeGroup): a free record
 * whose reservation lets the caller in, or, with `mine`, a record `mine` holds unexpired (a
 * renewal by the same owner, which no reservation stops: the holder keeps what it holds). An
 * expired lock of `mine` is free like any other, reservation included. With no live reservation
 * it is `freeOrHeldBy(mine)` exactly.
 */
function acquirable(mine: string | undefined, key: string | undefined): unknown {
  if (mine === undefined) return { $and: [EXPIRED_EXPR, reservationLetsIn(key)] };
  return { $cond: [EXPIRED_EXPR, reservationLetsIn(key), { $eq: ['$owner', lit(mine)] }] };
}
/** Query filter (`$expr`): a free record whose live reservation is not `key`'s (it refuses that caller). */
function reservedAgainst(key: string | undefined): Document {
  return { $expr: { $and: [EXPIRED_EXPR, { $not: [reservationLetsIn(key)] }] } };
}
/**
 * A pipeline update that sets `fields` only when `condition` holds and otherwise sets every one
 * of them to its current value. All expressions of one `$set` stage are evaluated against the
 * record as it was before the stage (manual, `$addFields`), so the condition cannot see its own
 * writes. When the condition is false the result is binary-equal to the record, which mongod
 * treats as a no-op: no write, no oplog entry, no change event (ObjectReplaceExecutor's noop, via
 * PipelineExecutor::applyUpdate in src/mongo/db/update/pipeline_executor.cpp). So a refused
 * acquisition writes nothing and wakes no waiter.
 */
function applyIf(condition: unknown, fields: Record<string, unknown>): Document[] {
  const set: Record<string, unknown> = {};
  // Own keys only (Object.keys, as Object.entries before: no [name, value] pair per field).
  for (const name of Object.keys(fields)) set[name] = { $cond: [condition, fields[name], fieldPath(name)] };
  return [{ $set: set }];
}
/**
 * The second stage of a waiting call's acquisition once the call has reserved (cmd-acquire): when
 * the first stage granted the lock (the record now carries this command's fresh token: the stages
 * of a pipeline update run in order, each on the previous one's output) and the reservation is
 * this call's (`reservedBy` = its key), the three reservation fields are removed (`$$REMOVE`
 * evaluates to missing, Variables::getValue kRemoveId in src/mongo/db/pipeline/variables.cpp, and
 * `$set` of a missing value removes the field: jstests/aggregation/variables/remove_system_variable.js,
 * `$addFields` with `$$REMOVE`). Otherwise every field is rewritten to itself, a missing one stays
 * missing (R4), so a refusal stays binary-equal (R5). A reservation of another waiter (one that took
 * this call's over) is never touched: a grant under it means it had lapsed, and it is that waiter's.
 */
function removeOwnReservationOnGrant(token: string, key: string): Document {
  const ours = { $and: [{ $eq: ['$token', lit(token)] }, { $eq: ['$reservedBy', lit(key)] }] };
  return { $set: { reservedBy: { $cond: [ours, '$$REMOVE', '$reservedBy'] }, reservedUntil: { $cond: [ours, '$$REMOVE', '$reservedUntil'] }, reservedSince: { $cond: [ours, '$$REMOVE', '$reservedSince'] } } };
}
/** `$name`, the path of a field of the record (the plugin's own field names: a handful, kept). */
const fieldPaths = new Map<string, string>();
function fieldPath(name: string): string {
  let path = fieldPaths.get(name);
  if (path === undefined) fieldPaths.set(name, (path = `$${name}`));
  return path;
}
/** The expiry of a claim record the guard inserts: long past (free), and purged by the TTL index. */
const CLAIM_EXPIRED = new Date(0);
/** Pipeline stage that ends an acquisition: expired now, no owner, fence kept. */
const RELEASE = [{ $set: { expiresAt: '$$NOW', owner: null, token: null, label: null } }];
/** Next fence: previous + 1, but never below the server clock in microseconds. */
const NEXT_FENCE = { $max: [{ $add: [{ $ifNull: ['$fence', 0] }, 1] }, { $multiply: [{ $toLong: '$$NOW' }, 1000] }] };

/**
 * Every read of the lock collection goes to the primary, whatever read preference the
 * application's connection has: a secondary may lag, and a lagging read would call a lock free
 * that is held (or held that was released). Writes always go to the primary.
 */
const PRIMARY = { readPreference: 'primary' } as const;

/**
 * How often acquire retries after a duplicate-key error. mongod retries an `_id`-equality upsert
 * that lost an insert race as an update itself (shouldRetryDuplicateKeyException in
 * write_ops_exec.cpp; R9 in docs/mongodb-compatibility.md, per version): without bound in 6.0,
 * 7.0 and the 8.0 line read, at most upsertMaxRetryAttemptsOnDuplicateKeyError times on current
 * master. So the error reaches us only where a bound exists and was exhausted; we try again a
 * little more rather than trust any one version's loop.
 */
const ACQUIRE_ATTEMPTS = 3;

/** Random bytes for tokens, drawn from the CSPRNG 256 tokens at a time (one call instead of one per token). */
const TOKEN_BYTES = 16;
let tokenPool = Buffer.alloc(0);
let tokenOffset = 0;

/** A fresh 128-bit random token (22 base64url characters). */
export function newLockToken(): string {
  if (tokenOffset + TOKEN_BYTES > tokenPool.length) {
    tokenPool = randomBytes(TOKEN_BYTES * 256);
    tokenOffset = 0;
  }
  const token = tokenPool.toString('base64url', tokenOffset, tokenOffset + TOKEN_BYTES);
  tokenOffset += TOKEN_BYTES;
  return token;
}

function isDuplicateKey(error: unknown): boolean {
  return typeof error === 'object' && error !== null && (error as { code?: unknown }).code === 11000;
}

/**
 * A duplicate key on a unique index other than `_id` of the lock collection: an index the plugin
 * never makes (its indexes are `_id`, the TTL index and `{ owner: 1, _id: 1 }`, none unique but
 * `_id`), made by hand, that lock records of different documents collide on (a unique
 * `{ owner: 1 }`: one lock per owner). No retry helps; it is a configuration fault, told as one
 * instead of the driver's raw error (or, in a group, instead of a refusal).
 * Which index: mongod's DuplicateKey error carries the index's key pattern
 * (DuplicateKeyErrorInfo::serialize, src/mongo/db/storage/duplicate_key_error_info.cpp: `keyPattern`,
 * `keyValue`), which the driver copies onto a MongoServerError, but not onto the write errors of a
 * bulk write (mongodb/lib/bulk/common.js mergeBatchResults keeps index, code, errmsg, errInfo, op).
 * There the message names the index: buildDupKeyErrorStatus (src/mongo/db/storage/
 * index_entry_comparison.cpp) writes "E11000 duplicate key error collection: <db>.<collection>
 * index: <name> ..." (no index part for a clustered collection's cluster key), and the `_id` index
 * is always named `_id_`, a name no other index may take (parseAndValidateIndexSpecs,
 * src/mongo/db/catalog/index_key_validate.cpp: "The index name '_id_' is reserved for the _id index").
 * A database name has no '.', so the namespace's first '.' precedes the collection name.
 * Resolves to how the index is named, or undefined for `_id` and for a message of another form.
 */
function foreignIndexOf(error: { code?: unknown; keyPattern?: unknown; errmsg?: unknown }, collection: string): string | undefined {
  if (error.code !== 11000) return undefined;
  const keyPattern = error.keyPattern;
  if (keyPattern !== null && typeof keyPattern === 'object') {
    const fields = Object.keys(keyPattern);
    return fields.length === 1 && fields[0] === '_id' ? undefined : `on ${JSON.stringify(keyPattern)}`;
  }
  const prefix = 'E11000 duplicate key error collection: ';
  const message = typeof error.errmsg === 'string' ? error.errmsg : '';
  if (!message.startsWith(prefix)) return undefined;
  const namespace = message.slice(prefix.length);
  const afterDatabase = namespace.slice(namespace.indexOf('.') + 1);
  const marker = `${collection} index: `;
  if (!afterDatabase.startsWith(marker)) return undefined;
  // The name runs to " collation: " (an index with a collation) or " dup key: ". Only the exact
  // name `_id_` is the `_id` index: any other name, "_id_ per owner" too, is another index.
  const name = afterDatabase.slice(marker.length).split(/ (?:collation|dup key): /)[0];
  return name === '_id_' ? undefined : `named ${JSON.stringify(name)}`;
}

function foreignIndexError(index: string, collection: string, detail: string): LockConfigurationError {
  return new LockConfigurationError(
    `the lock collection ${collection} has a unique index ${index} that the plugin did not create, and lock records of different documents collide on it ` +
      `(${detail}). Drop that index: the lock collection must carry only the plugin's indexes.`,
  );
}

/** The configuration error for a command's duplicate key on a foreign unique index (see foreignIndexOf), if it is one. */
function foreignUniqueIndex(error: unknown, collection: string): LockConfigurationError | undefined {
  if (typeof error !== 'object' || error === null) return undefined;
  const index = foreignIndexOf({ code: (error as { code?: unknown }).code, keyPattern: (error as { keyPattern?: unknown }).keyPattern }, collection);
  return index === undefined ? undefined : foreignIndexError(index, collection, (error as Error).message);
}

/** The same for a bulk write's statements: the first write error on a foreign unique index, if any. */
function foreignUniqueIndexInBulk(error: unknown, collection: string): LockConfigurationError | undefined {
  for (const writeError of bulkWriteErrors(error)) {
    const index = foreignIndexOf({ code: writeError.code, errmsg: writeError.errmsg }, collection);
    if (index !== undefined) return foreignIndexError(index, collection, String(writeError.errmsg));
  }
  return undefined;
}

/**
 * The longest a group acquisition's `update` may run on the server (its maxTimeMS, R26): long
 * enough for its statements on a loaded server, short enough that a statement waiting for another
 * process's transaction (R17) does not hold the group's other documents for that transaction's
 * length (up to 60 s).
 */
export function groupRoundMaxTimeMS(statements: number): number {
  return 500 + 2 * statements;
}

export class LockStore {
  /**
   * @param purgeAfterMs the TTL index's expiry (`purgeAfter`, in whole seconds as the index keeps
   *   it): how long a released or expired record stays before the TTL monitor may delete it. Only
   *   words an error (lossFrom); unknown (Infinity), a record gone before expiry is 'vanished'.
   *   Before it says 'vanished', the store reads what the index keeps now (purgeAfterNow).
   */
  constructor(
    private readonly locks: Collection<Document>,
    private readonly purgeAfterMs = Number.POSITIVE_INFINITY,
  ) {}

  /**
   * `<database>.<collection>` of the lock collection. Read from the collection's connection: the
   * store holds Mongoose's collection, whose wrapper passes the driver's methods on but not its
   * getters (`namespace` is undefined there: lib/drivers/node-mongodb-native/collection.js skips
   * properties with getters), and the database name is known only once the connection opened.
   */
  get namespace(): string {
    const locks = this.locks as unknown as { namespace?: string; collectionName: string; conn?: { name?: string } };
    return locks.namespace ?? `${locks.conn?.name ?? ''}.${locks.collectionName}`;
  }

  /**
   * What names this lock collection in the process-wide maps keyed by lock collection and `_id`
   * (held-lock.ts, the leases; guard/open-transactions.ts): its deployment (deployment-key.ts,
   * deploymentOf) and namespace. A namespace alone names a collection only within one deployment,
   * and lockAll takes one namespace and `_id` on two deployments as two documents.
   */
  get scope(): string {
    const conn = (this.locks as unknown as { conn?: Connection }).conn;
    return `${conn ? deploymentOf(conn) : '0'}\u0000${this.namespace}`;
  }

  /**
   * Notes that the caller's transaction on `session` writes the lock records of `ids` (the guard's
   * joined writes), so that a lock call outside it is refused instead of waiting for it.
   */
  noteCallerTransaction(ids: unknown[], session: ClientSession): void {
    callerTransactions.note(this.scope, ids, session);
  }

  /**
   * Refuses a guarded write of its own transaction (atomic mode) to any of `ids` whose lock record
   * an open caller transaction of this process writes: its claim would get WriteConflict at once
   * and be retried for the whole retry budget (transaction.ts), and forever if the caller awaits
   * the write inside that very transaction.
   */
  refuseWritesInOpenTransaction(ids: unknown[]): void {
    if (callerTransactions.empty) return;
    const scope = this.scope;
    for (const id of ids) if (callerTransactions.writing(scope, id)) throw new LockedByTransactionError(id, 'write');
  }

  /**
   * Refuses a write of `documentId`'s lock record outside a transaction while an open caller
   * transaction of this process writes it (see guard/open-transactions.ts): mongod would make it
   * wait for that transaction (R17), which cannot end if its own callback is the one waiting.
   */
  private refuseIfInOpenTransaction(documentId: unknown, session?: ClientSession): void {
    if (callerTransactions.empty || session?.inTransaction()) return;
    if (callerTransactions.writing(this.scope, documentId)) throw new LockedByTransactionError(documentId);
  }

  /**
   * Takes the lock for `ownerKey` if it is free, expired, or already held by the same owner
   * (then it is renewed under a new token). One `findAndModify`:
   *  - filter `{ _id }` only, with `upsert: true`: the `_id` index finds the record (IDHACK), or
   *    the upsert inserts `{ _id }` (seeded from the filter's equality) and applies the pipeline;
   *  - a pipeline update that, in one `$cond` evaluated by the server against the record as it
   *    is at the write, either writes our grant (free, expired or ours) or leaves the record
   *    unchanged (someone else's unexpired lock: a no-op, nothing written);
   *  - the reply is the record after the update, projected to a comparison (`acquired`: does it
   *    carry our fresh token?), its expiry and `$$NOW`, so a refusal needs no second read and
   *    never reveals the other holder's token.
   * Why this is race-free on mongod: a single-document update is atomic; when a concurrent write
   * conflicts with it, mongod retries the whole update against the latest version of the
   * record, so the `$cond` is evaluated on the version it replaces. Two first acquirers that both
   * find no record race on the unique `_id` index; the loser's duplicate-key error is retried by
   * the server as an update because the filter is exactly an equality on `_id` (see
   * ACQUIRE_ATTEMPTS), and that update sees the winner's grant and refuses. (`$expr` in an
   * upsert's filter would be refused: QueryFeatureNotAllowed 224; see docs/mongodb-compatibility.md.)
   */
  async acquire(documentId: unknown, ownerKey: string, ttl: number, label: string | null = null, waiter?: ReservingWaiter): Promise<Grant> {
    this.refuseIfInOpenTransaction(documentId);
    // A waiting call carries its reservation key: its own reservation lets it in, any other live
    // one refuses it (acquirable). Calls that do not wait carry none: every live reservation refuses them.
    // A waiting call that has reserved removes its own reservation with its grant (cmd-acquire), so
    // it sends no clear afterwards (SingleWaiterReservation.end).
    const mark = waiter?.clearingMark?.();
    const clearKey = mark === undefined ? undefined : waiter?.key;
    const { record, token, sentAt } = await this.sendAcquire(documentId, ownerKey, acquirable(ownerKey, waiter?.key), ttl, label, clearKey);
    const expiresAt = record.expiresAt as Date;
    // A findAndModify that the driver retried (retryable writes, after a network error) is
    // answered from the stored result WITHOUT the projection (parseOplogEntryForFindAndModify
    // in src/mongo/db/query/write_ops/write_ops_retryability.cpp; SERVER-31242): the full
    // record, no `acquired`, no `now`. Only a grant writes (a refusal is a no-op), so only a
    // grant can be replayed: the token itself says whether it is ours, and the grant's
    // `acquiredAt` is the `$$NOW` of the command that made it. That command was sent after
    // `sentAt` (the driver retries the very command this call sent), so the lease is still
    // timed conservatively: `expiresAt - acquiredAt` is the ttl, granted after `sentAt`.
    const projected = 'acquired' in record;
    const serverNow = (projected ? record.now : record.acquiredAt) as Date;
    const holderLabel = typeof record.label === 'string' ? record.label : null;
    if (projected ? record.acquired === true : record.token === token) {
      waiter?.granted?.(mark);
      return { token, fence: Number(record.fence), acquiredAt: record.acquiredAt as Date, expiresAt, serverNow, sentAt, label: holderLabel };
    }
    // A refusal is never a retried reply (only a grant writes): it is projected, with the
    // server's `$$NOW`, the waiter's `since` when it is its first.
    if (waiter && projected) waiter.since ??= serverNow;
    if (projected && expiresAt.getTime() <= serverNow.getTime()) {
      // Free, so refused by a waiter's reservation (acquirable): no holder, no label; a waiter
      // retries when it is cleared (a change event) or lapses.
      const until = record.reservedUntil instanceof Date ? record.reservedUntil.getTime() - serverNow.getTime() : undefined;
      throw new LockedError(documentId, undefined, ' A waiting caller reserved it (no lock: it is taken by that caller next).', until, null);
    }
    const remaining = projected ? expiresAt.getTime() - serverNow.getTime() : undefined;
    throw new LockedError(documentId, expiresAt, '', remaining, holderLabel);
  }

  /**
   * The acquire command itself, written once for `acquire` (condition: free, expired or held by
   * `ownerKey`, and no live reservation of a waiting group on a free record) and `claimFree`
   * (condition: free or expired, whatever the reservation): see `acquire` for
   * why it is race-free on mongod. Retries a duplicate `_id` (an insert race the server did not
   * retry, R9) up to ACQUIRE_ATTEMPTS times, each with a fresh token; `sentAt` is read
   * immediately before the command that answered is sent (the lease is timed from it, lease.ts).
   */
  private async sendAcquire(
    documentId: unknown,
    ownerKey: string,
    condition: unknown,
    ttl: number,
    label: string | null,
    clearKey?: string,
  ): Promise<{ record: Document; token: string; sentAt: number }> {
    for (let attempt = 1; ; attempt++) {
      const token = newLockToken();
      let record: Document | null;
      const sentAt = monotonicNow();
      try {
        const grant = applyIf(condition, {
          owner: lit(ownerKey),
          token: lit(token),
          fence: NEXT_FENCE,
          acquiredAt: '$$NOW',
          expiresAt: { $add: ['$$NOW', lit(ttl)] },
          label: lit(label),
          ttl: lit(ttl),
        });
        record = await this.locks.findOneAndUpdate(
          { _id: documentId } as Document,
          clearKey === undefined ? grant : [...grant, removeOwnReservationOnGrant(token, clearKey)],
          {
            upsert: true,
            returnDocument: 'after',
            // `label` is the holder's display label: ours when acquired, the other holder's on a
            // refusal (shown as "being edited by ..."); never its owner or token. `reservedUntil`:
            // when a reservation that refused a free record lapses unless renewed.
            projection: { _id: 0, acquired: { $eq: ['$token', lit(token)] }, fence: 1, acquiredAt: 1, expiresAt: 1, label: 1, reservedUntil: 1, now: '$$NOW' },
          },
        );
      } catch (error) {
        // Only a duplicate `_id` (an insert race the server did not retry) is worth another attempt.
        const foreign = foreignUniqueIndex(error, this.locks.collectionName);
        if (foreign) throw foreign;
        if (!isDuplicateKey(error) || attempt >= ACQUIRE_ATTEMPTS) throw error;
        continue;
      }
      if (!record) throw new Error('mongoose-pessimistic-lock: the server returned no lock record for an upsert');
      return { record, token, sentAt };
    }
  }

  /**
   * Releases this acquisition only: the filter names the token (so nobody else's lock is ever
   * released) and requires the record to be unexpired by server time. When nothing matched,
   * `explainLoss` says why.
   */
  async release(state: HeldLockState, session?: ClientSession): Promise<void> {
    const { documentId, token } = state.lock;
    this.refuseIfInOpenTransaction(documentId, session);
    const result = await this.locks.updateOne({ _id: documentId, token, ...UNEXPIRED } as Document, RELEASE, { session });
    if (result.matchedCount === 1) {
      // In a transaction the release is seen when it commits (the change stream's event then; no
      // transactions without one): waking now would only find it still held.
      if (!session?.inTransaction()) this.freed([documentId]);
      return;
    }
    throw await this.explainLoss(state, session);
  }

  /**
   * This process released the locks of `ids` (undefined: of documents it cannot name): its waiters
   * of them ask again at once (local-wake.ts), as a change event would make them, on every topology.
   * Called by the releases here, and for a release committed with a write (saveAndUnlock).
   */
  freed(ids: readonly unknown[] | undefined): void {
    if (!anyoneWaiting()) return;
    const scope = this.scope;
    if (ids === undefined) releasedManyHere(scope);
    else for (const id of ids) releasedHere(scope, idKey(id));
  }

  /**
   * Extends this acquisition to `ttl` from now (server time), only while it is still current, and
   * moves `state` to the new expiry and lease. Returns the extension's timing.
   * The lease is timed from when the request was sent (lease.ts): until the reply arrives, this
   * process counts on the lock no longer than both the current lease and the extension guarantee
   * (startExtension), so an extension that fails, or whose outcome stays unknown, never lengthens
   * it. The reply carries the command's `$$NOW`; a retried findAndModify's reply is unprojected
   * (SERVER-31242, see acquire) and then `$$NOW` is the new expiry minus the ttl it added.
   */
  async extend(state: HeldLockState, ttl: number, onLapse?: (error: LockNotHeldError) => void): Promise<GrantTiming> {
    const { documentId, token } = state.lock;
    this.refuseIfInOpenTransaction(documentId);
    const sentAt = monotonicNow();
    // Every instance of this acquisition in the process counts on it only as both guarantee until
    // the answer; extensions in flight together settle to the least of them (held-lock.ts, finishExtension).
    const pending = startExtension(state, sentAt, ttl);
    let timing: GrantTiming | undefined;
    let record: Document | null;
    try {
      record = await this.locks.findOneAndUpdate(
        { _id: documentId, token, ...UNEXPIRED } as Document,
        [{ $set: { expiresAt: { $add: ['$$NOW', lit(ttl)] } } }],
        { returnDocument: 'after', projection: { _id: 0, expiresAt: 1, now: '$$NOW' } },
      );
      if (record) {
        const expiresAt = record.expiresAt as Date;
        timing = { sentAt, expiresAt, serverNow: record.now instanceof Date ? record.now : new Date(expiresAt.getTime() - ttl) };
      }
    } finally {
      finishExtension(pending, timing);
    }
    if (!record || !timing) throw await this.explainLoss(state);
    const { expiresAt } = timing;
    if (leaseLeft(state) < MIN_LEASE_MS) {
      // The answer came too late to count on: the lease is over, so the lock is given up rather
      // than revived. `onLapse` hears it first (a handle aborts its signal), then the lock is
      // released by its token, best effort: it may already be free.
      const error = new LockExpiredOnArrivalError(documentId, expiresAt, { operation: 'extend', ttl, elapsedMs: monotonicNow() - sentAt, attempts: 1 });
      state.lost = 'expired';
      onLapse?.(error);
      await this.release(state).catch(() => undefined);
      state.lost = 'expired'; // a release that matched nothing recorded its own reason
      throw error;
    }
    return timing;
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
      // A fresh random `claim` makes this a real write whatever the clock says (an update that
      // changes nothing is a no-op on mongod and would not conflict with a takeover).
      const result = await this.locks.updateOne(
        { _id: documentId, token, ...UNEXPIRED } as Document,
        [{ $set: { lastWriteAt: '$$NOW', claim: lit(newLockToken()) } }],
        { session },
      );
      if (result.matchedCount === 1) return;
      throw await this.explainLoss(state, session);
    }
    const record = await this.locks.findOne({ _id: documentId } as Document, {
      projection: { token: 1, fence: 1, expiresAt: 1, now: '$$NOW' },
      session,
      ...PRIMARY,
    });
    if (record && record.token === token && (record.expiresAt as Date) > (record.now as Date)) return;
    throw await this.lossFrom(state, record);
  }

  /** The unexpired lock on a document, if any, with the server's view of its remaining time. */
  async findActive(documentId: unknown, session?: ClientSession): Promise<LockInfo | null> {
    const record = await this.locks.findOne({ _id: documentId, ...UNEXPIRED } as Document, {
      projection: { acquiredAt: 1, expiresAt: 1, label: 1, now: '$$NOW' },
      session,
      ...PRIMARY,
    });
    return record ? lockInfoFrom(documentId, record) : null;
  }

  /**
   * The first of `ids` locked (unexpired) by anyone but `ownerKey`, if any: one query through
   * the `_id` index.
   */
  async findBlocking(ids: unknown[], ownerKey: string | undefined, session?: ClientSession): Promise<Blocker | null> {
    const filter: Document = { _id: { $in: ids }, ...UNEXPIRED };
    if (ownerKey !== undefined) filter.owner = { $ne: ownerKey };
    const record = await this.locks.findOne(filter, { projection: { expiresAt: 1, label: 1, now: '$$NOW' }, session, ...PRIMARY });
    return record ? blockerFrom(record._id, record) : null;
  }

  /**
   * Inside a transaction: writes the lock record of every target that is free, expired or held
   * by `ownerKey`, so that an acquisition racing with the transaction conflicts with it or waits
   * for its commit. Returns the first target held by someone else (the caller aborts), and the
   * targets that had no record: for those the upsert inserted one, which the caller deletes in
   * the same transaction (releaseClaims) so that no record outlives it.
   *
   * One target: one `findAndModify` upsert with filter `{ _id }` (no `$expr`: mongod refuses it
   * in an upsert's filter, QueryFeatureNotAllowed 224) and a pipeline that writes a fresh random
   * `claim` only when the record is free or ours; a record held by someone else is left
   * binary-identical, which mongod treats as a no-op (no write). The fresh `claim` makes every
   * other case a real write, also on a free record, so it always conflicts with a concurrent
   * takeover. Its reply says whether it was claimed and whether it was inserted
   * (`lastErrorObject.updatedExisting`). Several targets: see below (find, insert, update).
   *
   * Why the inserted-then-deleted record still protects the write until commit: a record the
   * transaction inserted (and deleted again) is an uncommitted change of that `_id` key in the
   * lock collection's `_id` index (one WiredTiger key per `_id`: WiredTigerIdIndex::_insert in
   * src/mongo/db/storage/wiredtiger/wiredtiger_index.cpp). Any other write of that key before
   * the commit gets WT_ROLLBACK, which mongod turns into a WriteConflict
   * (wtRCToStatus_slow in src/mongo/db/storage/wiredtiger/wiredtiger_error_util.cpp; WiredTiger
   * "Transactional API": an operation conflicting with a concurrent transaction's update fails
   * with WT_ROLLBACK). A write outside a transaction, such as `acquire`, retries it until the
   * transaction commits or aborts (jstests/core/txns/write_conflicts_with_non_txns.js: "a
   * non-transactional insert of a document inserted by a running transaction keeps retrying and
   * continues after the transaction commits"); a transaction gets WriteConflict at once
   * (jstests/core/txns/transactions_write_conflicts.js, "insert-insert conflict").
   */
  async claimForWrite(targets: unknown[], ownerKey: string | undefined, session: ClientSession): Promise<ClaimResult> {
    // One record per document: ids mongod treats as one `_id` (1, Long(1), 1.0, Decimal128('1.0'))
    // would otherwise be inserted twice, a duplicate-key error of the guard's own making that
    // retrying cannot cure (id-key.ts).
    const ids = distinctIds(targets);
    const claim = newLockToken();
    const update = applyIf(freeOrHeldBy(ownerKey), {
      claim: lit(claim),
      lastWriteAt: '$$NOW',
      expiresAt: { $ifNull: ['$expiresAt', '$$NOW'] },
      fence: { $ifNull: ['$fence', 0] },
    });
    if (ids.length === 0) return { blocker: null, inserted: [], claim, written: [] };
    try {
      if (ids.length === 1) {
        const reply = await this.locks.findOneAndUpdate({ _id: ids[0] } as Document, update, {
          upsert: true,
          returnDocument: 'after',
          projection: { claimed: { $eq: ['$claim', lit(claim)] }, expiresAt: 1, label: 1, now: '$$NOW' },
          includeResultMetadata: true,
          session,
        });
        const record = reply.value;
        const inserted = reply.lastErrorObject?.updatedExisting === false ? [ids[0]] : [];
        if (record && record.claimed === true) return { blocker: null, inserted, claim, written: [ids[0]] };
        // Held by someone else: the pipeline left the record binary-identical, a no-op (nothing written).
        return { blocker: blockerFrom(ids[0], record), inserted, claim, written: [] };
      }
      // Several targets: read their records in the transaction's snapshot (one `find` through
      // the `_id` index), insert a claim record for each target that has none (one `insert`;
      // plain inserts, no update pipeline to evaluate), and claim the existing free or own ones
      // with the same conditional update as above (one `update`, usually with few statements).
      // A record created or changed by someone else after the snapshot makes the insert or the
      // update fail with WriteConflict (jstests/core/txns/write_conflicts_with_non_txns.js: "a
      // transaction that tries to write to a document that was updated by a non-transaction
      // after it started should fail with a WriteConflict"), and the transaction is retried.
      const records = await this.locks
        .find({ _id: { $in: ids } } as Document, { projection: { owner: 1, expiresAt: 1, label: 1, now: '$$NOW' }, session, ...PRIMARY })
        .toArray();
      const held = records.find((r) => r.expiresAt instanceof Date && r.expiresAt > (r.now as Date) && (ownerKey === undefined || r.owner !== ownerKey));
      if (held) return { blocker: blockerFrom(held._id, held), inserted: [], claim, written: [] };
      const known = new Set(records.map((r) => idKey(r._id)));
      const missing = ids.filter((id) => !known.has(idKey(id)));
      if (missing.length > 0) {
        // `expiresAt` at the epoch: a claim record is free (an expiry in the past, whatever the
        // clocks), and should one ever outlive its transaction, the TTL index deletes it on its
        // next pass instead of never (a document without a date is never deleted: manual, TTL Indexes).
        await this.locks.insertMany(missing.map((id) => ({ _id: id, claim, expiresAt: CLAIM_EXPIRED }) as Document), { ordered: false, session });
      }
      if (records.length > 0) {
        const result = await this.locks.bulkWrite(
          records.map((r) => ({ updateOne: { filter: { _id: r._id } as Document, update } })),
          { ordered: false, session },
        );
        if (result.modifiedCount !== records.length) {
          const other = await this.locks.findOne({ _id: { $in: ids }, claim: { $ne: claim } } as Document, { projection: { expiresAt: 1, label: 1, now: '$$NOW' }, session, ...PRIMARY });
          return { blocker: blockerFrom(other?._id ?? ids[0], other), inserted: missing, claim, written: ids };
        }
      }
      return { blocker: null, inserted: missing, claim, written: ids };
    } catch (error) {
      // Inside a transaction mongod does not retry an upsert that lost an insert race (another
      // writer created the same record at the same instant): the transaction must be retried.
      if (isDuplicateKey(error)) throw foreignUniqueIndex(error, this.locks.collectionName) ?? new ClaimRaceError(error);
      throw error;
    }
  }

  /**
   * Deletes, inside the transaction that inserted them, the records claimForWrite inserted: one
   * `delete` command, one statement per record, each found through the `_id` index and only if it
   * still carries this claim (it does: nobody else can write it before the transaction ends).
   */
  async releaseClaims(claimed: ClaimResult, session: ClientSession): Promise<void> {
    if (claimed.inserted.length === 0) return;
    if (claimed.inserted.length === 1) {
      await this.locks.deleteOne({ _id: claimed.inserted[0], claim: claimed.claim } as Document, { session });
      return;
    }
    await this.locks.bulkWrite(
      claimed.inserted.map((id) => ({ deleteOne: { filter: { _id: id, claim: claimed.claim } as Document } })),
      { ordered: false, session },
    );
  }

  /** Whether `ownerKey` holds an unexpired lock on the document. */
  async isHeldBy(documentId: unknown, ownerKey: string, session?: ClientSession): Promise<boolean> {
    const record = await this.locks.findOne({ _id: documentId, owner: ownerKey, ...UNEXPIRED } as Document, { projection: { _id: 1 }, session, ...PRIMARY });
    return record !== null;
  }

  /** Releases every unexpired lock of one owner (one `updateMany` through the owner index). */
  async releaseAll(ownerKey: string): Promise<number> {
    const result = await this.locks.updateMany({ owner: ownerKey, ...UNEXPIRED } as Document, RELEASE);
    if (result.modifiedCount > 0) this.freed(undefined);
    return result.modifiedCount;
  }

  /** Administrative release of whoever holds the lock. */
  async forceRelease(documentId: unknown): Promise<boolean> {
    this.refuseIfInOpenTransaction(documentId);
    const result = await this.locks.updateOne({ _id: documentId, ...UNEXPIRED } as Document, RELEASE);
    if (result.modifiedCount === 1) this.freed([documentId]);
    return result.modifiedCount === 1;
  }

  /** Reads the lock record and works out why an acquisition is no longer current. */
  private async explainLoss(state: HeldLockState, session?: ClientSession): Promise<LockNotHeldError> {
    const { documentId, token, fence } = state.lock;
    const record = await this.locks.findOne({ _id: documentId } as Document, { projection: { token: 1, fence: 1, expiresAt: 1 }, session, ...PRIMARY });
    const ours = record !== null && (record.token === token || Number(record.fence) === fence);
    if (!session?.inTransaction() || ours) return this.lossFrom(state, record);
    // Inside a transaction the read is of its snapshot, taken at its first operation (R12): no
    // record, or an earlier acquisition's, may only say that this lock was taken after it (every
    // lock call runs outside the caller's transaction). The record as it is now decides (the
    // verify read, #cmd-verify-read): still this acquisition's, the lock is held and only this
    // transaction cannot see it, so the instance keeps it (`lost` stays unset).
    const now = await this.locks.findOne({ _id: documentId } as Document, { projection: { token: 1, fence: 1, expiresAt: 1, now: '$$NOW' }, ...PRIMARY });
    if (now && now.token === token && (now.expiresAt as Date) > (now.now as Date)) {
      return new LockNotHeldError(
        documentId,
        'not_locked',
        `The lock on document ${describeId(documentId)} was taken after this transaction's snapshot (its first operation), so the transaction cannot see it and nothing was written in it. ` +
          'The lock is still held: take it before the transaction begins, or write outside the transaction.',
      );
    }
    return this.lossFrom(state, now);
  }

  /**
   * The error for a lost acquisition, given its record as just read (or null if it is gone), by
   * the judgment single locks and groups share (lock-loss.ts, lossOf); recorded in `state.lost`.
   */
  private async lossFrom(state: HeldLockState, record: Document | null): Promise<LockNotHeldError> {
    const view: RecordView | null = record && {
      mine: record.token === state.lock.token,
      other: typeof record.token === 'string' && record.token !== state.lock.token,
      fence: record.fence === undefined || record.fence === null ? undefined : Number(record.fence),
      // The server's expiry (another instance of the acquisition, in another process, may have moved it).
      ...(record.expiresAt instanceof Date ? { expiresAt: record.expiresAt } : {}),
    };
    let error = lossOf(state, view, this.purgeAfterMs);
    if (error.reason === 'vanished') error = lossOf(state, view, await this.purgeAfterNow());
    state.lost = error.reason;
    return error;
  }

  /**
   * How long the TTL index keeps released records NOW, at most this process's `purgeAfter`, for a
   * loss the configured value would call 'vanished' (gone before a release could have been purged):
   * another deploy may have shortened it since this process started (lock-collection-setup.ts moves
   * the index to its own `purgeAfter` with collMod), and then a release purged by it is no deletion.
   * One `listIndexes` (as the setup's, #cmd-setup-list-indexes), only on that rare path. No TTL
   * index on `expiresAt` (or no collection): nothing purges, the configured value stands. A read
   * that fails: 0, since a purge can then not be ruled out (the error says 'released', "unless it
   * was deleted by hand").
   */
  private async purgeAfterNow(): Promise<number> {
    try {
      const indexes = await this.locks.listIndexes(PRIMARY as mongo.ListIndexesOptions).toArray();
      let kept = this.purgeAfterMs;
      for (const index of indexes) {
        const fields = Object.keys((index.key ?? {}) as Document);
        const seconds = index.expireAfterSeconds as unknown;
        if (fields.length === 1 && fields[0] === 'expiresAt' && typeof seconds === 'number') kept = Math.min(kept, seconds * 1000);
      }
      return kept;
    } catch (error) {
      if ((error as { code?: unknown }).code === 26) return this.purgeAfterMs; // NamespaceNotFound: no collection, no index
      return 0;
    }
  }

  // ---- The web story's commands (tickets, unlock by owner, status, listing); each is described,
  // ---- with the mongod rules it relies on, in docs/mongodb-compatibility.md (#cmd-resume,
  // ---- #cmd-explain-stale-ticket, #cmd-unlock-by-owner, #cmd-lock-status, #cmd-list-locks).

  /**
   * Continues one acquisition (a lock ticket) for the owner that took it, only while it is still
   * current, and extends it to `ttl` from the server's now, or, without `ttl`, to the acquisition's
   * own ttl (stored in the record by the acquisition; `fallbackTtl`, the plugin's, for a record
   * written before that field existed). One `findAndModify`, no upsert:
   *  - filter `{ _id, owner, token, $expr: expiresAt > $$NOW }`: the `_id` index finds the record
   *    (IDHACK); the other conditions make the command match only this very acquisition, held by
   *    this owner and unexpired by the server's clock. `$expr` is allowed here because this is
   *    not an upsert (mongod clears the `$expr` feature only for upserts:
   *    src/mongo/db/query/write_ops/parsed_writes_common.h). If a takeover writes the record
   *    concurrently, mongod re-evaluates the whole filter against the latest version before it
   *    writes (write_stage_common::ensureStillMatches, src/mongo/db/exec/write_stage_common.cpp),
   *    so a resume never extends someone else's lock;
   *  - the update keeps token, fence, owner, label and the stored ttl (it is the same acquisition)
   *    and only moves `expiresAt`. Without a caller ttl it adds `$ifNull: ['$ttl', fallback]`, the
   *    record's own field read by the same `$set` stage (R4: the stage sees the record as it was);
   *    the fallback, like every caller value, is a `$literal`;
   *  - the reply is projected to fence, dates, label, the stored ttl and `$$NOW`: never the owner key.
   * When nothing matched, one more read (`explainStaleTicket`) says why.
   */
  async resume(documentId: unknown, ownerKey: string, ticket: TicketParts, ttl: number | undefined, fallbackTtl: number): Promise<Grant> {
    this.refuseIfInOpenTransaction(documentId);
    const extension = ttl === undefined ? { $ifNull: ['$ttl', lit(fallbackTtl)] } : lit(ttl);
    // Read immediately before sending: the lease is timed from here (lease.ts).
    const sentAt = monotonicNow();
    // A resume moves the expiry of an acquisition that an instance of this process may carry:
    // that instance's lease hears of it as of an extension (held-lock.ts, startResume; without
    // the caller's ttl, the acquisition's, which the record stores).
    const pending = startResume(this.scope, documentId, ticket.token, sentAt, ttl);
    let grant: Grant | undefined;
    try {
      const record = await this.locks.findOneAndUpdate(
        { _id: documentId, owner: ownerKey, token: ticket.token, ...UNEXPIRED } as Document,
        [{ $set: { expiresAt: { $add: ['$$NOW', extension] } } }],
        { returnDocument: 'after', projection: { _id: 0, fence: 1, acquiredAt: 1, expiresAt: 1, label: 1, ttl: 1, now: '$$NOW' } },
      );
      if (record) {
        // The ttl this command added: the caller's, else the record's (what `$ifNull` chose).
        const added = ttl ?? (typeof record.ttl === 'number' ? record.ttl : fallbackTtl);
        grant = {
          token: ticket.token,
          fence: Number(record.fence),
          acquiredAt: record.acquiredAt as Date,
          expiresAt: record.expiresAt as Date,
          // A retried findAndModify comes back without the projection (SERVER-31242, see acquire):
          // then the command's `$$NOW` is the new expiry minus the ttl it added (a command sent
          // after `sentAt`, so the lease stays conservative).
          serverNow: record.now instanceof Date ? record.now : new Date((record.expiresAt as Date).getTime() - added),
          sentAt,
          label: typeof record.label === 'string' ? record.label : null,
          ...(ttl === undefined ? { ttl: added } : {}),
        };
      }
    } finally {
      if (pending) finishExtension(pending, grant);
    }
    if (!grant) throw await this.explainStaleTicket(documentId, ownerKey, ticket);
    return grant;
  }

  /**
   * Why a ticket no longer works: one read of the record, projected to comparisons computed by
   * the server (same token? same fence? this owner? expired by `$$NOW`?), so neither the current
   * holder's token nor any owner key reaches this process. `mine` also says whether a later
   * acquisition that took the lock over is this owner's (a second tab of the same session).
   */
  private async explainStaleTicket(documentId: unknown, ownerKey: string, ticket: TicketParts): Promise<LockNotHeldError> {
    const record = await this.locks.findOne({ _id: documentId } as Document, {
      projection: {
        _id: 0,
        sameToken: { $eq: ['$token', lit(ticket.token)] },
        released: { $eq: [{ $ifNull: ['$token', null] }, null] },
        sameFence: { $eq: ['$fence', lit(ticket.fence)] },
        mine: { $eq: ['$owner', lit(ownerKey)] },
        expiresAt: 1,
      },
      ...PRIMARY,
    });
    // Gone: purged by the TTL index at least purgeAfter after it expired or was released, or the
    // lock collection was dropped or the record deleted. A ticket does not carry its expiry, so say all.
    if (!record) {
      return new LockNotHeldError(
        documentId,
        'vanished',
        `The lock record of document ${describeId(documentId)} is gone: purged by the TTL index after this lock expired or was released, or the lock collection was dropped or the record deleted. Nothing was written; lock the document again.`,
      );
    }
    if (record.sameToken === true) {
      if (record.mine !== true) {
        return new LockNotHeldError(
          documentId,
          'not_locked',
          `This lock ticket for document ${describeId(documentId)} was not issued to this owner; nothing was written. Lock the document to edit it.`,
        );
      }
      return new LockExpiredError(documentId, record.expiresAt instanceof Date ? record.expiresAt : undefined);
    }
    if (record.released === true && record.sameFence === true) return new LockNotHeldError(documentId, 'released');
    // A later acquisition: the server said whether its owner is this caller's (`mine`). Once it was
    // released its owner is cleared, and whose it was is unknown.
    return new LockNotHeldError(documentId, 'taken_over', undefined, undefined, record.released === true ? undefined : { sameOwner: record.mine === true });
  }

  /**
   * Releases `ownerKey`'s unexpired lock on a document (and, with `token`, only that
   * acquisition): one `update` of the record by `_id`, with the owner (and token) in the filter so
   * that nobody else's lock is ever released. Resolves to whether a lock was released.
   */
  async releaseHeld(documentId: unknown, ownerKey: string, token?: string): Promise<boolean> {
    this.refuseIfInOpenTransaction(documentId);
    const filter: Document = { _id: documentId, owner: ownerKey, ...UNEXPIRED };
    if (token !== undefined) filter.token = token;
    const result = await this.locks.updateOne(filter, RELEASE);
    if (result.matchedCount === 1) this.freed([documentId]);
    return result.matchedCount === 1;
  }

  /**
   * The unexpired locks among `ids`, in one `find` through the `_id` index (`$in`). `batchSize` is
   * one more than the number of ids, so mongod reaches the end of the matches while filling the
   * first batch and closes the cursor (no cursor is kept at EOF: src/mongo/db/query/find.cpp
   * shouldSaveCursor), and no getMore follows, unless the records pass one 16 MiB batch
   * (FindCommon::haveSpaceForNext, src/mongo/db/query/find_common.cpp): then the driver reads the
   * rest with getMore, so no record is ever left out (a record left out would read as no lock).
   * With `ownerKey`, the server also says whether each lock is that owner's (`$eq` against a
   * `$literal`), without returning any owner.
   */
  async statusOf(ids: unknown[], ownerKey: string | undefined): Promise<Document[]> {
    if (ids.length === 0) return [];
    const projection: Document = { acquiredAt: 1, expiresAt: 1, label: 1, now: '$$NOW' };
    if (ownerKey !== undefined) projection.mine = { $eq: ['$owner', lit(ownerKey)] };
    return this.locks.find({ _id: { $in: ids }, ...UNEXPIRED } as Document, { projection, batchSize: ids.length + 1, ...PRIMARY }).toArray();
  }

  /**
   * One page of unexpired locks in `_id` order, optionally only `ownerKey`'s: one `find` sorted on
   * `_id`, starting after `after`, `limit + 1` documents (the extra one says whether there is a
   * next page). `limit` makes mongod close the cursor once it is reached; should the records pass
   * one 16 MiB batch (ids of many kilobytes), the driver reads the rest of the page with getMore
   * (see statusOf), so a page is never cut short. With an owner it runs through the
   * `{ owner: 1, _id: 1 }` index (equality on owner, then the range and the sort on `_id`);
   * without, through `_id`.
   *
   * After `after`: `_id` greater than it, or of a BSON type that sorts after its type. A query's
   * `$gt` only matches values of the operand's own type bracket (manual, "Comparison/Sort Order":
   * "for most data types, comparison operators only perform comparisons on fields where the BSON
   * type matches the query value's type"), while the sort orders every type (numbers, strings,
   * binary data, ObjectIds, dates, in that order): on `_id`s of several types (a Mixed `_id`, or
   * a lock collection shared by models of different `_id` types) `$gt` alone would end the
   * listing at the first type boundary. Each branch of the `$or` is a range of the `_id` index
   * (`$type` has index bounds), merged in `_id` order.
   *
   * Read with `useBigInt64`: an int64 `_id` comes back as a bigint, as a lock call's id is
   * (id-value.ts), and not as a number (within 2^53) or a Long (beyond).
   */
  async list(ownerKey: string | undefined, limit: number, after: { id: unknown; type: number } | undefined): Promise<{ records: Document[]; more: boolean }> {
    const filter: Document = { ...UNEXPIRED };
    if (ownerKey !== undefined) filter.owner = ownerKey;
    if (after !== undefined) {
      const later = typesSortingAfter(after.type);
      filter.$or = later.length === 0 ? [{ _id: { $gt: after.id } }] : [{ _id: { $gt: after.id } }, { _id: { $type: later } }];
    }
    const records = await this.locks
      .find(filter, { projection: { acquiredAt: 1, expiresAt: 1, label: 1, now: '$$NOW' }, sort: { _id: 1 }, limit: limit + 1, batchSize: limit + 1, useBigInt64: true, ...PRIMARY })
      .toArray();
    return { records: records.slice(0, limit), more: records.length > limit };
  }

  // ---- Claiming the next free document (Model.lockNext, src/lock-next.ts). Each command is
  // ---- described, with the mongod rules it relies on (R30-R35), in docs/mongodb-compatibility.md
  // ---- (#cmd-next-candidates, #cmd-claim-free).

  /**
   * The `_id`s of up to `limit` documents of `documents` that match `match` and have no unexpired
   * lock, in `sort` order: one `aggregate` on the user's collection.
   *  - `$match` (the caller's filter, cast by Mongoose as Model.find casts it) and `$sort` come
   *    first, so the query planner serves them with the user's index (R32);
   *  - `$lookup` of this lock collection, joined on `_id` (localField/foreignField, so each
   *    document's record is found through the lock collection's `_id` index), keeping only the
   *    record if it is unexpired by the command's `$$NOW` (the 5.0 concise syntax, R30): a
   *    document whose joined array is empty is free, whatever the TTL monitor has or has not
   *    deleted (an expired record is free);
   *  - `$limit` then `$project: { _id: 1 }`: only ids travel. `batchSize` is one more than the
   *    limit, so the first batch reaches the end of the pipeline and mongod closes the cursor (no
   *    `getMore`).
   * With `snapshot`, the read carries readConcern "snapshot" (replica sets, R31): the documents and
   * their lock records are read at one point in time, so an empty answer means that at that
   * instant no matching document was free. Without it (standalone servers, sharded clusters) the
   * read yields between documents and each record is read at its own moment (R34).
   * Nothing here decides who gets a document: the acquisition (`claimFree`) does.
   */
  async freeCandidates(documents: Collection<Document>, match: Document, sort: Document | undefined, limit: number, snapshot: boolean): Promise<unknown[]> {
    const pipeline: Document[] = [{ $match: match }];
    if (sort) pipeline.push({ $sort: sort });
    pipeline.push(
      this.heldLockLookup(),
      { $match: { lock: { $size: 0 } } },
      { $limit: limit },
      { $project: { _id: 1 } },
    );
    const found = await documents
      .aggregate(pipeline, { batchSize: limit + 1, ...PRIMARY, ...(snapshot ? { readConcern: { level: 'snapshot' as const } } : {}) })
      .toArray();
    return found.map((doc) => doc._id);
  }

  /**
   * The `$lookup` stage of lockNext's reads: each document's lock record, joined on `_id`
   * (localField/foreignField: through the lock collection's `_id` index), kept in `lock` only if
   * it is unexpired by the command's `$$NOW` (the 5.0 concise syntax, R30). `_id` is unique, so
   * `lock` holds one record (held) or none (free). A free document a waiting caller reserved is
   * free here: a reservation is no lock, and claimFree takes it (PRODUCT.md property 14).
   */
  private heldLockLookup(): Document {
    return {
      $lookup: {
        from: this.locks.collectionName,
        localField: '_id',
        foreignField: '_id',
        pipeline: [{ $match: UNEXPIRED }, { $project: { _id: 1 } }],
        as: 'lock',
      },
    };
  }

  /**
   * The first document of `documents` in `sort` order that matches `match`, is not among
   * `excluded`, and is HELD (an unexpired lock by the server's clock), with the command's `$$NOW`:
   * the document a waiting `lockNext` call that found none free reserves (next-reservation.ts).
   * One `aggregate`, freeCandidates' pipeline with the opposite test after the same `$lookup`
   * (`$size: 1`), `$limit: 1`, and `$$NOW` projected (a system variable, one value for the whole
   * command: the manual's "Variables in Aggregation Expressions"). Sent only by a call that has
   * waited RESERVE_AFTER_MS, never on a claim's path. Null when no matching document is held.
   */
  async firstHeldCandidate(documents: Collection<Document>, match: Document, sort: Document | undefined, excluded: readonly unknown[]): Promise<{ id: unknown; serverNow: Date } | null> {
    const pipeline: Document[] = [{ $match: excluded.length === 0 ? match : { $and: [match, { _id: { $nin: excluded } }] } }];
    if (sort) pipeline.push({ $sort: sort });
    pipeline.push(this.heldLockLookup(), { $match: { lock: { $size: 1 } } }, { $limit: 1 }, { $project: { _id: 1, now: '$$NOW' } });
    const [found] = await documents.aggregate(pipeline, { batchSize: 2, ...PRIMARY }).toArray();
    return found ? { id: found._id, serverNow: found.now as Date } : null;
  }

  /**
   * Whether `documentId` still matches `match`, and if so whether it is held: 'held', 'free' or
   * 'gone' (no longer matching, or deleted). One `aggregate` on the model's collection: `$match`
   * of the filter AND the `_id` (so served by the `_id` index), the same `$lookup` as
   * freeCandidates, and a `$project` of the lock's presence. A waiting `lockNext` call asks it of
   * the document it reserved after each read that found none free (next-reservation.ts): one that
   * no longer matches is released from its reservation at once.
   */
  async reservedCandidateState(documents: Collection<Document>, match: Document, documentId: unknown): Promise<'held' | 'free' | 'gone'> {
    const pipeline: Document[] = [{ $match: { $and: [match, { _id: documentId }] } }, this.heldLockLookup(), { $project: { _id: 0, held: { $gt: [{ $size: '$lock' }, 0] } } }];
    const [found] = await documents.aggregate(pipeline, { batchSize: 2, ...PRIMARY }).toArray();
    if (!found) return 'gone';
    return found.held === true ? 'held' : 'free';
  }

  /**
   * Takes the lock on `documentId` for `ownerKey` only if nobody holds it, not even `ownerKey`
   * (so two workers sharing an owner never get one document): the acquire's `findAndModify`
   * (see `acquire`, same filter, upsert and projection) with the condition "free or expired"
   * alone, whatever a waiting group's reservation (no lock: lockNext passing a free reserved
   * document over would answer "none" while a matching document is free). Resolves to the grant and the monotonic time its request was sent, or to null when the
   * record is held (the pipeline left it binary-identical: a no-op, nothing written, R5). A
   * record written by an open caller transaction of this process counts as held (mongod would
   * make the write wait for that transaction, R17).
   */
  async claimFree(documentId: unknown, ownerKey: string, ttl: number, label: string | null): Promise<Grant | null> {
    if (this.writtenByCallerTransaction(documentId)) return null;
    // Free or expired, whatever a waiting group's reservation: lockNext answers "none" only when no
    // matching document was FREE (PRODUCT.md property 14), and a reservation is no lock.
    const { record, token, sentAt } = await this.sendAcquire(documentId, ownerKey, freeOrHeldBy(undefined), ttl, label);
    // A retried findAndModify is answered unprojected (see acquire): then the token says whether
    // it is ours, and `acquiredAt` is the granting command's `$$NOW`.
    const projected = 'acquired' in record;
    if (!(projected ? record.acquired === true : record.token === token)) return null;
    return {
      token,
      fence: Number(record.fence),
      acquiredAt: record.acquiredAt as Date,
      expiresAt: record.expiresAt as Date,
      serverNow: (projected ? record.now : record.acquiredAt) as Date,
      sentAt,
      label: typeof record.label === 'string' ? record.label : null,
    };
  }

  /**
   * Whether an open caller transaction of this process writes `documentId`'s lock record (see
   * refuseIfInOpenTransaction): nothing is sent. lockNext passes such a candidate over while the
   * transaction is open instead of reading it again and again (it stays free to the candidate
   * read, which runs outside that transaction).
   */
  writtenByCallerTransaction(documentId: unknown): boolean {
    return callerTransactions.writing(this.scope, documentId);
  }

  // ---- Several documents under one acquisition (Model.lockMany, lockAll, the group handle). Each
  // ---- command is described, with the mongod rules it relies on, in docs/mongodb-compatibility.md
  // ---- under "Several documents at once" (#cmd-take-group, #cmd-read-group, #cmd-group-blockers,
  // ---- #cmd-group-precheck, #cmd-release-group, #cmd-extend-group, #cmd-explain-group-loss;
  // ---- rules R23-R25).

  /**
   * Refuses a group acquisition when an open caller transaction of this process writes the lock
   * record of any of `ids` (see refuseIfInOpenTransaction): nothing is sent.
   */
  refuseGroupInOpenTransaction(ids: readonly unknown[]): void {
    for (const id of ids) this.refuseIfInOpenTransaction(id);
  }

  /**
   * Takes the locks of several documents for one acquisition, in ONE `update` command of one
   * statement per document, `ordered: false`. Every statement is exactly `acquire`'s write: filter
   * `{ _id }` alone with `upsert: true` (R1, R3), the same conditional pipeline (free, expired or
   * held by the same owner; R4, R5, R8), and the same fresh `token` for all of them, so the group is
   * one acquisition that one filter (`_id` among the group's, `token`) can find, renew and release.
   * Resolves to whether every statement wrote the grant: a grant always writes (its token is new),
   * a refusal is binary-equal, a no-op that counts in neither `nModified` nor `upserted` (R5), so
   * `nModified + upserted === statements` exactly when all were taken.
   * Why this is correct on mongod: performUpdates (src/mongo/db/query/write_ops/write_ops_exec.cpp)
   * runs the statements one after the other, each a single-document update of its own
   * (performSingleUpdateOpWithDupKeyRetry, so each `_id` upsert that loses an insert race is
   * retried by the server as an update, R9), all with one `$$NOW` (R6, R23). The statements are not
   * atomic together (R24): another command may run between two of them, which is why the caller
   * never trusts a partial grant and releases it by token. A statement whose upsert still failed
   * with a duplicate key (the retries exhausted) is a write error of that statement alone; with
   * `ordered: false` the others still run (handleError), and it counts as not taken (R25).
   * `leaseMs` (a waiting group's ordered step, lock-group.ts stepLease): the expiry is `$$NOW +
   * leaseMs` instead of `$$NOW + ttl`; the record's `ttl` stays the acquisition's (what a resume
   * without its own ttl adds, extend).
   */
  async takeGroup(
    targets: readonly { documentId: unknown; ownerKey: string }[],
    token: string,
    ttl: number,
    label: string | null,
    reservationKey?: string,
    leaseMs: number = ttl,
  ): Promise<boolean | 'timedOut'> {
    const pipelines = new Map<string, Document[]>();
    const grant = (ownerKey: string): Document[] => {
      let pipeline = pipelines.get(ownerKey);
      if (!pipeline) {
        // A waiting group's own reservation lets it in; any other live one refuses (acquirable).
        pipeline = applyIf(acquirable(ownerKey, reservationKey), {
          owner: lit(ownerKey),
          token: lit(token),
          fence: NEXT_FENCE,
          acquiredAt: '$$NOW',
          expiresAt: { $add: ['$$NOW', lit(leaseMs)] },
          label: lit(label),
          ttl: lit(ttl),
        });
        pipelines.set(ownerKey, pipeline);
      }
      return pipeline;
    };
    try {
      const result = await this.locks.bulkWrite(
        targets.map((t) => ({ updateOne: { filter: { _id: t.documentId } as Document, update: grant(t.ownerKey), upsert: true } })),
        // A statement whose record another process's transaction wrote waits for that transaction
        // (R17), holding the statements before it: maxTimeMS bounds that (R26).
        { ordered: false, maxTimeMS: groupRoundMaxTimeMS(targets.length) },
      );
      return result.modifiedCount + result.upsertedCount === targets.length;
    } catch (error) {
      if (onlyDuplicateKeys(error)) {
        // A hand-made unique index: a configuration fault, not a refusal (the caller releases what
        // the other statements took, by token, as after any fault).
        const foreign = foreignUniqueIndexInBulk(error, this.locks.collectionName);
        if (foreign) throw foreign;
        return false;
      }
      // MaxTimeMSExpired (50) fails the whole command (write_ops_exec.cpp handleError); the
      // statements applied before it stay, and the caller releases them by token (R26).
      if ((error as { code?: unknown }).code === 50) return 'timedOut';
      throw unwrapBulkError(error);
    }
  }

  /**
   * The grants of one group acquisition, with the server's clock: one `find` of the records among
   * `ids` that carry `token`, through the `_id` index, in one batch (`batchSize` = number of ids,
   * `singleBatch`: no getMore, see statusOf). Projected to the fence, the dates, the label and
   * `$$NOW`; never an owner.
   */
  async readGroupGrants(ids: readonly unknown[], token: string): Promise<Document[]> {
    return this.locks
      .find({ _id: { $in: ids }, token } as Document, {
        projection: { fence: 1, acquiredAt: 1, expiresAt: 1, label: 1, now: '$$NOW' },
        batchSize: ids.length,
        singleBatch: true,
        ...PRIMARY,
      })
      .toArray();
  }

  /**
   * What stopped a group acquisition: one `find` of the records among `ids` that are unexpired by
   * the server's clock and do not carry this acquisition's `token` (they are someone else's: a
   * release of ours sets the token to null and the expiry to its `$$NOW`, so a record of ours is
   * never counted, whichever of the two commands runs first). Projected to expiry, label and
   * `$$NOW` (no owner, no token).
   */
  async findGroupBlockers(ids: readonly unknown[], token: string, reservationKey?: string): Promise<GroupBlocker[]> {
    return this.readBlockers({ _id: { $in: ids }, $or: [{ token: { $ne: token }, ...UNEXPIRED }, reservedAgainst(reservationKey)] }, ids.length);
  }

  /**
   * Before a waiting group tries again: the records among `ids` that would refuse it now, i.e.
   * unexpired by the server's clock and held by an owner other than `ownerKeys` (a group's own
   * owner takes its own locks over), or free with a live reservation that is not the group's
   * (acquirable). One `find`, nothing written: a waiter that is still blocked takes no lock even
   * for a moment, so it neither refuses other callers nor wakes their waiters with a release.
   * Projected as findGroupBlockers.
   */
  async findBlockersFor(ids: readonly unknown[], ownerKeys: readonly string[], reservationKey?: string): Promise<GroupBlocker[]> {
    return this.readBlockers({ _id: { $in: ids }, $or: [{ owner: { $nin: ownerKeys }, ...UNEXPIRED }, reservedAgainst(reservationKey)] }, ids.length);
  }

  /** The blockers `filter` finds (at most `count`, one batch), each a lock or a reservation; no owner, token or key. */
  private async readBlockers(filter: Document, count: number): Promise<GroupBlocker[]> {
    const records = await this.locks
      .find(filter, { projection: { expiresAt: 1, reservedUntil: 1, label: 1, now: '$$NOW' }, batchSize: count, singleBatch: true, ...PRIMARY })
      .toArray();
    return records.map((record) => groupBlockerFrom(record._id, record));
  }

  /**
   * Reserves the free document `documentId` for the waiter whose reservation key is `key`, first
   * refused at `since` (group-reservation.ts): one `update` of one statement, a pipeline upsert with
   * filter `{ _id }` alone (R1, R3) that writes `reservedBy = key`, `reservedSince = since` and
   * `reservedUntil = $$NOW + leaseMs` when the record has no live reservation, it is `key`'s own (a
   * renewal), or its reserver is younger (olderThanReserver: a takeover), and otherwise leaves the
   * record binary-equal, a no-op (R5): the oldest waiter keeps it, a younger one does not replace
   * it. The three fields are one `$set` stage, each a `$cond` on the same condition evaluated against
   * the record before the stage (applyIf), so they always move together; a single-document update is
   * atomic and re-evaluated after a write conflict (R8), so of two racing reserves the older ends up
   * holding the reservation whichever lands first. It touches no lock field: whoever holds the document keeps it, and the record's expiry (so
   * the TTL index's purge) stays; a document without a record gets one with only `expiresAt =
   * $$NOW` (free, purged `purgeAfter` later like a released record) and the reservation. Best
   * effort (the next renewal tries again): a duplicate key left after the server's retries (R9)
   * and a wait behind another process's transaction cut by `maxTimeMS` (R26) resolve to false.
   * Resolves to whether `key` holds the reservation now: the update wrote (a reservation, renewal
   * or takeover always moves `reservedUntil` to a new `$$NOW + leaseMs`, and an upsert inserts),
   * where a reservation kept by an older waiter leaves the record binary-equal, which mongod counts
   * as matched and not modified (R5: UpdateStage::transformAndUpdate writes, and `nModified` counts,
   * only `if (docWasModified)`; the emulator likewise, writes.ts). The waiter that holds it waits
   * more attentively than the others (lock-waiter.ts acquireWaiting).
   */
  async reserve(documentId: unknown, key: string, since: Date, leaseMs: number): Promise<boolean> {
    const yields = { $or: [reservationLetsIn(key), olderThanReserver(key, since)] };
    const update = [
      {
        $set: {
          reservedBy: { $cond: [yields, lit(key), '$reservedBy'] },
          reservedUntil: { $cond: [yields, { $add: ['$$NOW', lit(leaseMs)] }, '$reservedUntil'] },
          reservedSince: { $cond: [yields, lit(since), '$reservedSince'] },
          expiresAt: { $ifNull: ['$expiresAt', '$$NOW'] },
        },
      },
    ];
    try {
      const result = await this.locks.updateOne({ _id: documentId } as Document, update, { upsert: true, maxTimeMS: groupRoundMaxTimeMS(1) });
      return result.modifiedCount > 0 || result.upsertedCount > 0;
    } catch (error) {
      if (isDuplicateKey(error) || (error as { code?: unknown }).code === 50) return false;
      throw error;
    }
  }

  /**
   * Ends the reservation `key` holds on `documentId`: one `update`, filter `_id` and this `key` (so
   * nobody else's reservation is touched, also one that took this one over), `$unset` of the three
   * reservation fields. Nothing else of
   * the record changes; the change event it makes wakes the document's waiters (LockWatch).
   */
  async clearReservation(documentId: unknown, key: string): Promise<void> {
    await this.locks.updateOne({ _id: documentId, reservedBy: key } as Document, { $unset: { reservedBy: '', reservedUntil: '', reservedSince: '' } });
  }

  /**
   * Releases what one group acquisition holds among `ids`: one `update` of one multi statement,
   * filter `_id` among them (never a filter without `_id`: it is targeted through the `_id` index,
   * and on a sharded cluster to the shards owning those ids), this `token` and unexpired by
   * `$$NOW`; the same release pipeline as `release` (the record keeps its fence). Only this
   * acquisition's records match (the token is unique to it), and each is re-checked after a write
   * conflict (R8), so nobody else's lock is ever released. Resolves to how many were released.
   */
  async releaseGroup(ids: readonly unknown[], token: string): Promise<number> {
    const result = await this.locks.updateMany({ _id: { $in: ids }, token, ...UNEXPIRED } as Document, RELEASE);
    if (result.matchedCount > 0) this.freed(ids);
    return result.matchedCount;
  }

  /**
   * Renews what one group acquisition holds among `ids` to `ttl` from the server's now: one
   * `update` of one multi statement with the same filter as releaseGroup and `expiresAt: $$NOW +
   * ttl`. Every record it renews gets the same expiry (one `$$NOW` per command, R6). Resolves to
   * how many matched (a renewal to the same expiry within one millisecond is a no-op, so matched,
   * not modified, is what says the lock is still held).
   */
  async extendGroup(ids: readonly unknown[], token: string, ttl: number): Promise<number> {
    const result = await this.locks.updateMany({ _id: { $in: ids }, token, ...UNEXPIRED } as Document, [{ $set: { expiresAt: { $add: ['$$NOW', lit(ttl)] } } }]);
    return result.matchedCount;
  }

  /**
   * Why a group acquisition no longer holds all its documents: one `find` of the records, projected
   * to comparisons made by the server (this token? still unexpired? released, i.e. no token?),
   * the fence and the expiry, so no other holder's token or owner reaches this process. Returns the
   * error for the first document (in the order of `states`) that is known lost, judged as a single
   * lock's (lock-loss.ts, lossOf: expired with our token, taken over by another acquisition,
   * released, or gone: released and purged, expired and purged, or deleted). `afterOwnRelease` says
   * the caller has just released the group itself, so a lock found released (our fence, no token,
   * or purged since) says nothing about who released it and is named only when nothing else
   * explains the shortfall. Without `afterOwnRelease`, resolves to undefined when every lock is
   * still held by this acquisition (the shortfall was a lock the caller released meanwhile). Marks
   * no state; the caller does.
   */
  async explainGroupLoss(states: readonly HeldLockState[], afterOwnRelease: boolean): Promise<LockNotHeldError | undefined> {
    const first = states[0];
    if (!first) throw new Error('mongoose-pessimistic-lock: explainGroupLoss needs at least one lock');
    const token = first.lock.token;
    const records = await this.locks
      .find({ _id: { $in: states.map((s) => s.lock.documentId) } } as Document, {
        projection: {
          mine: { $eq: ['$token', lit(token)] },
          held: { $and: [{ $eq: ['$token', lit(token)] }, { $gt: ['$expiresAt', '$$NOW'] }] },
          released: { $eq: [{ $ifNull: ['$token', null] }, null] },
          fence: 1,
          expiresAt: 1,
        },
        batchSize: states.length,
        singleBatch: true,
        ...PRIMARY,
      })
      .toArray();
    const byId = new Map(records.map((r) => [idKey(r._id), r]));
    let released: LockNotHeldError | undefined;
    let purgeAfterNow: number | undefined;
    for (const state of states) {
      const record = byId.get(idKey(state.lock.documentId));
      if (record?.held === true) continue; // still this acquisition's
      const view: RecordView | null = record
        ? {
            mine: record.mine === true,
            // A token that is neither ours nor null is another acquisition's.
            other: record.mine !== true && record.released !== true,
            fence: record.fence === undefined || record.fence === null ? undefined : Number(record.fence),
            ...(record.expiresAt instanceof Date ? { expiresAt: record.expiresAt } : {}),
          }
        : null;
      let error = lossOf(state, view, this.purgeAfterMs);
      // As lossFrom: 'vanished' only by how long the TTL index keeps released records now.
      if (error.reason === 'vanished') error = lossOf(state, view, (purgeAfterNow ??= await this.purgeAfterNow()));
      if (error.reason !== 'released' || !afterOwnRelease) return error;
      released ??= error;
    }
    // Nothing but released locks explains it (or, after our own release, nothing at all: a lock
    // left the group meanwhile): 'released'.
    return released ?? (afterOwnRelease ? new LockNotHeldError(first.lock.documentId, 'released') : undefined);
  }
}

/** A public LockInfo from a lock record read with `label` and `now: '$$NOW'`. */
export function lockInfoFrom(documentId: unknown, record: Document): LockInfo {
  const expiresAt = record.expiresAt as Date;
  return {
    documentId,
    acquiredAt: record.acquiredAt as Date,
    expiresAt,
    remainingMs: expiresAt.getTime() - (record.now as Date).getTime(),
    label: typeof record.label === 'string' ? record.label : null,
  };
}

/** What stops a write, from a lock record read with `label` and `now: '$$NOW'` (or nothing known). */
function blockerFrom(documentId: unknown, record: Document | null): Blocker {
  if (!record || !(record.expiresAt instanceof Date)) return { documentId };
  const expiresAt = record.expiresAt;
  const label = typeof record.label === 'string' ? record.label : null;
  return { documentId, expiresAt, remainingMs: expiresAt.getTime() - (record.now as Date).getTime(), label };
}

/** A lock (or a reservation) that stopped a group acquisition, with its holder's display label. */
export interface GroupBlocker extends Blocker {
  label: string | null;
  /** The server's `$$NOW` of the read that found it (a waiting group's `since`, group-reservation.ts). */
  serverNow: Date;
  /** A free document reserved by another waiting group: `expiresAt` is undefined, `remainingMs` says when the reservation lapses unless renewed. */
  reserved?: boolean;
}

/** A GroupBlocker from a record read with `expiresAt`, `reservedUntil`, `label` and `now: '$$NOW'`. */
function groupBlockerFrom(documentId: unknown, record: Document): GroupBlocker {
  const now = record.now as Date;
  if (record.expiresAt instanceof Date && record.expiresAt > now) return { ...blockerFrom(documentId, record), label: typeof record.label === 'string' ? record.label : null, serverNow: now };
  const until = record.reservedUntil instanceof Date ? record.reservedUntil.getTime() - now.getTime() : undefined;
  return { documentId, expiresAt: undefined, remainingMs: until, label: null, reserved: true, serverNow: now };
}


/**
 * The BSON types (as `$type` aliases) in mongod's sort order, by type bracket (manual,
 * "Comparison/Sort Order": MinKey, Null, Numbers, Symbol and String, Object, Array, BinData,
 * ObjectId, Boolean, Date, Timestamp, Regular Expression, MaxKey), from Numbers on: an `_id` is
 * never null, MinKey, an array or undefined (mongod refuses them), and a lock's `_id` is one of
 * the scalar types id-value.ts accepts.
 */
const SORT_BRACKETS: readonly (readonly string[])[] = [
  ['double', 'int', 'long', 'decimal'],
  ['symbol', 'string'],
  ['object'],
  ['binData'],
  ['objectId'],
  ['bool'],
  ['date'],
  ['timestamp'],
  ['regex'],
  ['maxKey'],
];

/** The bracket of each BSON type byte a lock's `_id` may have (id-value.ts, BSON_TYPE). */
const BRACKET_OF_TYPE: ReadonlyMap<number, number> = new Map([
  [0x01, 0],
  [0x10, 0],
  [0x12, 0],
  [0x13, 0],
  [0x02, 1],
  [0x05, 3],
  [0x07, 4],
  [0x09, 6],
]);

/** The `$type` aliases of every type that sorts after the bracket of BSON type `type`. */
function typesSortingAfter(type: number): string[] {
  const bracket = BRACKET_OF_TYPE.get(type);
  return bracket === undefined ? [] : SORT_BRACKETS.slice(bracket + 1).flat();
}
