/**
 * Several documents locked as ONE acquisition, all or nothing (`Model.lockMany`, `lockAll`, the
 * group handle): one token shared by every lock of the group, taken per lock collection by one
 * `update` of one statement per document (LockStore.takeGroup), read back by one `find` and the
 * documents loaded by one `find` per model. So the number of commands does not grow with the
 * number of documents.
 *
 * All or nothing: a round either hands out every lock, or releases by token whatever it took
 * (one `update` per lock collection: the token is unique to the round, so nobody else's lock is
 * touched) before it reports the refusal or the fault. If that release itself fails (the
 * connection is gone), the round's locks stay held, by nobody who can use them, until their ttl
 * passes: expiry is the server's, so they free themselves; nothing is handed out half.
 *
 * Waiting (`wait`, issue 17 item 2): the first attempt is the same round as without `wait`. For
 * ORDERED_AFTER_MS it then retries in rounds that hold nothing between them (woken by changes, a
 * read before each retry says whether the group is free). Refused after that, the group waits in
 * CANONICAL ORDER (canonicalOrder: database, lock collection name, id key, then the deployment's
 * seed list; the same in every process): it holds the longest canonical prefix it got, reserves the
 * one document it lacks first (GroupReservation: once free, only this group takes it, so callers
 * that release and re-take it cannot starve the group), and when that document is free runs one
 * ordered step (orderedStep: the round's commands, renewing the prefix). Why this order and not
 * release-and-retry alone: release-and-retry never deadlocks but a group needing many documents is
 * starved by callers that take turns on them; why not reserve every document (branch fair2): that
 * makes hold-and-wait cycles with ordinary callers that plain locks never have. With a canonical
 * order, groups hold only prefixes of one global order and wait for the next document, so no two
 * groups wait for each other in a cycle; a reservation on the awaited document alone is part of
 * that same order (the group "holds" it next). What remains is code outside the order (a caller
 * that holds one document and waits for another, a lockNext worker holding its job): a group that
 * held a non-empty prefix for longer than holdBound gives everything back, so such a cycle ends
 * within the bound (docs/limits.md says what is and is not guaranteed).
 */
import { performance } from 'node:perf_hooks';
import type { HydratedDocument } from 'mongoose';
import { LockExpiredOnArrivalError, LockNotHeldError, LockTargetNotFoundError, LockedError } from './errors';
import { abortedWith, calledOff } from './lock-waiter';
import { attachHeldLock, estimatedServerNow, finishExtension, heldLockState, leaseLeft, leaseReleased, lostError, newHeldLockState, releaseLease, settleRelease, startExtension, type HeldLockFields, type HeldLockState } from './held-lock';
import { MIN_LEASE_MS, monotonicNow, type GrantTiming } from './lease';
import { deploymentSeedName } from './deployment-key';
import { idKey } from './id-key';
import { newLockToken, type GroupBlocker } from './lock-store';
import type { AnyModel, ModelRuntime } from './runtime';
import { issueTicket } from './ticket';
import { GroupReservation } from './group-reservation';

type AnyDoc = HydratedDocument<unknown>;

/** One document of a group request. */
export interface GroupMember {
  model: AnyModel;
  /**
   * The caller's id decoded from its BSON before the cast (CastId.loadId, arguments.ts): the load
   * casts it exactly as `documentId` was cast (setters included), and never re-reads the caller's object.
   */
  rawId: unknown;
  /** The id cast to the schema's `_id` type. */
  documentId: unknown;
  /** The owner as stored for this member's model (hashed unless configured otherwise). */
  ownerKey: string;
  runtime: ModelRuntime;
}

export interface GroupRequest {
  members: readonly GroupMember[];
  owner: string;
  ttl: number;
  label: string | null;
  /** Milliseconds to wait for the whole group; 0: one attempt. */
  wait: number;
  signal: AbortSignal | undefined;
}

/** The documents of one lock collection in a held group, with their locks. */
export interface GroupPart {
  runtime: ModelRuntime;
  states: HeldLockState[];
}

/** A group acquisition that was handed out: its token, ttl and the locks per lock collection. */
export interface HeldGroup {
  token: string;
  ttl: number;
  parts: GroupPart[];
}

/** The loaded documents, per model and id key. */
type Loaded = Map<AnyModel, Map<string, AnyDoc>>;

/** A member's loaded document, if it exists. */
const documentOf = (loaded: Loaded, member: GroupMember): AnyDoc | undefined => loaded.get(member.model)?.get(idKey(member.documentId));

/**
 * The members that share one lock collection (one lock model per connection and collection name,
 * lock-model.ts, whichever plugin application reaches it): one `update` and one `find` each.
 */
interface Part {
  /** The runtime of the first member: its store is the lock collection's. */
  runtime: ModelRuntime;
  members: GroupMember[];
  ids: unknown[];
}

type Round =
  | { kind: 'granted'; documents: AnyDoc[]; group: HeldGroup }
  /** `transaction`: a statement waited for another process's transaction until the round's maxTimeMS (R26). */
  | { kind: 'refused'; blockers: GroupBlocker[]; transaction?: boolean }
  | { kind: 'expired'; documentId: unknown; expiresAt: Date };

const POLL_BASE_MS = 20;
const POLL_CAP_MS = 1_000;
/** With live change streams, still retry this often in case an event was missed (as lock-waiter.ts). */
const SAFETY_POLL_MS = 5_000;
/**
 * Without `wait`, a round refused by a lock that was gone by the time the blockers were read (it
 * was released in between), or granted too late to hand out, is tried again at once, this many
 * rounds in all, before the call gives up.
 */
const QUICK_ROUNDS = 3;
/**
 * A waiting group first waits as before ordered waiting: release-and-retry rounds, holding
 * nothing between them (most contention ends within a few rounds, and holding a prefix would make
 * overlapping groups queue behind each other: about half the throughput, bench/contention-ab.ts).
 * Refused after this long, it waits in canonical order (waitInOrder), which is what serves it
 * against callers that keep taking its documents.
 */
