/**
 * The write guard: refuses writes to documents someone else has locked, on every write method of
 * a model's Mongoose collection (the object through which Mongoose sends every update, replace,
 * delete, findAndModify and bulkWrite: queries, `save()`, `doc.deleteOne()`, `Model.bulkWrite`).
 * At that point the write is final: its filter is cast exactly as it will run (setters, aliases,
 * `strictQuery`), its session is resolved (including `transactionAsyncLocalStorage`), and no
 * Mongoose middleware option can skip it.
 *
 * Three ways to run a guarded write:
 *  - joined: the write is inside the caller's transaction. The guard claims the targets' lock
 *    records in that transaction and the write commits or aborts with it (PRODUCT.md property 10).
 *  - atomic (`transactions: 'auto'` on a replica set or sharded cluster): the guard runs the
 *    claim and the write in a transaction of its own, retried on transient conflicts, so nothing
 *    happens between the check and the write (property 5). A session the caller passed outside a
 *    transaction never carries it (several writes may share that session at once); the guard's
 *    session continues from the caller's times and advances them afterwards (transaction.ts).
 *  - check, then write (`transactions: 'never'`, standalone servers): a read of the lock records,
 *    then the write. See README, Limits, for the window this leaves.
 */
import { mongo, type Connection } from 'mongoose';
import { supportsTransactions } from '../deployment';
import { InvalidLockArgumentError, InvalidLockOptionError, LockDatabaseError, LockNotHeldError, LockedError } from '../errors';
import { toLockError } from '../failures';
import { lostError, releaseOutcomeUnknown, settleReleaseWithServer, suspendLease } from '../held-lock';
import { ClaimRaceError, type Blocker, type ClaimResult, type LockStore } from '../lock-store';
import type { OwnerKey } from '../owner-key';
import { documentWriteFor, inBulkSave, isSaveWrite, type DocumentWrite } from './document-context';
import { LockedDuringWriteError, type CommittedWrites } from './errors';
import { takeLockOptions } from './options';
import { distinctIds, idKey } from '../id-key';
import { containsString, findTargetDocuments, findTargets, idsNamedBy, isCollated, isEqualityValue, narrowedTo, trustedIds, type SelectionOptions } from './targets';
import { sortKeyCondition, sortPaths, sortProjection } from './sort-key';
import { TRANSACTION_RETRY_BUDGET_MS, backedOff, refuseUnusableSession, runInTransaction } from './transaction';
import { idsUpsertMayInsert, upsertWithId } from './upsert-id';
import { sentFilter, sentUpsertUpdate, sentValue, serializeSettings, type SerializeSettings } from './sent-values';

type ClientSession = mongo.ClientSession;
type Document = mongo.Document;

/**
 * Documents per transaction of a guarded multi-document write. Each batch claims, writes and
 * releases at most this many documents, so transactions stay small whatever the write's size.
 */
export const GUARD_BATCH_SIZE = 1_000;

/** The Mongoose collection methods the guard wraps: every driver method that can change an existing document. */
export const GUARDED_METHODS = [
  'updateOne',
  'updateMany',
  'replaceOne',
  'deleteOne',
  'deleteMany',
  'findOneAndUpdate',
  'findOneAndReplace',
  'findOneAndDelete',
  'bulkWrite',
] as const;
export type GuardedMethod = (typeof GUARDED_METHODS)[number];

const SINGLE_DOCUMENT: ReadonlySet<GuardedMethod> = new Set(['updateOne', 'replaceOne', 'deleteOne', 'findOneAndUpdate', 'findOneAndReplace', 'findOneAndDelete']);
const WITH_UPDATE: ReadonlySet<GuardedMethod> = new Set(['updateOne', 'updateMany', 'replaceOne', 'findOneAndUpdate', 'findOneAndReplace']);
const REPLACING: ReadonlySet<GuardedMethod> = new Set(['replaceOne', 'findOneAndReplace']);
/** What save(), doc.deleteOne(), doc.updateOne() and doc.replaceOne() send. */
const DOCUMENT_METHODS: ReadonlySet<GuardedMethod> = new Set(['updateOne', 'replaceOne', 'deleteOne']);
const BULK_KINDS = ['insertOne', 'updateOne', 'updateMany', 'replaceOne', 'deleteOne', 'deleteMany'] as const;

/** Calls the collection's own (unguarded) method with the given arguments. */
export type Invoke = (args: unknown[]) => Promise<unknown>;

export interface GuardSettings {
  connection: Connection;
  store: LockStore;
  /** Resolves once the lock collection exists. */
  ready: Promise<unknown>;
  ownerKey: OwnerKey;
  transactions: 'auto' | 'never';
  requireLock: boolean;
}

/** Who is writing: the holder of one acquisition (a locked instance), or an owner (or nobody). */
type Writer =
  | { kind: 'holder'; document: DocumentWrite; /** saveAndUnlock's own save write: releases the lock. */ release: boolean }
  | { kind: 'owner'; ownerKey: string | undefined; mustHold: boolean };

type Mode = { kind: 'joined'; session: ClientSession } | { kind: 'atomic'; session: ClientSession | undefined } | { kind: 'check'; session: ClientSession | undefined };

const REFUSED = ' The write was refused; nothing was written.';

/** The holder's label goes with the refusal, as `Model.lock` refused by the same lock reports it. */
function refusal(blocker: Blocker): LockedError {
  return new LockedError(blocker.documentId, blocker.expiresAt, REFUSED, blocker.remainingMs, blocker.label ?? null);
}

/**
 * Runs one of the guard's own commands (on the lock collection), converting driver errors as every
 * plugin boundary does. Not the target search (findTargets): it runs the caller's filter, sort,
 * collation, hint and `let` on the caller's collection, so its errors (a filter the server
 * refuses, `$where` where it is disabled, an unknown hint, a network error) are the caller's, and
 * reach the caller as the driver made them, as the unguarded write would have returned them.
 */
async function own<T>(operation: string, run: () => Promise<T>): Promise<T> {
  try {
    return await run();
  } catch (error) {
    if (error instanceof ClaimRaceError) throw error;
    throw toLockError(operation, error);
  }
}

function chunks<T>(items: T[], size: number): T[][] {
  const out: T[][] = [];
  for (let i = 0; i < items.length; i += size) out.push(items.slice(i, i + size));
  return out;
}

/** The write concern the caller asked for, moved to the commit (inside a transaction only commit takes one). */
function commitWriteConcern(options: Record<string, unknown>): mongo.WriteConcernSettings | undefined {
  const wc = (options.writeConcern as mongo.WriteConcernSettings | undefined) ?? {};
  const merged: mongo.WriteConcernSettings = { ...wc };
  if (options.w !== undefined) merged.w = options.w as mongo.W;
  if (options.j !== undefined) merged.journal = options.j as boolean;
  if (options.wtimeout !== undefined) merged.wtimeoutMS = options.wtimeout as number;
  if (Object.keys(merged).length === 0 || merged.w === 0) return undefined; // unacknowledged commits are not allowed
  return merged;
}

