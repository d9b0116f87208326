/**
 * Puts the plugin's statics and lock methods on the diagnostics channels (diagnostics.ts): each
 * is replaced by a wrapper that, when nobody subscribes, calls the original and nothing more.
 * Installed once, after every static and method exists, so the modules that implement them
 * stay free of tracing code.
 */
import { describeModelOf, observed, traceCall, type LockTraceContext, type LockTraceKind } from './diagnostics';
import { LockGroupHandle } from './lock-group-handle';
import { LockHandle } from './lock-handle';
import { heldLockState } from './held-lock';
import type { AnyModel, AnySchema } from './runtime';

type Fn = (this: unknown, ...args: unknown[]) => Promise<unknown>;

const UNTRACED = Symbol('mongoose-pessimistic-lock:untraced');

/** The function a traced wrapper stands in front of (the function itself if it is none). */
export function untraced(fn: unknown): unknown {
  return (fn as { [UNTRACED]?: unknown } | null | undefined)?.[UNTRACED] ?? fn;
}

/** The statics traced, by channel; the call's first argument is its `id` (or ids) where noted. */
const STATICS: readonly (readonly [name: string, kind: LockTraceKind, first: 'id' | 'ids' | 'filter' | 'docs' | 'owner'])[] = [
  ['lock', 'lock', 'id'],
  ['tryLock', 'lock', 'id'],
  ['acquireLock', 'lock', 'id'],
  ['withLock', 'lock', 'id'],
  ['lockNext', 'lockNext', 'filter'],
  ['acquireNext', 'lockNext', 'filter'],
  ['withNext', 'lockNext', 'filter'],
  ['lockMany', 'lockMany', 'ids'],
  ['acquireLocks', 'lockMany', 'ids'],
  ['withLocks', 'lockMany', 'ids'],
  ['unlock', 'unlock', 'id'],
  ['unlockMany', 'unlock', 'docs'],
  ['forceUnlock', 'unlock', 'id'],
  ['releaseAllFor', 'releaseAllFor', 'owner'],
];

/** The document methods traced. */
const METHODS: readonly (readonly [name: string, kind: LockTraceKind, operation: string])[] = [
  ['unlock', 'unlock', 'doc.unlock'],
  ['saveAndUnlock', 'unlock', 'saveAndUnlock'],
  ['extendLock', 'lock', 'extendLock'],
];

/**
 * The document a call returned, or the one its handle holds (a LockHandle's; a group's has
 * several). A document is told from a handle by class: a document may have a path of its own
 * named `document`.
 */
function documentOf(result: unknown): object | undefined {
  if (result === null || typeof result !== 'object') return undefined;
  if (result instanceof LockGroupHandle) return undefined;
  return result instanceof LockHandle ? (result.document as object) : result;
}

/** Fills in the end of a call's context from its result, without keeping the result: the document's `_id` and the label its lock shows. */
function describeLockedDocument(result: unknown, context: LockTraceContext): void {
  const document = documentOf(result);
  if (!document) return;
  const state = heldLockState(document as never);
  context.documentId = state ? state.lock.documentId : (document as { _id?: unknown })._id;
  // The label as the lock holds it, not re-read from the caller's options (a subscriber reads no argument).
  if (state && state.lock.label !== null) context.label = state.lock.label;
}

/** Fills in the end of a call's context from its result, without keeping the result. */
function finishWith(name: string, result: unknown, context: LockTraceContext): void {
  switch (name) {
    case 'tryLock':
    case 'lockNext':
    case 'acquireNext':
      context.succeeded = result !== null;
      if (result !== null) describeLockedDocument(result, context);
      break;
    case 'lock':
    case 'acquireLock':
      context.succeeded = true;
      describeLockedDocument(result, context);
      break;
    case 'unlock':
    case 'forceUnlock':
      context.succeeded = result === true;
      break;
    case 'lockMany':
    case 'acquireLocks':
    case 'withLocks':
    case 'withLock':
    case 'withNext':
    case 'unlockMany':
    case 'releaseAllFor':
      context.succeeded = true;
      break;
  }
}

