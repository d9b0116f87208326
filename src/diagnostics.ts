/**
 * Observability through Node's `diagnostics_channel`, the convention undici, fastify and the
 * MongoDB driver's APM consumers use, so that OpenTelemetry and APM agents can subscribe without
 * the plugin depending on any of them (issue 18, item 6).
 *
 * Tracing channels (`diagnostics_channel.tracingChannel(name)`: start, end, asyncStart, asyncEnd,
 * error), one per kind of operation, carrying a {@link LockTraceContext}:
 *   mongoose-pessimistic-lock:lock          lock, tryLock, acquireLock, withLock, doc.extendLock
 *   mongoose-pessimistic-lock:lockNext      lockNext, acquireNext, withNext
 *   mongoose-pessimistic-lock:lockMany      lockMany, acquireLocks, withLocks, lockAll, acquireAllLocks, withAllLocks
 *   mongoose-pessimistic-lock:unlock        Model.unlock, doc.unlock, doc.saveAndUnlock, unlockMany, unlockAll, forceUnlock
 *   mongoose-pessimistic-lock:releaseAllFor releaseAllFor
 *   mongoose-pessimistic-lock:write         every guarded write, as the collection receives it
 * Named channels (`diagnostics_channel.channel(name)`), one message per event, a {@link LockEvent}:
 *   mongoose-pessimistic-lock:refused       a lock call or a guarded write refused by someone else's lock
 *   mongoose-pessimistic-lock:expired       a caller learned that its lock expired
 *   mongoose-pessimistic-lock:taken-over    a caller learned that another acquisition took its lock
 *   mongoose-pessimistic-lock:lost          a handle's lock was lost while held (its signal aborted)
 *
 * Privacy: no message ever carries an owner, an owner key, a token or a ticket; the document id,
 * the model, the collection and the holder's label (user data the holder chose to show) are fine.
 * Cost: when nobody subscribes, a traced call costs the `observed()` check (a few property
 * reads) before it calls the function it wraps (`npm run bench`, benchmark 10, measures it).
 */
import * as dc from 'node:diagnostics_channel';
import { LockedError, LockExpiredError, LockNotHeldError } from './errors';

/** The name prefix of every channel the plugin publishes on. */
export const DIAGNOSTICS_PREFIX = 'mongoose-pessimistic-lock';

/** The kinds of traced operations, each a tracing channel named `mongoose-pessimistic-lock:<kind>`. */
export type LockTraceKind = 'lock' | 'lockNext' | 'lockMany' | 'unlock' | 'releaseAllFor' | 'write';

/**
 * What a tracing channel's messages carry. The same object goes through start, end, asyncStart,
 * asyncEnd and error of one call (subscribers may add their own fields, e.g. a span).
 */
export interface LockTraceContext {
  /** The call: `'lock'`, `'tryLock'`, `'doc.unlock'`, `'saveAndUnlock'`, `'updateOne'` (a guarded write), ... */
  operation: string;
  /** The model's name (for `lockAll` and the other cross-model calls: `undefined`). */
  model: string | undefined;
  /** The collection the call is about (the documents', not the lock collection). */
  collection: string | undefined;
  /** The document's `_id` when the call is about one document and it is known (set by the end at the latest). */
  documentId?: unknown;
  /** How many documents a several-documents call asked for. */
  count?: number;
  /** The label the caller passed (shown to others), if any. */
  label?: string | null;
  /** Whether the call ended with a lock obtained or released (`false`: `tryLock` / `lockNext` got `null`, `unlock` found nothing). */
  succeeded?: boolean;
  /** The error the call rejected with (set before the error message). */
  error?: unknown;
}

/** What the named channels (`refused`, `expired`, `taken-over`, `lost`) carry. */
export interface LockEvent {
  /** The call that learned it, or `'handle'` / `'group handle'` for a loss noticed by a handle. */
  operation: string;
  /** The model's name, when the event is about one model's document. */
  model: string | undefined;
  /** The collection of that document (not the lock collection). */
  collection: string | undefined;
  /** The document whose lock it is about, when known. */
  documentId: unknown;
  /** `refused`: the holder's label. */
  label?: string | null;
  /** `refused`: how long until the blocking lock expires by the server's clock. */
  retryAfterMs?: number;
  /** `expired` / `taken-over` / `lost`: why the lock is gone (`LockLossReason`). */
  reason?: string;
}

const KINDS: readonly LockTraceKind[] = ['lock', 'lockNext', 'lockMany', 'unlock', 'releaseAllFor', 'write'];
/** One tracing channel per kind, made when the module loads (a property read on every traced call, not a lookup). */
const tracing = Object.fromEntries(KINDS.map((kind) => [kind, dc.tracingChannel<object, LockTraceContext>(`${DIAGNOSTICS_PREFIX}:${kind}`)])) as Record<LockTraceKind, dc.TracingChannel<object, LockTraceContext>>;
function tracingChannelOf(kind: LockTraceKind): dc.TracingChannel<object, LockTraceContext> {
  return tracing[kind];
}

export const refusedChannel = dc.channel(`${DIAGNOSTICS_PREFIX}:refused`);
export const expiredChannel = dc.channel(`${DIAGNOSTICS_PREFIX}:expired`);
export const takenOverChannel = dc.channel(`${DIAGNOSTICS_PREFIX}:taken-over`);
export const lostChannel = dc.channel(`${DIAGNOSTICS_PREFIX}:lost`);