/** Whether a single-document write's result says it touched no document. */
function touchedNothing(method: GuardedMethod, result: unknown): boolean {
  const r = result as { matchedCount?: number; deletedCount?: number; upsertedCount?: number; value?: unknown; lastErrorObject?: unknown } | null;
  if (method === 'updateOne' || method === 'replaceOne' || method === 'updateMany') return r?.matchedCount === 0 && !r.upsertedCount;
  if (method === 'deleteOne') return r?.deletedCount === 0;
  if (r === null) return true;
  return r?.lastErrorObject !== undefined && r.value === null;
}

export class WriteGuard {
  constructor(
    private readonly collection: object,
    private readonly raw: () => mongo.Collection<Document>,
    private readonly settings: GuardSettings,
  ) {}

  /**
   * Guards one call of `method` with `args`; `invoke` performs the unguarded call, `invokeBulk`
   * an unguarded `bulkWrite` on the same collection (for batches of multi-document writes).
   */
  async run(method: GuardedMethod, callArgs: unknown[], invoke: Invoke, invokeBulk: Invoke): Promise<unknown> {
    const args = [...callArgs];
    const optionsAt = method === 'bulkWrite' ? 1 : WITH_UPDATE.has(method) ? 2 : 1;
    const given = args[optionsAt];
    const options: Record<string, unknown> = given !== null && typeof given === 'object' ? { ...(given as Record<string, unknown>) } : {};
    args[optionsAt] = options;
    const lockOptions = takeLockOptions(options);
    if (method === 'bulkWrite') validateBulkOperations(args[0]);
    if (lockOptions.skip) return invoke(args);

    await this.settings.ready;
    const givenFilter = method === 'bulkWrite' ? undefined : ((args[0] ?? {}) as Document);
    const document = DOCUMENT_METHODS.has(method) ? documentWriteFor(this.collection, givenFilter?._id) : undefined;
    const writer = await this.writerFor(document, lockOptions.owner, method === 'bulkWrite' && inBulkSave(this.collection), givenFilter);
    // From here on the guard reads, and sends, the parts of the write it judges as the driver will
    // serialize them (sent-values.ts): a filter `_id` that serializes to an operator, a Map, a
    // stateful value cannot be one thing to the guard and another to the server.
    const serialize = serializeSettings(options, this.settings.connection.readyState === 1 ? this.raw() : undefined);
    let filter = givenFilter;
    let idsUnreadable = false;
    if (filter !== undefined && args[0] !== null && typeof args[0] === 'object') {
      const sent = sentFilter(args[0], serialize);
      args[0] = sent.filter;
      filter = sent.filter as Document;
      idsUnreadable = sent.unreadable;
    }
    if (method === 'bulkWrite' && writer.kind === 'owner') args[0] = sentOperations(args[0], serialize);
    if (writer.kind === 'holder' && isCollated(options.collation) && containsString(filter?._id)) {
      // The holder's write is sent as it is, unsearched: under such a collation `{ _id: 'abc' }`
      // also matches `'ABC'` (see isCollated), which someone else may hold. Refused before anything
      // is sent (the holder's write is a write of its one document, which needs no collation).
      throw new InvalidLockOptionError(
        'collation',
        `a locked document's ${method}() with a string _id cannot carry a collation other than { locale: 'simple' } (it would also match other _ids the collation makes equal). Drop the collation option, or pass { locale: 'simple' }.`,
      );
    }
    // What a non-holder's upsert may insert is checked like its targets; an upsert whose inserted
    // `_id` cannot be known before it is sent is refused here, before anything is sent. (A holder's
    // filter names its own `_id`, which the upsert cannot change.)
    let insertable: unknown[] = [];
    if (writer.kind === 'owner') {
      if (method === 'bulkWrite') refuseUnknownBulkUpsertIds(args[0]);
      else if (WITH_UPDATE.has(method) && options.upsert === true) {
        const argument = REPLACING.has(method) ? 'replacement' : 'update';
        const update = sentUpsertUpdate(args[1], argument, serialize);
        if (update === undefined || idsUnreadable) throw unknownInsertedId(argument);
        args[1] = update;
        insertable = insertableIds(argument, filter, update, REPLACING.has(method));
      }
    }
    const mode = await this.modeFor(options.session as ClientSession | undefined);
    const call: Call = { method, args, optionsAt, options, invoke, invokeBulk, writer, mode, insertable, idsUnreadable };
    if (method === 'bulkWrite') return this.bulk(call);
    if (SINGLE_DOCUMENT.has(method)) return this.single(call, filter!);
    return this.multi(call, filter!);
  }

  private async writerFor(document: DocumentWrite | undefined, owner: string | undefined, bulkSave: boolean, filter: Document | undefined): Promise<Writer> {
    if (document?.state) {
      // A release made in a caller's transaction that has ended, whose outcome only the server
      // knows (held-lock.ts, releaseOutcomeUnknown), is settled by asking it (one read), as
      // saveAndUnlock does: the lock may still be held (the commit failed), and then the holder writes.
      if (releaseOutcomeUnknown(document.state)) await settleReleaseWithServer(document.state, this.settings.store);
      // An instance whose lock is gone stays refused: retrying a refused save cannot slip
      // through once the lock looks free.
      if (document.state.lost !== undefined) throw lostError(document.state);
      return { kind: 'holder', document, release: document.release && isSaveWrite(document, filter) };
    }
    const ownerKey = owner === undefined ? undefined : this.settings.ownerKey(owner);
    return { kind: 'owner', ownerKey, mustHold: (document?.kind === 'save' || bulkSave) && this.settings.requireLock };
  }

  private async modeFor(session: ClientSession | undefined): Promise<Mode> {
    if (session?.inTransaction()) return { kind: 'joined', session };
    if (this.settings.transactions === 'auto' && (await own('write', () => supportsTransactions(this.settings.connection)))) {
      // The guard's own reads and transactions do not carry the caller's session: refused here as
      // the driver would refuse it, before anything is sent.
      if (session) refuseUnusableSession(this.settings.connection, session);
      return { kind: 'atomic', session };
    }
    return { kind: 'check', session };
  }

  /** Runs `body` as the mode says: in the caller's transaction, in the guard's own, or without one. */
  private inMode<T>(call: Call, body: (session: ClientSession | undefined, atomic: boolean) => Promise<T>): Promise<T> {
    const { mode } = call;
    if (mode.kind === 'joined') return body(mode.session, true).catch((error: unknown) => Promise.reject(joinedError(error)));
    if (mode.kind === 'atomic') {
      // saveAndUnlock: a commit that carries the holder's release ends its lease when it is sent
      // (held-lock.ts suspendLease), and gives it back only if that commit surely did not apply.
      const { writer } = call;
      const beforeCommit = writer.kind === 'holder' && writer.release ? () => (writer.document.released ? suspendLease(writer.document.state!) : undefined) : undefined;
      return runInTransaction(this.settings.connection, mode.session, (session) => body(session, true), { writeConcern: commitWriteConcern(call.options), beforeCommit });
    }
    return body(mode.session, false);
  }