const ORDERED_AFTER_MS = 250;
/** The random pause before a retry is drawn from [0, min(cap, twice the last round's duration)). */
const JITTER_CAP_MS = 250;

/**
 * The conservative lease of one lock of a group (issue 16 item 3, PRODUCT.md property 13; see
 * lease.ts): timed from `sentAt`, the monotonic clock just before the group's `update` was sent,
 * with `serverNow` a `$$NOW` the server read after it (the grants `find`'s).
 */
export function leaseState(lock: HeldLockFields, serverNow: Date, sentAt: number, scope: string): HeldLockState {
  return newHeldLockState(lock, { sentAt, serverNow, expiresAt: lock.expiresAt }, scope);
}

/** Groups the members by lock collection, in the order they first appear. */
function partsOf(members: readonly GroupMember[]): Part[] {
  const parts = new Map<object, Part>();
  for (const member of members) {
    let part = parts.get(member.runtime.lockModel);
    if (!part) parts.set(member.runtime.lockModel, (part = { runtime: member.runtime, members: [], ids: [] }));
    part.members.push(member);
    part.ids.push(member.documentId);
  }
  return [...parts.values()];
}

/** Releases a round's locks by token, one command per lock collection; resolves when all are done. */
async function releaseRound(parts: readonly Part[], token: string): Promise<void> {
  await Promise.all(parts.map((part) => part.runtime.store.releaseGroup(part.ids, token)));
}

/** The same, after a fault: never throws (the fault is what the caller reports; the locks expire). */
async function releaseAfterFault(parts: readonly Part[], token: string): Promise<void> {
  await Promise.all(parts.map((part) => part.runtime.store.releaseGroup(part.ids, token).catch(() => undefined)));
}

/**
 * Loads the documents, one `find` per model, from the primary, hydrated, outside any transaction. `batchSize` one more than
 * the number of ids: mongod then reaches the end of the results while filling the first batch and
 * closes the cursor (find.cpp shouldSaveCursor: no cursor is kept at EOF), so no getMore follows
 * unless the documents exceed one 16 MiB batch. Not `singleBatch`: a truncated batch would read as
 * missing documents.
 */
async function loadMembers(members: readonly GroupMember[]): Promise<Loaded> {
  const byModel = new Map<AnyModel, GroupMember[]>();
  for (const member of members) {
    const list = byModel.get(member.model);
    if (list) list.push(member);
    else byModel.set(member.model, [member]);
  }
  const loaded: Loaded = new Map();
  await Promise.all(
    [...byModel].map(async ([model, list]) => {
      const docs = (await model
        .find({ _id: { $in: list.map((m) => m.rawId) } })
        .read('primary')
        // Never in the caller's transaction (Mongoose's transactionAsyncLocalStorage would join it):
        // it reads its own older snapshot, and the locks were taken on the latest data.
        .session(null)
        .batchSize(list.length + 1)) as AnyDoc[];
      // Keyed by the stored `_id`, without the schema's getters (a getter may turn it into another
      // value, e.g. a string for an ObjectId): the members are keyed by the cast id.
      loaded.set(model, new Map(docs.map((doc) => [idKey(doc.get('_id', null, { getters: false })), doc])));
    }),
  );
  return loaded;
}

/** One round: take every lock under a fresh token, then hand them out with their documents, or release them. */
async function round(parts: readonly Part[], request: GroupRequest): Promise<Round> {
  const token = newLockToken();
  const sentAt = performance.now();
  // Settled, not Promise.all: after a fault of one lock collection's command, the release by token
  // must come after every other command of the round, or a statement applied later stays held.
  const settled = await Promise.allSettled(parts.map((part) => part.runtime.store.takeGroup(part.members, token, request.ttl, request.label)));
  const fault = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (fault) {
    // Some statements, or another lock collection's command, may have been applied.
    await releaseAfterFault(parts, token);
    throw fault.reason;
  }
  const taken = settled.map((s) => (s as PromiseFulfilledResult<boolean | 'timedOut'>).value);
  if (taken.every((t) => t === true)) {
    let grants: Awaited<ReturnType<ModelRuntime['store']['readGroupGrants']>>[];
    let loaded: Loaded;
    try {
      [grants, loaded] = await Promise.all([Promise.all(parts.map((part) => part.runtime.store.readGroupGrants(part.ids, token))), loadMembers(request.members)]);
    } catch (error) {
      await releaseAfterFault(parts, token);
      throw error;
    }
    // Every record still carries the token (only a ttl shorter than this round lets another owner
    // take one in between; then the round is refused like any other).
    if (grants.every((records, i) => records.length === parts[i].ids.length)) {
      return handOut(parts, request, token, sentAt, grants, loaded);
    }
  }
  let blockers: GroupBlocker[][];
  try {
    [, blockers] = await Promise.all([releaseRound(parts, token), Promise.all(parts.map((part) => part.runtime.store.findGroupBlockers(part.ids, token)))]);
  } catch (error) {
    await releaseAfterFault(parts, token);
    throw error;
  }
  return { kind: 'refused', blockers: inCallerOrder(parts, request, blockers), transaction: taken.includes('timedOut') };
}