/** Whether anyone listens on a tracing channel (TracingChannel.hasSubscribers is Node 20.13+/22+ only). */
function traced(channel: dc.TracingChannel<object, LockTraceContext>): boolean {
  return channel.start.hasSubscribers || channel.end.hasSubscribers || channel.asyncStart.hasSubscribers || channel.asyncEnd.hasSubscribers || channel.error.hasSubscribers;
}

/** Whether a call of `kind` has anyone to tell anything: the cheap check every traced call makes first. */
export function observed(kind: LockTraceKind): boolean {
  return traced(tracingChannelOf(kind)) || refusedChannel.hasSubscribers || expiredChannel.hasSubscribers || takenOverChannel.hasSubscribers || lostChannel.hasSubscribers;
}

/**
 * Errors whose named event is told, or must never be: a named event is published once, by the
 * innermost traced call the error passed through (where it originated: a guarded write inside
 * saveAndUnlock, a refused lock inside withLock's callback), and never for an error a caller's
 * callback threw (withLock & co. mark those, callerError), which is the caller's own.
 */
const told = new WeakSet<object>();

/** Marks an error thrown by a caller's callback (`fn` of withLock & co.) as the caller's own: no named event for it. */
export function callerError(error: unknown): unknown {
  if (typeof error === 'object' && error !== null) told.add(error);
  return error;
}

/** Publishes the named event an error stands for, if any and not told yet (never an owner or a token: only the error's public fields). */
export function publishErrorEvent(context: LockTraceContext, error: unknown): void {
  if (!(error instanceof LockNotHeldError || error instanceof LockedError) || told.has(error)) return;
  told.add(error);
  const base = { operation: context.operation, model: context.model, collection: context.collection };
  if (error instanceof LockedError) {
    if (refusedChannel.hasSubscribers) refusedChannel.publish({ ...base, documentId: error.documentId, label: error.label ?? null, retryAfterMs: error.retryAfterMs } satisfies LockEvent);
  } else if (error instanceof LockExpiredError) {
    if (expiredChannel.hasSubscribers) expiredChannel.publish({ ...base, documentId: error.documentId, reason: error.reason } satisfies LockEvent);
  } else if (error.reason === 'taken_over') {
    if (takenOverChannel.hasSubscribers) takenOverChannel.publish({ ...base, documentId: error.documentId, reason: error.reason } satisfies LockEvent);
  }
}

/** The model and collection of a document, for a message (no other field of it). */
export function describeModelOf(doc: unknown): { model: string | undefined; collection: string | undefined } {
  const model = (doc as { constructor?: { modelName?: unknown; collection?: { collectionName?: unknown } } } | null | undefined)?.constructor;
  return {
    model: typeof model?.modelName === 'string' ? model.modelName : undefined,
    collection: typeof model?.collection?.collectionName === 'string' ? model.collection.collectionName : undefined,
  };
}

/** Tells the `lost` channel that a handle's lock is gone while it was held (`document`: the handle's document, for its model). */
export function publishLost(operation: 'handle' | 'group handle', document: unknown, error: LockNotHeldError): void {
  if (!lostChannel.hasSubscribers) return;
  lostChannel.publish({ operation, ...describeModelOf(document), documentId: error.documentId, reason: error.reason } satisfies LockEvent);
}

/**
 * Runs `run` as one traced call of `kind`: start, then end when `run` returned its promise,
 * then asyncStart and asyncEnd when it settled (error before them if it rejected), as
 * TracingChannel.tracePromise does, but with a context the plugin builds itself, so the
 * resolved value (a document carrying its lock, hence its owner and token) never reaches a
 * subscriber. `finish` reads what may be told about the result.
 *
 * The caller checks `observed(kind)` first and calls `run` directly when it is false (the
 * wrappers in diagnostics-install.ts and guard/install.ts: nothing allocated then). Observed, a
 * subscriber changes nothing of the call: `context` reads no argument the call reads itself, and
 * a context that cannot be built (a static called without its model) is a bare one; an error
 * `run` throws synchronously is thrown as it would have been, a rejection stays a rejection.
 */
export function traceCall<T>(kind: LockTraceKind, context: () => LockTraceContext, run: () => Promise<T>, finish?: (result: T, context: LockTraceContext) => void): Promise<T> {
  if (!observed(kind)) return run();
  const channel = tracingChannelOf(kind);
  let ctx: LockTraceContext;
  try {
    ctx = context();
  } catch {
    ctx = { operation: kind, model: undefined, collection: undefined };
  }
  const settle = (): void => {
    channel.asyncStart.publish(ctx);
    channel.asyncEnd.publish(ctx);
  };
  return channel.start.runStores(ctx, () => {
    let promise: Promise<T>;
    try {
      promise = run();
    } catch (error) {
      ctx.error = error;
      channel.error.publish(ctx);
      publishErrorEvent(ctx, error);
      channel.end.publish(ctx);
      throw error;
    }
    channel.end.publish(ctx);
    return promise.then(
      (result) => {
        try {
          finish?.(result, ctx);
        } catch {
          // Describing the result must never change it.
        }
        settle();
        return result;
      },
      (error: unknown) => {
        ctx.error = error;
        if (ctx.documentId === undefined && error instanceof Error && 'documentId' in error) ctx.documentId = (error as { documentId: unknown }).documentId;
        channel.error.publish(ctx);
        publishErrorEvent(ctx, error);
        settle();
        throw error;
      },
    );
  });
}