  /**
   * Checks the targets for the writer. Atomic: claims them in the transaction (returns what to
   * release after the write) or, for a holder, verifies (or, for saveAndUnlock, releases) its
   * own acquisition by writing its record. Otherwise: reads.
   */
  private async check(call: Call, targets: unknown[], session: ClientSession | undefined, atomic: boolean): Promise<ClaimResult | undefined> {
    const { store } = this.settings;
    const { writer } = call;
    // In the guard's own transaction, a lock record an open caller transaction of this process
    // writes would conflict on every attempt until that transaction ends: refused at once.
    if (call.mode.kind === 'atomic') store.refuseWritesInOpenTransaction(writer.kind === 'holder' ? [writer.document.state!.lock.documentId] : targets);
    // In the caller's transaction, the ids whose lock records it wrote are noted (lock calls on them
    // are then refused until it ends): only after a write, never for a refusal that wrote nothing.
    const joined = call.mode.kind === 'joined' ? call.mode.session : undefined;
    if (writer.kind === 'holder') {
      const { document } = writer;
      const state = document.state!;
      if (writer.release && call.mode.kind === 'atomic') {
        // saveAndUnlock in the guard's own transaction: the release is the check. If the write
        // then matches nothing (a failed save), single() aborts the transaction, release included.
        await own(call.method, () => store.release(state, session));
        document.released = true;
        return undefined;
      }
      // Elsewhere (the caller's transaction, or none) verify first; in the caller's transaction
      // single() releases after a write that touched the document, so a failed save releases nothing.
      await writingRecords(store, joined, [state.lock.documentId], () => own(call.method, () => store.verify(state, session)), () => [state.lock.documentId]);
      return undefined;
    }
    if (targets.length === 0) return undefined;
    if (writer.mustHold) {
      for (const id of targets) {
        if (writer.ownerKey === undefined || !(await own(call.method, () => store.isHeldBy(id, writer.ownerKey!, session)))) {
          throw new LockNotHeldError(id, 'not_locked');
        }
      }
    }
    if (atomic) {
      const claimed = await writingRecords(store, joined, targets, () => own(call.method, () => store.claimForWrite(targets, writer.ownerKey, session!)), (result) => result.written);
      if (claimed.blocker) throw refusal(claimed.blocker);
      return claimed;
    }
    for (const chunk of chunks(targets, GUARD_BATCH_SIZE)) {
      const blocker = await own(call.method, () => store.findBlocking(chunk, writer.ownerKey, session));
      if (blocker) throw refusal(blocker);
    }
    return undefined;
  }

  /**
   * After a holder's write of its document. A write that matched nothing (a save whose version or
   * document is gone) is a failed save: with saveAndUnlock in the guard's own transaction, whose
   * release came first, the transaction is aborted (NothingWritten) so the lock stays held. A write
   * that touched the document, with saveAndUnlock in the caller's transaction, releases the lock
   * now, in that transaction (a lock that expired since the verify is free all the same).
   */
  private async afterHolderWrite(call: Call, document: DocumentWrite, release: boolean, result: unknown, session: ClientSession | undefined): Promise<void> {
    if (touchedNothing(call.method, result)) {
      if (release && document.released) {
        document.released = false;
        throw new NothingWritten(result);
      }
      return;
    }
    document.written = true;
    if (release && !document.released && call.mode.kind === 'joined') {
      try {
        await own(call.method, () => this.settings.store.release(document.state!, session));
      } catch (error) {
        if (!(error instanceof LockNotHeldError)) throw error;
      }
      document.released = true;
    }
  }

  /**
   * Sends the write itself. In the caller's transaction, a write that fails in the driver before
   * anything reached the server (a bad argument, say) leaves that transaction running, and the
   * caller may catch the error and commit: the claim records inserted for the write are deleted
   * first, so none is committed with it. A server's error (or a network error) has aborted the
   * transaction on the server (transactions spec: an error in a transaction aborts it), taking the
   * claims with it; nothing more is sent then.
   */
  private async write(call: Call, claimed: ClaimResult | undefined, session: ClientSession | undefined, args: unknown[], invoke: Invoke = call.invoke): Promise<unknown> {
    try {
      return await invoke(args);
    } catch (error) {
      if (call.mode.kind === 'joined' && claimed && claimed.inserted.length > 0 && !reachedServer(error)) {
        await this.release(call, claimed, session).catch(() => undefined);
      }
      throw error;
    }
  }

  private async release(call: Call, claimed: ClaimResult | undefined, session: ClientSession | undefined): Promise<void> {
    if (claimed && session) await own(call.method, () => this.settings.store.releaseClaims(claimed, session));
  }

  /** The write with `filter` as its filter and `session` as its session (without its `upsert` option: `noUpsert`). */
  private withFilterAndSession(call: Call, filter: Document | undefined, session: ClientSession | undefined, noUpsert = false): unknown[] {
    const args = [...call.args];
    if (filter !== undefined) args[0] = filter;
    const options = { ...call.options };
    if (session) options.session = session;
    if (noUpsert && options.upsert === true) delete options.upsert;
    args[call.optionsAt] = options;
    return args;
  }

  /**
   * updateOne, replaceOne, deleteOne, findOneAnd*: the target is the `_id` the filter names, or
   * else the one document a `find` with the write's filter, sort, collation and hint returns
   * (limit 1); the write is then narrowed to exactly what was found (narrowedTo: that `_id`, or
   * none when nothing was found), so it can only touch what was checked, however the server
   * evaluates the filter at the write (`$$NOW`, `$rand`). Upserts are narrowed without an `_id`
   * equality, so what they insert is what the unguarded upsert inserts (narrowedTo), and are also
   * checked against every `_id` they may insert (`call.insertable`). Under a collation that
   * compares strings otherwise than byte by byte, an `_id` holding a string matches other `_id`s
   * too (`'abc'` and `'ABC'`): named ids are not trusted, EVERY document the filter matches is
   * searched (with the collation), plus every `_id` the collation makes equal to one of them
   * (withCollatedEquals), all checked, and the write narrowed to them.
   * In a transaction (joined, atomic) the search, the check and the write see one snapshot: a
   * target changed after it makes the write conflict instead of missing it. Without one (check
   * mode), a searched write goes through checkThenWrite.
   */
  private single(call: Call, filter: Document): Promise<unknown> {
    const selection = call.options as SelectionOptions;
    const named = call.idsUnreadable ? undefined : trustedIds(filter, selection.collation);
    const collated = isCollated(selection.collation);
    const upsert = call.options.upsert === true;
    const search = async (session: ClientSession | undefined): Promise<unknown[]> => {
      const found = await findTargets(this.raw(), filter, selection, session, collated ? undefined : 1);
      if (collated && found.some(containsString)) return this.withCollatedEquals(found, selection.collation, session);
      return found.slice(0, 1);
    };
    if (call.mode.kind === 'check' && call.writer.kind === 'owner' && !named) return this.checkThenWrite(call, filter, this.sortedSearch(call, filter, search));
    const attempt = async (session: ClientSession | undefined, atomic: boolean): Promise<unknown> => {
      let targets: unknown[];
      let writeFilter = filter;
      if (call.writer.kind === 'holder') targets = [filter._id];
      else if (named) targets = distinctIds([...named, ...call.insertable]);
      else {
        const found = await search(session);
        writeFilter = narrowedTo(filter, found, upsert);
        targets = distinctIds([...found, ...call.insertable]);
      }
      const claimed = await this.check(call, targets, session, atomic);
      const result = await this.write(call, claimed, session, this.withFilterAndSession(call, writeFilter, session));
      if (call.writer.kind === 'holder') await this.afterHolderWrite(call, call.writer.document, call.writer.release, result, session);
      await this.release(call, claimed, session);
      return result;
    };
    if (call.writer.kind === 'holder' && call.writer.release && call.mode.kind === 'atomic') {
      // A save that matched nothing comes back as NothingWritten, its transaction (and with it the
      // release) aborted; Mongoose gets the result and reports the failed save (VersionError,
      // DocumentNotFoundError) itself, with the lock still held.
      return this.inMode(call, attempt).catch((error: unknown) => {
        if (error instanceof NothingWritten) return error.result;
        throw error;
      });
    }
    return this.inMode(call, attempt);
  }