/** Attaches each lock to its document, unless a document is missing or the lease already ran out. */
async function handOut(parts: readonly Part[], request: GroupRequest, token: string, sentAt: number, grants: Awaited<ReturnType<ModelRuntime['store']['readGroupGrants']>>[], loaded: Loaded): Promise<Round> {
  const missing = request.members.find((m) => !documentOf(loaded, m));
  if (missing) {
    await releaseAfterFault(parts, token);
    throw new LockTargetNotFoundError(missing.documentId, missing.model.modelName);
  }
  // The lease of the group is its shortest one: never hand out a lock that may have expired.
  let shortest: { remaining: number; documentId: unknown; expiresAt: Date } | undefined;
  const statesByMember = new Map<GroupMember, HeldLockState>();
  const groupParts: GroupPart[] = parts.map((part, i) => {
    const records = new Map(grants[i].map((r) => [idKey(r._id), r]));
    const states = part.members.map((member) => {
      const record = records.get(idKey(member.documentId))!;
      const expiresAt = record.expiresAt as Date;
      const serverNow = record.now as Date;
      const remaining = expiresAt.getTime() - serverNow.getTime();
      if (!shortest || remaining < shortest.remaining) shortest = { remaining, documentId: member.documentId, expiresAt };
      const fence = Number(record.fence);
      const held: HeldLockFields = {
        documentId: member.documentId,
        owner: request.owner,
        token,
        fence,
        acquiredAt: record.acquiredAt as Date,
        expiresAt,
        ttl: request.ttl,
        ticket: () => issueTicket(member.documentId, token, fence),
        label: typeof record.label === 'string' ? record.label : null,
      };
      const state = leaseState(held, serverNow, sentAt, part.runtime.store.scope);
      statesByMember.set(member, state);
      return state;
    });
    return { runtime: part.runtime, states };
  });
  if (shortest && [...statesByMember.values()].some((state) => leaseLeft(state) < MIN_LEASE_MS)) {
    await releaseAfterFault(parts, token);
    return { kind: 'expired', documentId: shortest.documentId, expiresAt: shortest.expiresAt };
  }
  const documents = request.members.map((member) => {
    const doc = documentOf(loaded, member)!;
    attachHeldLock(doc, statesByMember.get(member)!);
    return doc;
  });
  return { kind: 'granted', documents, group: { token, ttl: request.ttl, parts: groupParts } };
}

/**
 * Whether the group could be taken now, without taking anything: the locks that would refuse it,
 * one `find` per lock collection, in the caller's order (a waiting caller checks this before each
 * retry, so that while it is still blocked it never holds a lock for a moment).
 */
async function blockersNow(parts: readonly Part[], request: GroupRequest): Promise<GroupBlocker[]> {
  const found = await Promise.all(parts.map((part) => part.runtime.store.findBlockersFor(part.ids, [...new Set(part.members.map((m) => m.ownerKey))])));
  return inCallerOrder(parts, request, found);
}

/** The blockers found per lock collection, in the order of the request's members. */
function inCallerOrder(parts: readonly Part[], request: GroupRequest, blockers: GroupBlocker[][]): GroupBlocker[] {
  const found = new Map<string, GroupBlocker>();
  blockers.forEach((list, i) => list.forEach((b) => found.set(`${i}\u0000${idKey(b.documentId)}`, b)));
  const partIndex = new Map(parts.map((part, i) => [part.runtime.lockModel as object, i]));
  const ordered: GroupBlocker[] = [];
  for (const member of request.members) {
    const blocker = found.get(`${partIndex.get(member.runtime.lockModel)}\u0000${idKey(member.documentId)}`);
    if (blocker) ordered.push({ ...blocker, documentId: member.documentId });
  }
  return ordered;
}

/** Resolves after `ms`, or as soon as `signal` aborts; never rejects. */
function pause(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    };
    const timer = setTimeout(done, Math.max(0, ms));
    signal?.addEventListener('abort', done, { once: true });
  });
}

/** Wake-ups for every document of the group, registered before a round (so no release is missed). */
function subscribeAll(parts: readonly Part[]) {
  // Through each member's own runtime: waiters of every model on this lock collection share its watch.
  const subscriptions = parts.flatMap((part) => part.members.map((m) => ({ key: idKey(m.documentId), subscription: m.runtime.watch.subscribe(m.documentId) })));
  return {
    /** Whether every lock collection's change stream was already capturing events at subscription. */
    wasLive: subscriptions.every((s) => s.subscription.wasLive),
    /** Whether every lock collection has a live change stream (opening them if needed). */
    live: Promise.all(subscriptions.map((s) => s.subscription.live)).then((all) => all.every(Boolean)),
    /**
     * Keeps only the blockers' subscriptions; resolves when any of them changed. They are never
     * marked `waiting`: LockWatch hands a change to one waiting waiter only, on the understanding
     * that the waiter it wakes acts on that lock (takes it, or releases it again and so passes the
     * change on). A woken group may find another of its documents still held and not touch this
     * one, so it stays among the waiters every change is told to.
     */
    waitFor(blockers: readonly GroupBlocker[]): Promise<void> {
      const keys = new Set(blockers.map((b) => idKey(b.documentId)));
      const kept = subscriptions.filter((s) => keys.has(s.key));
      for (const s of subscriptions) if (!keys.has(s.key)) s.subscription.cancel();
      return kept.length ? Promise.race(kept.map((s) => s.subscription.changed)) : new Promise<void>(() => undefined);
    },
    cancel(): void {
      for (const s of subscriptions) s.subscription.cancel();
    },
  };
}

/** The LockedError for a refused group, naming its first blocker (with the holder's label); `cause`: a timed-out signal's reason. */
function lockedError(blocker: GroupBlocker | undefined, request: GroupRequest, detail: string, cause?: unknown): LockedError {
  const count = request.members.length;
  const none = count === 1 ? '' : ` None of the ${count} documents asked for was locked.`;
  if (!blocker) return new LockedError(request.members[0].documentId, undefined, `${none}${detail}`, undefined, null, cause);
  return new LockedError(blocker.documentId, blocker.expiresAt, `${none}${detail}`, blocker.remainingMs, blocker.label, cause);
}

/**
 * Takes every lock of the request or none, waiting up to `request.wait` milliseconds; resolves to
 * the documents in the order of `request.members`, each carrying its lock. Throws LockedError
 * naming a blocking document, LockExpiredError when the grants could not be handed out before
 * their lease ran out, LockTargetNotFoundError for a missing document (everything released in
 * each case), or the signal's reason on an explicit abort. A signal that times out ends the wait
 * as `wait` running out does (lock-waiter.ts, acquireWaiting): LockedError, the reason as `cause`.
 */
