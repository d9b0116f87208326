/**
 * The owner context: who is writing, without passing the owner to every call. Inside
 * `runWithLockOwner(owner, fn)` every guarded write (save, and query writes) acts as `owner`,
 * so a document that `owner` has locked may be written even if this instance was loaded
 * without `Model.lock`. Built on AsyncLocalStorage, so it follows async calls made inside `fn`,
 * and it also covers work that `fn` returns without starting: a Mongoose Query (which runs
 * only when awaited or exec'd, after `fn` has returned) or any other lazy thenable.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { validateOwner } from './arguments';
import { InvalidLockArgumentError, InvalidLockOptionError, LockConfigurationError } from './errors';
import { describeValue } from './options';

const storage = new AsyncLocalStorage<string>();

type AnyFunction = (...args: unknown[]) => unknown;

/**
 * Runs `fn` as `owner`. What `fn` returns is returned unchanged (the same object), except that
 * deferred work in it runs as `owner` too: `runWithLockOwner(sid, () => Model.updateOne(...))`
 * returns the Query, and the Query's write, executed later by `await`, acts as `sid`.
 *
 * @example
 * ```ts
 * // The guard lets this write through only if no other owner holds the document's lock.
 * await runWithLockOwner('report-job', () => Item.updateOne({ _id: id }, { $set: { done: true } }));
 * ```
 */
export function runWithLockOwner<T>(owner: string, fn: () => T): T {
  const who = validateOwner(owner);
  if (typeof fn !== 'function') throw new InvalidLockArgumentError('fn', 'expected a function to run as the owner.');
  return bindDeferredWork(storage.run(who, fn), who);
}

/**
 * A Query (or Aggregate) does its work in `exec()`, which `then()` calls; any other lazy
 * thenable does it in `then()`. Wrapping that one method on the returned instance makes the
 * work start inside the owner context whenever the caller awaits it. Native promises already
 * started inside the context, so they are left alone.
 */
function bindDeferredWork<T>(result: T, owner: string): T {
  if (result === null || (typeof result !== 'object' && typeof result !== 'function') || result instanceof Promise) return result;
  const target = result as unknown as Record<string, unknown>;
  const method = typeof target.exec === 'function' && typeof target.then === 'function' ? 'exec' : typeof target.then === 'function' ? 'then' : undefined;
  if (method === undefined) return result;
  const original = target[method] as AnyFunction;
  try {
    Object.defineProperty(result, method, {
      configurable: true,
      writable: true,
      value: function runAsOwner(this: unknown, ...args: unknown[]) {
        return storage.run(owner, () => original.apply(this, args));
      },
    });
  } catch {
    // A frozen thenable cannot be wrapped; it runs as whoever awaits it, as before.
  }
  return result;
}

/** The owner bound by the innermost `runWithLockOwner`, if any. */
export function currentLockOwner(): string | undefined {
  return storage.getStore();
}

/** The smallest request shape the middleware needs; Express's Request fits it. */
export interface RequestWithSession {
  /** Set by express-session: the session's id, the default owner. */
  sessionID?: string;
  /** Set by express-session; its absence means the session middleware has not run (yet). */
  session?: unknown;
}

/** The options of `lockOwnerMiddleware(options)`. */
export interface LockOwnerMiddlewareOptions<Req> {
  /** Picks the owner for a request. Default: `req.sessionID` (express-session). */
  owner?: (req: Req) => string | undefined;
}

/**
 * Express (or Connect) middleware that runs the rest of the request as the request's owner.
 * Requests without an owner (the `owner` function returned undefined) run without one: their
 * writes are treated as anonymous, so locked documents refuse them.
 * With the default owner (`req.sessionID`) it must come after express-session's `session()`:
 * a request that reaches it without `req.session` fails with LockConfigurationError naming the
 * fix, instead of silently making every request anonymous.
 *
 * @example
 * ```ts
 * app.use(session({ secret, resave: false, saveUninitialized: false }));
 * app.use(lockOwnerMiddleware()); // the owner is req.sessionID
 * ```
 */
export function lockOwnerMiddleware<Req = RequestWithSession>(options: LockOwnerMiddlewareOptions<Req> = {}) {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new InvalidLockOptionError('(middleware options)', `expected an object such as { owner: (req) => req.sessionID }, got ${describeValue(options)}.`);
  }
  for (const key of Object.keys(options)) {
    if (key !== 'owner') throw new InvalidLockOptionError(key, 'unknown option here. Known options: owner.');
  }
  const custom = options.owner;
  if (custom !== undefined && typeof custom !== 'function') throw new InvalidLockArgumentError('owner', 'expected a function (req) => string.');
  const pick = custom ?? sessionOwner;
  return (req: Req, _res: unknown, next: (error?: unknown) => void): void => {
    let owner: string | undefined;
    try {
      owner = pick(req);
      if (owner === undefined) return next();
      validateOwner(owner);
    } catch (error) {
      return next(error);
    }
    storage.run(owner, () => next());
  };
}

/** The default owner: express-session's id, and a loud error if the session middleware has not run. */
function sessionOwner(req: unknown): string | undefined {
  const { session, sessionID } = (req ?? {}) as RequestWithSession;
  if (session === undefined && sessionID === undefined) {
    throw new LockConfigurationError(
      'lockOwnerMiddleware() ran before the session middleware: req.session is undefined, so every request would be ' +
        'anonymous and refused by its own locks. Register it after express-session: app.use(session({ ... })); ' +
        'app.use(lockOwnerMiddleware()). Without express-session, pass { owner: (req) => ... }.',
    );
  }
  return sessionID;
}