  /**
   * Check mode's search for a sorted single-document write: the first document by the write's
   * sort, with a condition on its sort-key values (sort-key.ts), so that a found document that no
   * longer sorts where it did matches nothing at the write and is searched again, as one that
   * stopped matching is. Without a sort, or under a collation where the search checks every match
   * (string `_id`s: the write then picks among checked documents itself), `search` as it is; and
   * where the sort key cannot be compared exactly, the `_id` alone (README, Limits).
   */
  private sortedSearch(call: Call, filter: Document, search: (session: ClientSession | undefined) => Promise<unknown[]>): (session: ClientSession | undefined) => Promise<Found> {
    const selection = call.options as SelectionOptions;
    const paths = sortPaths(selection.sort);
    const plain = async (session: ClientSession | undefined): Promise<Found> => ({ ids: await search(session) });
    if (!SINGLE_DOCUMENT.has(call.method) || paths === undefined || paths.length === 0) return plain;
    return async (session) => {
      const collated = isCollated(selection.collation);
      const docs = await findTargetDocuments(this.raw(), filter, selection, session, collated ? undefined : 1, sortProjection(paths));
      const ids = docs.map((doc) => doc._id as unknown);
      if (collated && ids.some(containsString)) return { ids: await this.withCollatedEquals(ids, selection.collation, session) };
      if (docs.length === 0) return { ids: [] };
      return { ids: ids.slice(0, 1), sortKey: sortKeyCondition(docs[0]!, paths) };
    };
  }

  /**
   * Check mode (no transaction: `transactions: 'never'`, standalone servers), a non-holder's write
   * whose filter does not name its `_id`s: single-document writes, and updateMany upserts. Each
   * round searches (`search`), checks what it found and sends the write narrowed to it, so the
   * write can only touch checked documents. A found document can stop matching before the write
   * reaches it (someone changed or deleted it; no lock involved), or, for a sorted write, stop
   * sorting where it did (sortedSearch); the write must then do what the unguarded write would
   * have done at some instant of the call, never something no serial execution of it could do:
   *  - What was found is written WITHOUT `upsert`: a narrowed upsert whose target stopped matching
   *    would insert (narrowedTo keeps the filter's equalities), while another document may match
   *    and the unguarded upsert would update it. A write that matched nothing searches again, as
   *    mongod's own update moves on when a document stops matching after a write conflict
   *    (`write_stage_common::ensureStillMatches`, R8). A write that matched returns the server's
   *    result, which is the upsert's when it matches: `update` reports `n` / `nModified` and an
   *    `upserted` entry only for an insert (so `upsertedCount: 0`, `upsertedId: null`), and
   *    findAndModify's `lastErrorObject` is `{ n: nMatched, updatedExisting: nMatched > 0 }`
   *    either way (`appendCommandResponse` → `find_and_modify::serializeUpsert`,
   *    src/mongo/db/commands/find_and_modify.cpp).
   *  - Only a search that found nothing sends the upsert, narrowed with `_id: { $exists: false }`
   *    (narrowedTo): it matches no stored document, so it can only insert, and what it inserts is
   *    what the unguarded upsert inserts when nothing matches (R21): the right outcome at the
   *    search. Every `_id` it may insert was checked (`call.insertable`, R22). A duplicate-key
   *    error (a matching document inserted meanwhile, under a unique index) searches again. mongod
   *    retries such an upsert itself, as an update, when its query is nothing but equalities on
   *    exactly the unique index's fields and the duplicated key is the query's
   *    (`shouldRetryDuplicateKeyException`, R9), without bound on 6.0 and 7.0; the narrowed query
   *    never is, so the guard does what mongod would have done with the caller's query
   *    (retriesDuplicateKey): for such a query it keeps searching and inserting, round after round
   *    (the document holding the key may come and go); for any other, the unguarded upsert gets the
   *    error too, so after one more search that finds nothing the error reaches the caller.
   *  - A search that found nothing for a non-upsert sends the write narrowed to nothing (its
   *    result says it matched nothing).
   * Rounds repeat with the backoff of the guard's transactions (transaction.ts) within the budget
   * (checkBudget: 120 s, or less when the write carries `maxTimeMS` / `timeoutMS`); when it is
   * spent, nothing was written and the call fails with a retryable LockDatabaseError (with the
   * duplicate-key error, when that is what kept it going, as a bounded server's retry returns it).
   * The guard needs each round's counts: an unacknowledged write (`w: 0`) is sent acknowledged
   * (`w: 1`) and the caller gets what the driver returns for an unacknowledged write
   * (unacknowledgedResult).
   */
  private async checkThenWrite(call: Call, filter: Document, search: (session: ClientSession | undefined) => Promise<Found>): Promise<unknown> {
    const session = call.mode.session;
    const upsert = call.options.upsert === true;
    const budget = checkBudget(call.options, this.raw());
    const deadline = Date.now() + budget.ms;
    const unacknowledged = isUnacknowledged(call.options, this.raw());
    const answer = (result: unknown) => (unacknowledged ? unacknowledgedResult(call.method, call.options) : result);
    const sendable: Call = unacknowledged ? { ...call, options: acknowledgedOptions(call.options) } : call;
    let duplicate: unknown;
    for (let round = 0; ; round++) {
      const found = await search(session);
      if (found.ids.length > 0 || !upsert) {
        duplicate = undefined;
        await this.check(call, distinctIds([...found.ids, ...call.insertable]), session, false);
        const result = await this.writeNarrowed(sendable, filter, found.ids, session, undefined, found.sortKey);
        if (found.ids.length === 0 || !touchedNothing(call.method, result)) return answer(result);
      } else {
        if (duplicate !== undefined && !retriesDuplicateKey(call.method, filter, duplicate)) throw duplicate;
        await this.check(call, call.insertable, session, false);
        try {
          return answer(await this.write(sendable, undefined, session, this.withFilterAndSession(sendable, narrowedTo(filter, [], true), session)));
        } catch (error) {
          if (!isDuplicateKey(error)) throw error;
          duplicate = error;
        }
      }
      if (!(await backedOff(round, deadline))) throw duplicate ?? stoppedMatching(call.method, budget);
    }
  }