export async function lockGroup(request: GroupRequest): Promise<{ documents: AnyDoc[]; group: HeldGroup }> {
  const parts = partsOf(request.members);
  await Promise.all(request.members.map((member) => member.runtime.ready));
  for (const part of parts) part.runtime.store.refuseGroupInOpenTransaction(part.ids);
  const waiting = request.wait > 0 || request.signal !== undefined;
  const started = performance.now();
  let quick = 0;
  let roundMs = 0;
  /** The server time of the call's first refusal: its place among waiters (group-reservation.ts). */
  let since: Date | undefined;
  for (let attempt = 0; ; attempt++) {
    if (calledOff(request.signal)) throw abortedWith(request.members[0].documentId, request.signal!);
    const subscriptions = waiting ? subscribeAll(parts) : undefined;
    try {
      // After a refusal, a waiting caller first checks, without taking anything, whether the group
      // is free; only then does it run a round.
      const blockedBy = attempt > 0 && subscriptions ? await blockersNow(parts, request) : [];
      let outcome: Round;
      if (blockedBy.length > 0) outcome = { kind: 'refused', blockers: blockedBy };
      else {
        const roundStarted = performance.now();
        outcome = await round(parts, request);
        roundMs = performance.now() - roundStarted;
      }
      if (outcome.kind === 'granted') return outcome;
      if (outcome.kind === 'refused') since ??= outcome.blockers[0]?.serverNow;
      // Refused for long enough under `wait`: from here the group waits in canonical order (waitInOrder).
      if (subscriptions && performance.now() - started >= ORDERED_AFTER_MS) return await abortable(waitInOrder(parts, request, started, outcome, since), parts, request);
      const blockers = outcome.kind === 'refused' ? outcome.blockers : [];
      const transaction = outcome.kind === 'refused' && outcome.transaction === true;
      const live = subscriptions ? await subscriptions.live : false;
      if (calledOff(request.signal)) throw abortedWith(request.members[0].documentId, request.signal!);
      const timedOut = request.signal?.aborted === true;
      // A stream that only started capturing during the round may have missed a release: again.
      if (subscriptions && live && !subscriptions.wasLive && !timedOut) continue;
      const waited = performance.now() - started;
      const left = request.wait - waited;
      if (left <= 0 || timedOut) {
        // Nothing blocks any more (released since, or granted too late to hand out): try again at once.
        if (blockers.length === 0 && !transaction && ++quick < QUICK_ROUNDS && !timedOut) continue;
        if (outcome.kind === 'expired') {
          throw new LockExpiredOnArrivalError(outcome.documentId, outcome.expiresAt, { operation: 'lock', ttl: request.ttl, elapsedMs: roundMs, attempts: quick });
        }
        const cause: unknown = timedOut ? request.signal!.reason : undefined;
        const busy = transaction && blockers.length === 0 ? ' A document of the group is being written by a transaction of another process; try again when it has ended.' : '';
        throw lockedError(blockers[0], request, `${busy}${request.wait > 0 || timedOut ? ` Waited ${Math.round(waited)} ms for it.` : ''}`, cause);
      }
      if (!subscriptions) throw lockedError(blockers[0], request, ''); // not reached: a wait always subscribes
      // All blockers must be gone for the group to succeed: by expiry, that is the latest of them.
      const untilExpiry = blockers.length === 0 ? (transaction ? Infinity : 0) : Math.max(...blockers.map((b) => (b.remainingMs ?? Infinity) + 1));
      // A transaction's end writes nothing a waiter hears of: back off and try again.
      const poll = live && !transaction ? SAFETY_POLL_MS : Math.random() * Math.min(POLL_CAP_MS, POLL_BASE_MS * 2 ** attempt);
      // At ORDERED_AFTER_MS at the latest, try again: a refusal from then on goes ordered.
      const untilOrdered = Math.max(0, ORDERED_AFTER_MS - waited);
      await Promise.race([subscriptions.waitFor(blockers), pause(Math.min(left, untilExpiry, poll, untilOrdered), request.signal)]);
      // Woken: stop listening (the next attempt subscribes again, before it reads anything).
      subscriptions.cancel();
      // Callers woken by the same release would otherwise all retry in the same instant: a random
      // pause of up to two rounds' length lets one of them run its round alone. Not growing with
      // the number of refused rounds: that would hand every race to callers that just arrived.
      await pause(Math.random() * Math.min(JITTER_CAP_MS, 2 * roundMs), request.signal);
    } finally {
      subscriptions?.cancel();
    }
  }
}

/**
 * The canonical order of a group's members, total and the same in every process: by database
 * name, lock collection name, id key (id-key.ts), then the deployment's seed list
 * (deployment-key.ts deploymentSeedName), each compared as strings code unit by code unit. The
 * database comes first because one lock collection name and one `_id` name two documents in two
 * databases (`useDb`); the seed list because they name two documents on two deployments too. Not
 * the process's deployment number (deploymentOf): it depends on the order a process met its
 * deployments. For `lockMany` every member shares one lock collection, so it is the order of the
 * id keys.
 *
 * What remains: two members equal in all four are listed twice on one deployment, which lockAll
 * refuses (deploymentKeys). Two processes that name one deployment by different seed lists (one
 * seeds `a:27017`, the other `b:27017`) may order a document of it and its namesake on another
 * deployment differently; a cycle between two such groups then ends by the hold bound (holdBound),
 * as one through user code does (docs/limits.md).
 */
function canonicalOrder(members: readonly GroupMember[]): GroupMember[] {
  const keyOf = new Map(
    members.map((m) => {
      const locks = m.runtime.lockModel;
      return [m, [locks.db.name, locks.collection.collectionName, idKey(m.documentId), deploymentSeedName(locks.db)]] as const;
    }),
  );
  const compare = (a: GroupMember, b: GroupMember): number => {
    const [x, y] = [keyOf.get(a)!, keyOf.get(b)!];
    for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return x[i] < y[i] ? -1 : 1;
    return 0;
  };
  return [...members].sort(compare);
}