/** How many ids or documents a several-documents call names (an array's length). */
function countOf(list: unknown): number | undefined {
  return Array.isArray(list) ? list.length : undefined;
}

/** The model a static was called on, if it was called on one (`const { lock } = Model` has none). */
function modelContext(operation: string, self: unknown): LockTraceContext {
  const model = typeof self === 'function' ? (self as AnyModel) : undefined;
  const collection = model?.collection as { collectionName?: unknown } | undefined;
  return {
    operation,
    model: typeof model?.modelName === 'string' ? model.modelName : undefined,
    collection: typeof collection?.collectionName === 'string' ? collection.collectionName : undefined,
  };
}

/**
 * Replaces the schema's traced statics and methods with traced wrappers. Unobserved, a wrapper
 * calls the original with the same `this` and arguments and allocates nothing (no rest array, no
 * closure) before the `observed()` check.
 */
export function installDiagnostics(schema: AnySchema): void {
  const statics = schema.statics as Record<string, Fn>;
  for (const [name, kind, first] of STATICS) {
    const original = statics[name];
    if (typeof original !== 'function') continue;
    const tracedStatic = function tracedStatic(this: unknown): Promise<unknown> {
      // eslint-disable-next-line prefer-rest-params -- `arguments` passed on as is: no array built on the unobserved path
      if (!observed(kind)) return original.apply(this, arguments as unknown as unknown[]);
      // eslint-disable-next-line prefer-rest-params
      const args = Array.prototype.slice.call(arguments) as unknown[];
      return traceCall(
        kind,
        () => {
          const context = modelContext(name, this);
          if (first === 'ids' || first === 'docs') {
            const count = countOf(args[0]);
            if (count !== undefined) context.count = count;
          }
          return context;
        },
        () => original.apply(this, args),
        (result, context) => finishWith(name, result, context),
      );
    };
    // Code that recognises a static by identity (lockAll finds a model's group context by its lockMany) unwraps it.
    Object.defineProperty(tracedStatic, UNTRACED, { value: original });
    statics[name] = tracedStatic;
  }
  const methods = schema.methods as Record<string, Fn>;
  for (const [name, kind, operation] of METHODS) {
    const original = methods[name];
    if (typeof original !== 'function') continue;
    methods[name] = function tracedMethod(this: unknown): Promise<unknown> {
      // eslint-disable-next-line prefer-rest-params -- as tracedStatic
      if (!observed(kind)) return original.apply(this, arguments as unknown as unknown[]);
      // eslint-disable-next-line prefer-rest-params
      const args = Array.prototype.slice.call(arguments) as unknown[];
      return traceCall(
        kind,
        () => {
          const state = heldLockState(this as never);
          return { operation, ...describeModelOf(this), documentId: state ? state.lock.documentId : (this as { _id?: unknown })._id };
        },
        () => original.apply(this, args),
        (_result, context) => {
          context.succeeded = true;
        },
      );
    };
  }
}

/** Traces a module-level function (lockAll and its forms): `count` is its targets' number. */
export function tracedFunction<F extends (...args: never[]) => Promise<unknown>>(kind: LockTraceKind, operation: string, fn: F): F {
  const wrapper = function (this: unknown): Promise<unknown> {
    // eslint-disable-next-line prefer-rest-params -- as tracedStatic
    if (!observed(kind)) return fn.apply(this, arguments as unknown as Parameters<F>);
    // eslint-disable-next-line prefer-rest-params
    const args = Array.prototype.slice.call(arguments) as Parameters<F>;
    return traceCall(
      kind,
      () => {
        const count = countOf(args[0]);
        return { operation, model: undefined, collection: undefined, ...(count !== undefined ? { count } : {}) };
      },
      () => fn.apply(this, args),
      (_result, context) => {
        context.succeeded = true;
      },
    );
  };
  return wrapper as unknown as F;
}