  /**
   * The write without `upsert`, narrowed to `ids` (none: it matches nothing); an updateMany /
   * deleteMany beyond GUARD_BATCH_SIZE of them as one bulk write of one statement per
   * GUARD_BATCH_SIZE `_id`s.
   */
  private async writeNarrowed(call: Call, filter: Document, ids: unknown[], session: ClientSession | undefined, claimed?: ClaimResult, sortKey?: Document): Promise<unknown> {
    if (SINGLE_DOCUMENT.has(call.method) || ids.length <= GUARD_BATCH_SIZE) {
      const narrowed = narrowedTo(filter, ids, false);
      return this.write(call, claimed, session, this.withFilterAndSession(call, sortKey ? { $and: [narrowed, sortKey] } : narrowed, session, true));
    }
    const written = await this.write(call, claimed, session, this.perChunk(call, filter, ids, session), call.invokeBulk);
    // Sent as the caller asked (check mode: with its write concern); an unacknowledged bulk reports no counts.
    if (call.mode.kind === 'check' && isUnacknowledged(call.options, this.raw())) return unacknowledgedResult(call.method, call.options);
    return manyResult(call.method, written as CommittedWrites);
  }

  /**
   * updateMany, deleteMany. Targets: the `_id`s the filter names, or else every `_id` a `find`
   * with the write's filter returns, read before any write (so a document the write moves is
   * never visited twice, the server's own updateMany guarantee). All of them are checked first:
   * a lock already there refuses the whole write. Then, in the guard's own transactions, batches
   * of GUARD_BATCH_SIZE: claim, write, release, commit. A batch's write is one `update` (or
   * `delete`) command holding one statement per document, the write's filter narrowed to that
   * `_id`, so the server re-checks every condition per document, finds each through the `_id`
   * index, and applies the same update with the same arrayFilters, collation and hint: what
   * updateMany does per document. In the caller's transaction, or without transactions, the
   * write is sent once, narrowed to the `_id`s found (beyond GUARD_BATCH_SIZE of them, as one bulk
   * write of one statement per GUARD_BATCH_SIZE `_id`s).
   *
   * Sent as one write narrowed to what a search inside ONE transaction of the guard's own found
   * and claimed, instead of per-document batches:
   *  - when the search found nothing (see below);
   *  - an upsert (`updateMany(filter, update, { upsert: true })`): per-document statements cannot
   *    upsert, and the write must insert when nothing matches;
   *  - under a collation that compares strings otherwise than byte by byte, when a target `_id`
   *    holds a string: a statement narrowed to `'abc'` would also match `'ABC'` (isCollated).
   * Such a write is one transaction however many documents it touches. In check mode an upsert
   * whose filter does not name its `_id`s goes through checkThenWrite (see there).
   */
  private async multi(call: Call, filter: Document): Promise<unknown> {
    const selection = call.options as SelectionOptions;
    const named = call.idsUnreadable ? undefined : trustedIds(filter, selection.collation);
    const { mode } = call;
    const upsert = call.options.upsert === true;
    const asOneWrite = () =>
      this.inMode(call, async (session, atomic) => {
        let targets = named ? distinctIds(named) : await findTargets(this.raw(), filter, selection, session);
        if (!named) targets = await this.withCollatedEquals(targets, selection.collation, session);
        const claimed = await this.check(call, upsert ? distinctIds([...targets, ...call.insertable]) : targets, session, atomic);
        let result: unknown;
        if (named) result = await this.write(call, claimed, session, this.withFilterAndSession(call, undefined, session));
        else if (upsert) result = await this.write(call, claimed, session, this.withFilterAndSession(call, narrowedTo(filter, targets, true), session));
        else result = await this.writeNarrowed(call, filter, targets, session, claimed);
        await this.release(call, claimed, session);
        return result;
      });
    if (mode.kind === 'check' && upsert && !named) {
      return this.checkThenWrite(call, filter, async (session) => ({ ids: await this.withCollatedEquals(await findTargets(this.raw(), filter, selection, session), selection.collation, session) }));
    }
    if (mode.kind !== 'atomic' || upsert) return asOneWrite();
    const targets = named ? distinctIds(named) : await findTargets(this.raw(), filter, selection, mode.session);
    // Nothing matched the search above, which ran before any transaction existed: documents may
    // have started to match since (someone else's save). asOneWrite searches again INSIDE the
    // guard's transaction, whose first statement fixes its snapshot, checks (claims) whatever that
    // finds, and sends the write in the same transaction: it sees exactly what that search saw,
    // and a document changed after that snapshot conflicts instead of being written unchecked.
    if (targets.length === 0) return asOneWrite();
    if (isCollated(selection.collation) && targets.some(containsString)) return asOneWrite();
    // Before any batch commits: a target an open caller transaction writes would stop the write midway.
    this.settings.store.refuseWritesInOpenTransaction(targets);
    await this.check({ ...call, mode: { kind: 'check', session: mode.session } }, targets, mode.session, false);
    const committed: CommittedWrites = { matchedCount: 0, modifiedCount: 0, deletedCount: 0 };
    for (const batch of chunks(targets, GUARD_BATCH_SIZE)) {
      let result: { matchedCount?: number; modifiedCount?: number; deletedCount?: number };
      try {
        result = await this.inMode(call, async (session, atomic) => {
          const claimed = await this.check(call, batch, session, atomic);
          const written = (await call.invokeBulk(this.perDocument(call, filter, batch, session))) as typeof result;
          await this.release(call, claimed, session);
          return written;
        });
      } catch (error) {
        if (error instanceof LockedError && committed.matchedCount + committed.deletedCount > 0) throw new LockedDuringWriteError(error, committed);
        throw error;
      }
      committed.matchedCount += result.matchedCount ?? 0;
      committed.modifiedCount += result.modifiedCount ?? 0;
      committed.deletedCount += result.deletedCount ?? 0;
    }
    return manyResult(call.method, committed);
  }

  /**
   * Every `_id` a write narrowed to `ids` can reach: under a collation that compares strings
   * otherwise than byte by byte an `_id` condition naming `'abc'` also matches `'ABC'`, so those
   * are searched (one `find` of `{ _id: { $in: ids } }` with the collation) and checked too.
   * Unchanged (nothing sent) otherwise.
   */
  private async withCollatedEquals(ids: unknown[], collation: unknown, session: ClientSession | undefined): Promise<unknown[]> {
    if (!isCollated(collation) || !ids.some(containsString)) return ids;
    const equal = await findTargets(this.raw(), { _id: { $in: ids } }, { collation }, session);
    return distinctIds([...ids, ...equal]);
  }

  /**
   * bulkWrite arguments applying an updateMany / deleteMany narrowed to each chunk of
   * GUARD_BATCH_SIZE of `ids` (one command for the driver, whose statements stay small).
   */
  private perChunk(call: Call, filter: Document, ids: unknown[], session: ClientSession | undefined): unknown[] {
    return this.asBulk(call, 'many', chunks(ids, GUARD_BATCH_SIZE).map((chunk) => narrowedTo(filter, chunk, false)), session);
  }

  /** bulkWrite arguments applying an updateMany / deleteMany to each of `ids`, one statement per document. */
  private perDocument(call: Call, filter: Document, ids: unknown[], session: ClientSession | undefined): unknown[] {
    const named = Object.prototype.hasOwnProperty.call(filter, '_id') && idsNamedBy(filter) !== undefined;
    return this.asBulk(call, 'one', ids.map((id) => (named ? { ...filter, _id: id } : narrowedTo(filter, [id], false))), session);
  }