/** What a waiting group holds: the first `count` members of its canonical order, under `token`. */
interface Prefix {
  token: string | undefined;
  count: number;
}

/** The outcome of one ordered step: the whole group, or the prefix it now holds. */
type Step = { kind: 'done'; round: Round } | { kind: 'prefix'; prefix: Prefix };

/**
 * One ordered step of a waiting group: ONE `update` per lock collection sends every member (the
 * fast path's command, takeGroup, with the group's reservation key), so it renews the prefix the
 * group holds (same owner: taken over under the new token, its lease timed from this send) and
 * takes every other member that is free and not reserved by someone else; one `find` per lock
 * collection reads which members carry the new token. All of them: handed out as a round is. Else
 * the group keeps the longest canonical prefix it got and releases, by token, what it got past
 * the first member it lacks (so it never holds anything above the document it waits for: groups
 * that hold only prefixes of one global order cannot wait for each other in a cycle).
 * The step's lease is `leaseMs` (stepLease), not the ttl: a group it completes is renewed to the
 * ttl before it is handed out (renewedToTtl).
 */
async function orderedStep(parts: readonly Part[], order: readonly GroupMember[], request: GroupRequest, held: Prefix, key: string, leaseMs: number): Promise<Step> {
  const token = newLockToken();
  const sentAt = performance.now();
  const tokens = held.token ? [held.token, token] : [token];
  const releaseAll = () => Promise.all(tokens.map((t) => releaseAfterFault(parts, t)));
  const settled = await Promise.allSettled(parts.map((part) => part.runtime.store.takeGroup(part.members, token, request.ttl, request.label, key, leaseMs)));
  const fault = settled.find((s): s is PromiseRejectedResult => s.status === 'rejected');
  if (fault) {
    await releaseAll();
    throw fault.reason;
  }
  let grants: Awaited<ReturnType<ModelRuntime['store']['readGroupGrants']>>[];
  try {
    grants = await Promise.all(parts.map((part) => part.runtime.store.readGroupGrants(part.ids, token)));
  } catch (error) {
    await releaseAll();
    throw error;
  }
  const partIndex = new Map(parts.map((part, i) => [part.runtime.lockModel as object, i]));
  const got = new Set(grants.flatMap((records, i) => records.map((r) => `${i}\u0000${idKey(r._id)}`)));
  const has = (m: GroupMember) => got.has(`${partIndex.get(m.runtime.lockModel)}\u0000${idKey(m.documentId)}`);
  let count = 0;
  while (count < order.length && has(order[count])) count++;
  if (count === order.length) {
    // A lock of the group lapsed before the renewal reached it (or the same owner took one over
    // since): release by token, hold nothing and keep waiting.
    const lapsed = async (): Promise<Step> => {
      await releaseAll();
      return { kind: 'prefix', prefix: { token: undefined, count: 0 } };
    };
    let granted = { sentAt, grants };
    let loaded: Loaded;
    try {
      if (leaseMs < request.ttl) {
        // Taken under the step's short lease: renewed to the ttl before anything is handed out,
        // and the lease timed from the renewal's send, with the expiry read back (not estimated).
        const renewedAt = performance.now();
        if (!(await renewedToTtl(parts, token, request.ttl))) return await lapsed();
        let regrants: typeof grants;
        [regrants, loaded] = await Promise.all([Promise.all(parts.map((part) => part.runtime.store.readGroupGrants(part.ids, token))), loadMembers(request.members)]);
        // Another call of the same owner may have taken one over (acquirable) since: as lapsed.
        if (regrants.some((records, i) => records.length < parts[i].ids.length)) return await lapsed();
        granted = { sentAt: renewedAt, grants: regrants };
      } else loaded = await loadMembers(request.members);
    } catch (error) {
      await releaseAll();
      throw error;
    }
    return { kind: 'done', round: await handOut(parts, request, token, granted.sentAt, granted.grants, loaded) };
  }
  // Past the prefix: given back at once (one `update` per lock collection that has any).
  const beyond = order.slice(count).filter(has);
  try {
    await Promise.all(
      parts.map((part) => {
        const ids = beyond.filter((m) => m.runtime.lockModel === part.runtime.lockModel).map((m) => m.documentId);
        return ids.length ? part.runtime.store.releaseGroup(ids, token) : undefined;
      }),
    );
  } catch (error) {
    await releaseAll();
    throw error;
  }
  return { kind: 'prefix', prefix: { token: count > 0 ? token : undefined, count } };
}

/**
 * Renews what an ordered step got whole (under its short step lease, token `token`) to the ttl,
 * before anything is handed out: LockStore.extendGroup, one `update` per lock collection, filter
 * `_id` among the group's, the token and unexpired by the server's `$$NOW` (so a lock that lapsed,
 * and anyone's who took it since, is never renewed), `expiresAt: $$NOW + ttl`. Resolves to whether
 * every lock matched; false: one lapsed first, and the caller releases by token and keeps waiting.
 * The caller then reads the grants again and times the leases from this send (handOut, lease.ts:
 * the renewal's `$$NOW` is read after it), so the expiry it hands out is the server's, not an
 * estimate. A fault (the outcome unknown) is thrown; the caller releases by token.
 */
async function renewedToTtl(parts: readonly Part[], token: string, ttl: number): Promise<boolean> {
  const matched = await Promise.all(parts.map((part) => part.runtime.store.extendGroup(part.ids, token, ttl)));
  return matched.every((count, i) => count === parts[i].ids.length);
}

/**
 * An explicit abort ends a waiting group's call at once (with the signal's reason), whatever
 * command of the wait is in flight: the wait itself goes on in the background until that command
 * answers, sees the abort and releases what it holds; a group it was granted meanwhile is
 * released by its token, never returned. A timeout is not an abort: it ends the wait as `wait`
 * running out does (the call's own loop reports it).
 */
