/**
 * Puts the plugin's statics and lock methods on the diagnostics channels (diagnostics.ts): each
 * is replaced by a wrapper that, when nobody subscribes, calls the original and nothing more.
 * Installed once, after every static and method exists, so the modules that implement them
 * stay free of tracing code.
 */
import { describeModelOf, traceCall, type LockTraceContext, type LockTraceKind } from './diagnostics';
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

/** The `_id` of what a call returned (a document, a handle, a group): read as the document's own `_id`, nothing else of it. */
function documentIdOf(result: unknown): unknown {
  if (result === null || typeof result !== 'object') return undefined;
  const document = (result as { document?: unknown }).document ?? result;
  return (document as { _id?: unknown })._id;
}

/** Fills in the end of a call's context from its result, without keeping the result. */
function finishWith(name: string, result: unknown, context: LockTraceContext): void {
  switch (name) {
    case 'tryLock':
    case 'lockNext':
    case 'acquireNext':
      context.succeeded = result !== null;
      if (result !== null) context.documentId = documentIdOf(result);
      break;
    case 'lock':
    case 'acquireLock':
      context.succeeded = true;
      context.documentId = documentIdOf(result);
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

function labelOf(options: unknown): string | null | undefined {
  const label = (options as { label?: unknown } | null | undefined)?.label;
  return typeof label === 'string' ? label : undefined;
}

/** Replaces the schema's traced statics and methods with traced wrappers. */
export function installDiagnostics(schema: AnySchema): void {
  const statics = schema.statics as Record<string, Fn>;
  for (const [name, kind, first] of STATICS) {
    const original = statics[name];
    if (typeof original !== 'function') continue;
    const tracedStatic = function tracedStatic(this: unknown, ...args: unknown[]) {
      const model = this as AnyModel;
      return traceCall(
        kind,
        () => {
          const context: LockTraceContext = { operation: name, model: model.modelName, collection: model.collection?.collectionName };
          if (first === 'ids' && Array.isArray(args[0])) context.count = args[0].length;
          if (first === 'docs' && Array.isArray(args[0])) context.count = args[0].length;
          // The options are the last argument of every traced static but unlock's and releaseAllFor's.
          const label = labelOf(args[name.startsWith('with') ? 3 : 2]);
          if (label !== undefined) context.label = label;
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
    methods[name] = function tracedMethod(this: unknown, ...args: unknown[]) {
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
  const wrapper = function (this: unknown, ...args: Parameters<F>) {
    return traceCall(
      kind,
      () => ({ operation, model: undefined, collection: undefined, ...(Array.isArray(args[0]) ? { count: (args[0] as unknown[]).length } : {}) }),
      () => fn.apply(this, args),
      (_result, context) => {
        context.succeeded = true;
      },
    );
  };
  return wrapper as unknown as F;
}