  /**
   * bulkWrite arguments: the write's update (or delete) once per filter, as `updateMany` /
   * `deleteMany` statements (`'many'`) or `updateOne` / `deleteOne` (`'one'`), each with the write's
   * collation, hint and arrayFilters, in one ordered bulk with its let, comment and
   * bypassDocumentValidation.
   */
  private asBulk(call: Call, each: 'one' | 'many', filters: Document[], session: ClientSession | undefined): unknown[] {
    const { options } = call;
    const statementFor = (filter: Document): Document => {
      const statement: Document = { filter };
      if (options.collation !== undefined) statement.collation = options.collation;
      if (options.hint !== undefined) statement.hint = options.hint;
      if (call.method === 'deleteMany') return { [each === 'many' ? 'deleteMany' : 'deleteOne']: statement };
      statement.update = call.args[1];
      if (options.arrayFilters !== undefined) statement.arrayFilters = options.arrayFilters;
      return { [each === 'many' ? 'updateMany' : 'updateOne']: statement };
    };
    const bulkOptions: Record<string, unknown> = { ordered: true, session };
    for (const name of ['let', 'comment', 'bypassDocumentValidation'] as const) if (options[name] !== undefined) bulkOptions[name] = options[name];
    // Outside a transaction the write takes the caller's write concern itself.
    if (call.mode.kind === 'check') for (const name of ['writeConcern', 'w', 'j', 'wtimeout'] as const) if (options[name] !== undefined) bulkOptions[name] = options[name];
    return [filters.map(statementFor), bulkOptions];
  }

  /**
   * Model.bulkWrite: the union of every operation's targets (inserts have none; an operation
   * whose filter names its `_id`s needs no search, unless its collation makes a string `_id`
   * match others (trustedIds); any other is checked against every document
   * its filter matches, since the server picks among them), claimed together, then the whole
   * bulk write, in one transaction. A document that only starts matching an operation because
   * an earlier operation of the same bulk wrote it was claimed for that earlier operation.
   */
  private bulk(call: Call): Promise<unknown> {
    const operations = call.args[0] as Record<string, BulkBody>[];
    const selection: SelectionOptions = { let: call.options.let };
    return this.inMode(call, async (session, atomic) => {
      const targets: unknown[] = [];
      const sent: typeof operations = [];
      // The ids an operation may write: its own checked targets, and those of every operation
      // before it (checked too), so a document an earlier operation makes match is still written.
      const before: unknown[] = [];
      const ordered = call.options.ordered !== false;
      for (const operation of operations) {
        const kind = Object.keys(operation)[0];
        const body = operation[kind];
        if (kind === 'insertOne') {
          // A document inserted here is new, unless the insert fails (an existing _id): an ordered
          // bulk then stops before any later operation; an unordered one would go on, so there
          // later operations are not narrowed to inserted ids (README, Write paths). Without an
          // _id the driver would assign one when it sends the bulk (after the guard has looked):
          // the guard assigns it first, the same way, so that it is known.
          // As the driver decides it (`document._id == null`, read through the getter a Mongoose
          // document passed by Model.bulkWrite has, not as an own property).
          const document = insertedDocument(body);
          if (ordered && document) {
            if (document._id == null && call.options.forceServerObjectId !== true) document._id = new mongo.ObjectId();
            // Only a plain value (sentOperations replaced it by what it serializes to).
            if (isEqualityValue(document._id)) before.push(document._id);
          }
          sent.push(operation);
          continue;
        }
        const opFilter = body?.filter ?? {};
        // Every `_id` an upsert may insert is checked like a target, whatever its filter
        // (idsUpsertMayInsert; run() refused the upserts for which it cannot tell): a filter naming
        // two `_id`s seeds none, and its `$setOnInsert` / `$set` / replacement `_id` is inserted.
        // Checked, they are also ids later operations may reach.
        const insertable = body?.upsert === true ? insertableIds(`bulkWrite operation ${sent.length}`, opFilter, kind === 'replaceOne' ? body.replacement : body.update, kind === 'replaceOne') : [];
        const named = unreadableFilters.has(body) ? undefined : trustedIds(opFilter, body?.collation);
        if (named) {
          targets.push(...named, ...insertable);
          before.push(...named, ...insertable);
          sent.push(operation);
          continue;
        }
        let found = await findTargets(this.raw(), opFilter, { ...selection, collation: body?.collation, hint: body?.hint }, session);
        found = await this.withCollatedEquals(found, body?.collation, session);
        // The ids of earlier operations this one is narrowed to match, under its collation, every
        // `_id` the collation makes equal to them: those are searched and checked too.
        const collatedBefore = await this.withCollatedEquals(distinctIds(before), body?.collation, session);
        const seen = new Set(distinctIds([...before, ...found]).map(idKey));
        found.push(...collatedBefore.filter((id) => !seen.has(idKey(id))));
        targets.push(...found, ...insertable);
        before.push(...found, ...insertable);
        const narrowed = { ...body, filter: narrowedTo(opFilter, distinctIds(before), body?.upsert === true) };
        // What an ordered bulk's upsert inserts is reached by its later operations once its _id is
        // known: named by the update or the replacement, or given by the guard (upsert-id.ts).
        // A pipeline upsert, or a replacement without an _id, still gets it from the server
        // (README, Limits).
        if (ordered && body?.upsert === true && call.options.forceServerObjectId !== true) {
          let known: { value: unknown; generated: boolean } | undefined;
          if (kind === 'updateOne' || kind === 'updateMany') {
            const withId = upsertWithId(opFilter, body.update);
            narrowed.update = withId.update;
            known = withId.insertedId;
          } else if (kind === 'replaceOne' && body.replacement && Object.prototype.hasOwnProperty.call(body.replacement, '_id') && isEqualityValue(body.replacement._id)) {
            known = { value: body.replacement._id, generated: false };
          }
          if (known) before.push(known.value);
        }
        sent.push({ [kind]: narrowed });
      }
      const claimed = await this.check(call, distinctIds(targets), session, atomic);
      const args = this.withFilterAndSession(call, undefined, session);
      args[0] = sent;
      const result = await this.write(call, claimed, session, args);
      await this.release(call, claimed, session);
      return result;
    });
  }
}

/** What one round of checkThenWrite found: the `_id`s to write, and for a sorted single-document write the condition that keeps the first one first (sort-key.ts). */
interface Found {
  ids: unknown[];
  sortKey?: Document;
}

interface Call {
  method: GuardedMethod;
  args: unknown[];
  optionsAt: number;
  options: Record<string, unknown>;
  invoke: Invoke;
  invokeBulk: Invoke;
  writer: Writer;
  mode: Mode;
  /** A non-holder's upsert (not bulkWrite): the `_id`s it may insert (insertableIds), checked with its targets. */
  insertable: unknown[];
  /** The filter's `_id` condition could not be read as it will be sent (sentFilter): nothing named is trusted. */
  idsUnreadable: boolean;
}

/**
 * Sends `write` (a claim or a holder's verify, which write lock records) and, in the caller's
 * transaction (`joined`), notes the ids whose records it wrote: `written(result)` after it
 * succeeded; after a failure, none for a refusal that matched nothing (LockNotHeldError), else
 * `ids` (a network error may have left the writes in the transaction).
 */