function abortable(work: Promise<{ documents: AnyDoc[]; group: HeldGroup }>, parts: readonly Part[], request: GroupRequest): Promise<{ documents: AnyDoc[]; group: HeldGroup }> {
  const signal = request.signal;
  if (!signal) return work;
  let onAbort: (() => void) | undefined;
  const aborted = new Promise<never>((_, reject) => {
    onAbort = () => {
      if (calledOff(signal)) reject(abortedWith(request.members[0].documentId, signal));
    };
    signal.addEventListener('abort', onAbort, { once: true });
  });
  aborted.catch(() => undefined);
  void work.then(
    (granted) => {
      if (calledOff(signal)) void releaseAfterFault(parts, granted.group.token);
    },
    () => undefined,
  );
  return Promise.race([work, aborted]).finally(() => signal.removeEventListener('abort', onAbort!));
}

/** Releases a prefix by its token (one `update` per lock collection); never throws (the locks expire). */
async function releasePrefix(parts: readonly Part[], held: Prefix): Promise<void> {
  if (held.token) await releaseAfterFault(parts, held.token);
}

/**
 * How long a waiting group may hold a non-empty prefix before it gives everything back: HOLD_FIRST_MS
 * for the first hold of a call, HOLD_LATER_MS for every later one, never more than half the ttl
 * (so the lease a step takes, stepLease, stays under the ttl). The bound ends a cycle through a caller that
 * holds one document and waits for another in another order (user code, a lockNext worker): that
 * caller gets what the group gave back. The longer second bound lets the group outlast a caller
 * that gives up (or finishes) after a fixed patience under HOLD_LATER_MS
 * (reliability/lock-many-waiter-starvation: 3 s). It does not grow further: every hold keeps the
 * prefix from callers that do not wait, so a bound that grew with each give-up kept them out longer
 * each cycle (reliability/group-waiting-leaves-others-usable: refused 9.3 s on end when it doubled);
 * capped, they are refused for at most about one bound. A caller with a patience of HOLD_LATER_MS
 * or more is not outlasted (docs/limits.md).
 */
const HOLD_FIRST_MS = 2_000;
const HOLD_LATER_MS = 4_000;
function holdBound(giveUps: number, ttl: number): number {
  return Math.max(MIN_LEASE_MS, Math.min(giveUps === 0 ? HOLD_FIRST_MS : HOLD_LATER_MS, ttl / 2));
}

/** After a give-up the group pauses for 0.5 to 1 of this before it takes anything again. */
function pauseUnit(bound: number): number {
  return Math.min(bound / 2, POLL_CAP_MS);
}

/**
 * The lease an ordered step takes (and renews the prefix with): until about the group's give-up,
 * not the full ttl (issue 17 gap b). A caller refused by the prefix is told to retry when the lock
 * expires (`retryAfterMs`, from the record's `expiresAt`); with the full ttl that time always fell
 * into the group's next hold (a step at s gives up at s + bound, pauses, takes the prefix again
 * before s + ttl), so a caller honouring Retry-After was refused until the group's wait ended
 * (reliability/group-hold-vs-retry-after). So: the hold's remaining bound plus a margin of a
 * quarter of the pause unit, i.e. about half-way between the give-up and the earliest moment the
 * group takes anything again (half a unit after it): the advised retry lands in that pause. At
 * least one unit (a step near or past the end of the bound must still finish its commands and, when
 * it got everything, renew it before it lapses); never more than the ttl.
 *
 * Why a short lease is safe: the prefix is never handed out; a step hands out only a group whose
 * every member carries the step's NEW token (readGroupGrants), renewed to the full ttl before that
 * (renewedToTtl: a lapsed lock is not renewed) and read back. If the give-up runs late (a loaded
 * process, a stalled command), the prefix simply lapses: the group then holds less than it
 * believes, which costs it only its place (the next step takes what is free again; the release by
 * token matches nothing of someone else's; reliability/group-step-lease).
 */
function stepLease(ttl: number, bound: number, heldFor: number | undefined): number {
  const unit = pauseUnit(bound);
  const remaining = heldFor === undefined ? bound : bound - heldFor;
  // Whole milliseconds, as every ttl the plugin sends (options.ts): it is added to `$$NOW`, and the
  // emulator refuses a date plus a fractional double (numeric-expressions.ts).
  return Math.min(ttl, Math.ceil(Math.max(remaining + unit / 4, unit)));
}

/**
 * Waiting in canonical order, after the whole group was refused at once (issue 17 item 2): the
 * group holds the longest prefix of its canonical order it could take and waits for the first
 * member it lacks, which it reserves (GroupReservation: no other caller takes it once free). When
 * that member is free (a read, nothing taken), one ordered step takes from it on and renews the
 * prefix. A group that has held a non-empty prefix for longer than holdBound gives it all back,
 * ends its reservation, pauses a random while and starts again from the fast path. Ends as
 * lockGroup does: the documents, LockedError when the wait runs out, the signal's reason on an
 * explicit abort; whatever it held is released (after an abort in the background: an abort never
 * waits, and never returns a lock).
 */