async function writingRecords<T>(store: LockStore, joined: ClientSession | undefined, ids: unknown[], write: () => Promise<T>, written: (result: T) => unknown[]): Promise<T> {
  let result: T;
  try {
    result = await write();
  } catch (error) {
    if (joined && !(error instanceof LockNotHeldError)) store.noteCallerTransaction(ids, joined);
    throw error;
  }
  if (joined) store.noteCallerTransaction(written(result), joined);
  return result;
}

/**
 * The `_id`s a non-holder's upsert may insert (idsUpsertMayInsert), to be checked like its targets.
 * Refused (InvalidLockArgumentError, nothing sent) when the guard cannot tell before the write.
 */
function insertableIds(argument: string, filter: unknown, update: unknown, replacement: boolean): unknown[] {
  const ids = idsUpsertMayInsert(filter, update, replacement ? 'replacement' : 'update');
  if (ids !== undefined) return ids;
  throw unknownInsertedId(argument);
}

/** Refusal of an upsert whose inserted `_id` the guard cannot tell before it is sent. */
function unknownInsertedId(argument: string): InvalidLockArgumentError {
  return new InvalidLockArgumentError(
    argument,
    'the write guard cannot tell which _id this upsert would insert before it is sent (an update operator other than $set / $setOnInsert on _id, a $rename onto _id, ' +
      'a pipeline stage that sets _id or replaces the document, a query operator on _id or at the top level it does not read, or an update, filter or _id value in a form it cannot read as it will be serialized), ' +
      'so it cannot check that nobody holds a lock on that _id. Nothing was sent. Name the _id with $setOnInsert or by equality in the filter, or pass { skipLockCheck: true } where no lock can apply.',
  );
}

/**
 * The operations of a non-holder's bulkWrite as the guard reads and sends them (sent-values.ts):
 * each operation body copied, with its filter, and an upsert's update or replacement, as they
 * will be serialized (an upsert that cannot be read is refused, nothing sent); an `insertOne`'s
 * `_id` replaced by what it serializes to, so the `_id` a later operation is narrowed to is the
 * one inserted. The `insertOne` document itself stays the caller's object (the driver adds an
 * `_id` to it, and so does the guard).
 */
/** One operation of a bulkWrite, as the guard reads it. */
interface BulkBody {
  filter?: Document;
  collation?: unknown;
  hint?: unknown;
  upsert?: boolean;
  document?: Document;
  update?: unknown;
  replacement?: Document;
}

/** Operation bodies (copies made by sentOperations) whose filter `_id` could not be read as it will be sent: nothing named is trusted. */
const unreadableFilters = new WeakSet<object>();

function sentOperations(operations: unknown, serialize: SerializeSettings): unknown {
  if (!Array.isArray(operations)) return operations;
  return operations.map((operation: Record<string, BulkBody | null>, index) => {
    const kind = Object.keys(operation)[0];
    const body = operation[kind];
    if (body === null || typeof body !== 'object') return operation;
    if (kind === 'insertOne') {
      const document = insertedDocument(body);
      if (document && document._id != null) {
        const sent = sentValue(document._id, serialize);
        if (typeof sent === 'object' && isEqualityValue(sent.value)) document._id = sent.value;
      }
      return operation;
    }
    const copy: BulkBody = { ...body };
    let unreadable = false;
    if (body.filter !== null && typeof body.filter === 'object') {
      const sent = sentFilter(body.filter, serialize);
      copy.filter = sent.filter as Document;
      unreadable = sent.unreadable;
      if (unreadable) unreadableFilters.add(copy);
    }
    if (body.upsert === true) {
      const argument = kind === 'replaceOne' ? 'replacement' : 'update';
      const update = sentUpsertUpdate(argument === 'replacement' ? body.replacement : body.update, argument, serialize);
      if (update === undefined || unreadable) throw unknownInsertedId(`bulkWrite operation ${index}`);
      if (argument === 'replacement') copy.replacement = update as Document;
      else copy.update = update;
    }
    return { [kind]: copy };
  });
}

/** Refuses, before anything is sent, a bulkWrite upsert whose inserted `_id` the guard cannot tell (insertableIds). */
function refuseUnknownBulkUpsertIds(operations: unknown): void {
  if (!Array.isArray(operations)) return;
  operations.forEach((operation: Record<string, { filter?: unknown; upsert?: unknown; update?: unknown; replacement?: unknown }>, index) => {
    const kind = Object.keys(operation)[0];
    const body = operation[kind];
    if (body?.upsert === true) insertableIds(`bulkWrite operation ${index}`, body.filter, kind === 'replaceOne' ? body.replacement : body.update, kind === 'replaceOne');
  });
}

/**
 * The document a bulkWrite `insertOne` inserts, as the driver picks it: `op.insertOne.document`,
 * or, when that is null or undefined, the `insertOne` object itself (mongodb 6 and 7,
 * `BulkOperationBase.raw` in lib/bulk/common.js: `op.insertOne && op.insertOne.document == null ?
 * op.insertOne : op.insertOne.document`, "TODO(NODE-6003): remove support for omitting the
 * `documents` subdocument in bulk inserts"). Undefined when there is none (the driver refuses it).
 */
function insertedDocument(body: { document?: Document } | null | undefined): Document | undefined {
  if (body === null || body === undefined || typeof body !== 'object') return undefined;
  const document = body.document == null ? (body as Document) : body.document;
  return document !== null && typeof document === 'object' ? document : undefined;
}

/** A duplicate-key error (11000) of the write itself. */
function isDuplicateKey(error: unknown): boolean {
  return (error as { code?: unknown } | null)?.code === 11000;
}

/** How long checkThenWrite's rounds may go on, and what set the bound. */
interface Budget {
  ms: number;
  /** The caller's option that shortened it, if any. */
  option?: 'maxTimeMS' | 'timeoutMS';
}

/**
 * checkThenWrite's budget: the guard transactions' 120 s, capped by the write's own `maxTimeMS`
 * (the server's limit on each command; a guarded call that keeps searching must not outlast it)
 * and `timeoutMS` (the driver's client-side timeout, from the write's options or its collection).
 * 0 means no limit for both, as for the driver.
 */
function checkBudget(options: Record<string, unknown>, collection: { timeoutMS?: number }): Budget {
  let budget: Budget = { ms: TRANSACTION_RETRY_BUDGET_MS };
  const timeoutMS = typeof options.timeoutMS === 'number' ? options.timeoutMS : collection.timeoutMS;
  for (const [option, value] of [['maxTimeMS', options.maxTimeMS], ['timeoutMS', timeoutMS]] as const) {
    if (typeof value === 'number' && value > 0 && value < budget.ms) budget = { ms: value, option };
  }
  return budget;
}

/** checkThenWrite's budget is spent: every round's target stopped matching (or sorting where it did) before its write. */
function stoppedMatching(method: GuardedMethod, budget: Budget): LockDatabaseError {
  const within = budget.option ? `within the write's ${budget.option} (${budget.ms} ms)` : `for ${budget.ms / 1000} s`;
  const cause = new Error(
    `every document the write guard found for this ${method}() stopped matching its filter (or sorting first) before the write reached it, on every attempt ${within} ` +
      '(other writers keep changing the documents it matches); nothing was written',
  );
  return new LockDatabaseError(method, cause, true);
}

/**
 * Whether the write is unacknowledged (`w: 0`): its own write concern (`writeConcern`, or the
 * legacy `w` option), else its collection's.
 */
function isUnacknowledged(options: Record<string, unknown>, collection: { writeConcern?: { w?: unknown } }): boolean {
  const own = (options.writeConcern as { w?: unknown } | undefined)?.w ?? options.w;
  return (own ?? collection.writeConcern?.w) === 0;
}

/** The write's options with an acknowledged write concern (`w: 1`) in place of `w: 0`. */
function acknowledgedOptions(options: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = { ...options, writeConcern: { w: 1 } };
  for (const legacy of ['w', 'j', 'wtimeout', 'fsync']) delete out[legacy];
  return out;
}

/**
 * What the driver returns for an unacknowledged write of `method` (mongodb 6 and 7: the reply is
 * `{ ok: 1 }`, moreToCome; `UpdateOneOperation.handleOk` and its siblings in
 * lib/operations/update.js and delete.js build `acknowledged: false` and counts read from that
 * reply, i.e. undefined; `FindAndModifyOperation.handleOk` returns `value ?? null`, or the reply
 * itself with `includeResultMetadata`).
 */
function unacknowledgedResult(method: GuardedMethod, options: Record<string, unknown>): unknown {
  switch (method) {
    case 'updateOne':
    case 'updateMany':
    case 'replaceOne':
      return { acknowledged: false, modifiedCount: undefined, upsertedId: null, upsertedCount: 0, matchedCount: undefined };
    case 'deleteOne':
    case 'deleteMany':
      return { acknowledged: false, deletedCount: undefined };
    default:
      return options.includeResultMetadata === true ? { ok: 1 } : null;
  }
}

/**
 * Whether mongod retries an upsert with the caller's `filter` after `error`, a duplicate-key
 * error of its insert (R9; `shouldRetryDuplicateKeyException`, write_ops_exec.cpp, 6.0 to 8.0):
 * a single-document upsert whose query is nothing but equalities (`matchContainsOnlyAndedEqualityNodes`)
 * on exactly the fields of the unique index that raised it (`keyPattern`), each equal to the
 * duplicated key's value (`keyValue`, compared by value, ignoring field names, without collation).
 * Read conservatively: top-level fields with a plain value or `{ $eq }`, and `$and` lists of such;
 * anything else (an operator, `$or`, a dotted path the error names otherwise) is not retried.
 */
function retriesDuplicateKey(method: GuardedMethod, filter: Document, error: unknown): boolean {
  if (!SINGLE_DOCUMENT.has(method)) return false;
  const info = error as { keyPattern?: unknown; keyValue?: unknown } | null;
  const keyPattern = info?.keyPattern;
  const keyValue = info?.keyValue;
  if (keyPattern === null || typeof keyPattern !== 'object' || keyValue === null || typeof keyValue !== 'object') return false;
  const equalities = new Map<string, unknown>();
  if (!collectEqualities(filter, equalities)) return false;
  const fields = Object.keys(keyPattern);
  const values = Object.values(keyValue);
  if (fields.length === 0 || fields.length !== equalities.size || values.length !== fields.length) return false;
  return fields.every((field, i) => equalities.has(field) && idKey(equalities.get(field)) === idKey(values[i]));
}

/** Adds the equalities of a filter made only of them (see retriesDuplicateKey) to `out`; false for any other condition. */
function collectEqualities(filter: unknown, out: Map<string, unknown>): boolean {
  if (filter === null || typeof filter !== 'object' || Array.isArray(filter)) return false;
  for (const [key, value] of Object.entries(filter)) {
    if (key === '$comment') continue; // no match expression (parseComment)
    if (key === '$and') {
      if (!Array.isArray(value) || !value.every((clause) => collectEqualities(clause, out))) return false;
      continue;
    }
    if (key.startsWith('$')) return false;
    let operand = value;
    if (operand !== null && typeof operand === 'object' && !Array.isArray(operand) && (operand as { _bsontype?: unknown })._bsontype === undefined && !(operand instanceof Date)) {
      const keys = Object.keys(operand);
      if (keys.length === 1 && keys[0] === '$eq') operand = (operand as Document).$eq;
      else if (keys.some((k) => k.startsWith('$'))) return false;
    }
    if (!isEqualityValue(operand) && operand !== null) return false;
    if (out.has(key)) return false; // two equalities on one path: mongod refuses it (NotSingleValueField)
    out.set(key, operand);
  }
  return true;
}

/** What updateMany / deleteMany return, from the counts of the bulk writes that carried it. */
function manyResult(method: GuardedMethod, counts: { matchedCount?: number; modifiedCount?: number; deletedCount?: number }): unknown {
  if (method === 'deleteMany') return { acknowledged: true, deletedCount: counts.deletedCount ?? 0 };
  return { acknowledged: true, matchedCount: counts.matchedCount ?? 0, modifiedCount: counts.modifiedCount ?? 0, upsertedCount: 0, upsertedId: null };
}

/** Whether an error came from the server or the network (a code, or a transaction label), not from the driver's own checks. */
function reachedServer(error: unknown): boolean {
  const e = error as { code?: unknown; name?: unknown; hasErrorLabel?: (label: string) => boolean } | null;
  if (e === null || typeof e !== 'object') return false;
  if (typeof e.code === 'number' || (typeof e.name === 'string' && /^Mongo(Network|ServerSelection)/.test(e.name))) return true;
  return typeof e.hasErrorLabel === 'function' && (e.hasErrorLabel('TransientTransactionError') || e.hasErrorLabel('UnknownTransactionCommitResult'));
}

/** A holder's saveAndUnlock write matched nothing: its transaction is aborted, and Mongoose gets `result`. */
class NothingWritten extends Error {
  constructor(readonly result: unknown) {
    super('mongoose-pessimistic-lock: the holder\'s write matched nothing; its transaction was aborted');
    this.name = 'NothingWritten';
  }
}

/** In the caller's transaction a lost insert race cannot be retried here: it is someone's new lock. */
function joinedError(error: unknown): unknown {
  if (error instanceof ClaimRaceError) {
    const raced = (error.cause as { keyValue?: { _id?: unknown } } | null)?.keyValue?._id;
    return new LockedError(raced, undefined, REFUSED);
  }
  return error;
}

/**
 * A bulkWrite operation must be an object with exactly one known key: with two, the guard would
 * check one and the driver could run the other.
 */
function validateBulkOperations(operations: unknown): void {
  if (!Array.isArray(operations)) return; // Mongoose and the driver report this themselves
  operations.forEach((operation: unknown, index) => {
    const keys = operation !== null && typeof operation === 'object' ? Object.keys(operation) : [];
    if (keys.length !== 1 || !(BULK_KINDS as readonly string[]).includes(keys[0])) {
      throw new InvalidLockArgumentError(
        `bulkWrite operation ${index}`,
        `expected an object with exactly one of ${BULK_KINDS.join(', ')}, got ${keys.length === 0 ? 'none' : `the keys ${keys.join(', ')}`}. Split it into one operation per key.`,
      );
    }
  });
}