async function waitInOrder(parts: readonly Part[], request: GroupRequest, started: number, first: Round, since: Date | undefined): Promise<{ documents: AnyDoc[]; group: HeldGroup }> {
  const order = canonicalOrder(request.members);
  const key = newLockToken();
  const reservation = new GroupReservation(key);
  let held: Prefix = { token: undefined, count: 0 };
  let holdingSince: number | undefined;
  let giveUps = 0;
  let lastBlocker: GroupBlocker | undefined = first.kind === 'refused' ? first.blockers[0] : undefined;
  let abort = false;
  try {
    for (let attempt = 0; ; attempt++) {
      if (calledOff(request.signal)) {
        abort = true;
        throw abortedWith(request.members[0].documentId, request.signal!);
      }
      const awaited = order[held.count];
      const subscription = awaited.runtime.watch.subscribe(awaited.documentId);
      try {
        const [blocker] = await awaited.runtime.store.findBlockersFor([awaited.documentId], [awaited.ownerKey], key);
        if (!blocker) {
          // The hold is timed from the send of its first step (no later than the prefix was taken).
          const stepSentAt = performance.now();
          const leaseMs = stepLease(request.ttl, holdBound(giveUps, request.ttl), holdingSince === undefined ? undefined : stepSentAt - holdingSince);
          const stepped = await orderedStep(parts, order, request, held, key, leaseMs);
          if (stepped.kind === 'done' && stepped.round.kind === 'granted') {
            // The step renewed the prefix under the grant's token: nothing of the old token is left to release.
            held = { token: undefined, count: 0 };
            if (!calledOff(request.signal)) return stepped.round;
            // Aborted while the step was on its way: never handed out (abortable releases it).
            abort = true;
            await releaseAfterFault(parts, stepped.round.group.token).catch(() => undefined);
            throw abortedWith(request.members[0].documentId, request.signal!);
          }
          const before = held.count;
          held = stepped.kind === 'prefix' ? stepped.prefix : { token: undefined, count: 0 };
          if (held.count === 0) holdingSince = undefined;
          else holdingSince ??= stepSentAt;
          // Moved on: the next document is reserved when it is found blocked.
          if (reservation.member && reservation.member !== order[held.count]) reservation.end();
          if (held.count > before) continue;
        } else {
          lastBlocker = { ...blocker, documentId: awaited.documentId };
          // Its place among the document's waiters: the call's first refusal, kept across give-ups.
          since ??= blocker.serverNow;
          reservation.hold(awaited, since);
        }
        const live = await subscription.live;
        if (calledOff(request.signal)) {
          abort = true;
          throw abortedWith(request.members[0].documentId, request.signal!);
        }
        const timedOut = request.signal?.aborted === true;
        if (live && !subscription.wasLive && !timedOut) continue;
        const waited = performance.now() - started;
        const left = request.wait - waited;
        if (left <= 0 || timedOut) {
          const cause: unknown = timedOut ? request.signal!.reason : undefined;
          throw lockedError(lastBlocker, request, ` Waited ${Math.round(waited)} ms for it.`, cause);
        }
        const bound = holdBound(giveUps, request.ttl);
        if (holdingSince !== undefined && performance.now() - holdingSince >= bound) {
          // Held too long: give everything back, so a caller waiting in another order gets it.
          reservation.end();
          await releasePrefix(parts, held);
          held = { token: undefined, count: 0 };
          holdingSince = undefined;
          giveUps++;
          await pause(Math.min(left, (0.5 + Math.random() / 2) * pauseUnit(bound)), request.signal);
          if (calledOff(request.signal)) continue;
          const again = await round(parts, request);
          if (again.kind === 'granted') return again;
          if (again.kind === 'refused' && again.blockers[0]) lastBlocker = again.blockers[0];
          continue;
        }
        // No blocker read, yet the step did not get it (taken in between, or behind another
        // process's transaction, whose end writes nothing a waiter hears of): back off and retry.
        const untilExpiry = blocker ? (blocker.remainingMs ?? Infinity) + 1 : Infinity;
        const untilBound = holdingSince === undefined ? Infinity : bound - (performance.now() - holdingSince);
        const poll = live && blocker ? SAFETY_POLL_MS : Math.random() * Math.min(POLL_CAP_MS, POLL_BASE_MS * 2 ** attempt);
        await Promise.race([subscription.changed, pause(Math.min(left, untilExpiry, untilBound, poll), request.signal)]);
      } finally {
        subscription.cancel();
      }
    }
  } finally {
    reservation.end();
    if (held.token) {
      const release = releasePrefix(parts, held);
      if (!abort) await release;
    }
  }
}

/** The group's locks still to be used: not released one by one. Throws if one was lost otherwise. */
function liveStates(part: GroupPart): HeldLockState[] {
  const live: HeldLockState[] = [];
  for (const state of part.states) {
    settleRelease(state);
    if (state.lost === undefined) live.push(state);
    else if (state.lost !== 'released') throw lostError(state);
  }
  return live;
}

/**
 * Locks a renewal found released while this process still counted them as held: released either by
 * this process's own `saveAndUnlock()` / `unlock()` whose reply had not arrived yet, or by someone
 * else (forceUnlock). The next renewal decides: by then an own release has ended (the lock left the
 * group); one still counted as held is a loss.
 */
const releasedOnce = new WeakSet<HeldLockState>();

/**
 * Renews every lock of the group still held to `ttl` from the server's now: one `update` per lock
 * collection. If any of them is no longer this acquisition's, the group is lost: throws the
 * LockNotHeldError (or LockExpiredError) of one lost document, after one read that says why.
 * A lock released on its own (saveAndUnlock, unlock) while the renewal was on its way left the group
 * and is no loss. Resolves to `false` when a renewal could not tell yet (a lock found released that
 * this process may be releasing itself, see releasedOnce): then no lock of that collection was
 * counted on for longer, and the caller renews again soon.
 *
 * Each lock's lease follows the rule every extension of an acquisition follows (held-lock.ts,
 * startExtension / finishExtension), shared with the documents' own `extendLock()` and with other
 * renewals of the group: until the reply, count on no more than both the lease and the renewal
 * give; renewals in flight together settle to the shortest (the server keeps the last applied, and
 * the order of the replies does not say which that was); a renewal whose outcome is unknown never
 * lengthens the lease. The reply carries no date: the renewal's `$$NOW` was read after `sentAt`, so
 * each lock expires no earlier than `ttl` after it (leaseFloor); the displayed expiry is the
 * server's clock estimated at the send plus `ttl`. A reply that arrives after that lease ran out
 * loses the group (LockExpiredOnArrivalError), and the locks it renewed are given back by token,
 * as a single lock's extension does (LockStore.extend).
 */
export async function extendGroup(group: HeldGroup, ttl: number): Promise<boolean> {
  const decided = await Promise.all(group.parts.map((part) => extendPart(part, group.token, ttl)));
  return decided.every(Boolean);
}

/** extendGroup for the locks of one lock collection. */
async function extendPart(part: GroupPart, token: string, ttl: number): Promise<boolean> {
  let live = liveStates(part);
  if (live.length === 0) return true;
  await part.runtime.ready;
  // Read immediately before sending: the lease is timed from here (lease.ts).
  const sentAt = monotonicNow();
  const pending = live.map((state) => {
    const serverNow = estimatedServerNow(state);
    const timing: GrantTiming = { sentAt, serverNow: new Date(serverNow), expiresAt: new Date(serverNow + ttl) };
    return { state, timing, extension: startExtension(state, sentAt, ttl) };
  });
  // The locks this renewal is known to have renewed; any other is settled as unknown.
  let renewed: readonly HeldLockState[] = [];
  try {
    const matched = await part.runtime.store.extendGroup(
      live.map((s) => s.lock.documentId),
      token,
      ttl,
    );
    if (matched < live.length) {
      // Documents released on their own since the renewal was sent are out of the group.
      live = liveStates(part);
      const error = live.length === 0 ? undefined : await part.runtime.store.explainGroupLoss(live, false);
      if (error) {
        const lost = live.find((state) => idKey(state.lock.documentId) === idKey(error.documentId));
        if (lost && error.reason === 'released' && !releasedOnce.has(lost)) {
          releasedOnce.add(lost);
          return false;
        }
        // That document is lost; the others were renewed and stay held until released.
        if (lost) lost.lost ??= error.reason;
        throw error;
      }
      // Every lock still counted on is held (explainGroupLoss read it so): the renewal matched it.
    }
    // Not those released meanwhile (their release was sent: no instance counts on them any more).
    renewed = live.filter((state) => state.lost === undefined && !leaseReleased(state));
  } finally {
    for (const { state, timing, extension } of pending) finishExtension(extension, renewed.includes(state) ? timing : undefined);
  }
  const late = renewed.find((state) => leaseLeft(state) < MIN_LEASE_MS);
  if (late) {
    // The answer came too late to count on: the group is lost rather than revived, and what this
    // renewal extended is given back by token (best effort: it may already be free).
    const error = new LockExpiredOnArrivalError(late.lock.documentId, late.lock.expiresAt, { operation: 'extend', ttl, elapsedMs: monotonicNow() - sentAt, attempts: 1 });
    for (const state of renewed) state.lost ??= 'expired';
    await part.runtime.store.releaseGroup(renewed.map((s) => s.lock.documentId), token).catch(() => undefined);
    throw error;
  }
  return true;
}

/**
 * Releases every lock of the group still held: one `update` per lock collection (by `_id` and the
 * group's token). Throws LockNotHeldError for a lock that was already lost (after releasing the
 * others); locks released one by one before (`saveAndUnlock`, `unlock`) are left out silently.
 */
export async function releaseGroup(group: HeldGroup): Promise<void> {
  const errors = await Promise.all(group.parts.map((part) => releasePart(part.runtime, part.states, group.token)));
  const error = errors.find((e) => e !== undefined);
  if (error) throw error;
}

/** Releases one lock collection's share of an acquisition; resolves to the error to report, if any. */
async function releasePart(runtime: ModelRuntime, states: readonly HeldLockState[], token: string): Promise<LockNotHeldError | undefined> {
  let earlier: LockNotHeldError | undefined;
  const live: HeldLockState[] = [];
  for (const state of states) {
    settleRelease(state);
    if (state.lost === undefined) live.push(state);
    else if (state.lost !== 'released') earlier ??= lostError(state);
  }
  if (live.length === 0) return earlier;
  await runtime.ready;
  // The release may apply as soon as it is sent, also when its reply is lost or is an error (model
  // finding F2): from the send on, no instance counts on these locks (PRODUCT.md property 13). One
  // that fails leaves `lost` unset: a later call learns from the server whether it applied.
  for (const state of live) releaseLease(state);
  const matched = await runtime.store.releaseGroup(
    live.map((s) => s.lock.documentId),
    token,
  );
  for (const state of live) state.lost = 'released';
  if (matched < live.length) return runtime.store.explainGroupLoss(live, true);
  return earlier;
}

/**
 * Releases the locks `docs` carry, one `update` per lock collection and acquisition (so one for
 * the documents of one `lockMany`). Throws LockNotHeldError before sending anything if a document
 * carries no lock; after releasing the others, if one was already released or lost.
 */
export async function unlockDocuments(docs: readonly object[], runtimeOf: (doc: object) => ModelRuntime): Promise<void> {
  const acquisitions = new Map<object, { runtime: ModelRuntime; byToken: Map<string, HeldLockState[]> }>();
  let earlier: LockNotHeldError | undefined;
  const seen = new Set<HeldLockState>();
  for (const doc of docs) {
    const state = heldLockState(doc);
    if (!state) throw new LockNotHeldError((doc as { _id?: unknown })._id, 'not_locked');
    if (seen.has(state)) continue;
    seen.add(state);
    if (state.lost !== undefined) {
      earlier ??= lostError(state);
      continue;
    }
    const runtime = runtimeOf(doc);
    let collection = acquisitions.get(runtime.lockModel);
    if (!collection) acquisitions.set(runtime.lockModel, (collection = { runtime, byToken: new Map() }));
    const byToken = collection.byToken;
    const list = byToken.get(state.lock.token);
    if (list) list.push(state);
    else byToken.set(state.lock.token, [state]);
  }
  const errors = await Promise.all([...acquisitions.values()].flatMap(({ runtime, byToken }) => [...byToken].map(([token, states]) => releasePart(runtime, states, token))));
  const error = errors.find((e) => e !== undefined) ?? earlier;
  if (error) throw error;
}
