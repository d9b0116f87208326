/**
 * The owner context: who is writing, without passing the owner to every call. Inside
 * `runWithLockOwner(owner, fn)` every guarded write (save, and query writes) acts as `owner`,
 * so a document that `owner` has locked may be written even if this instance was loaded
 * without `Model.lock`. Built on AsyncLocalStorage, so it follows async calls made inside `fn`.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { validateOwner } from './arguments';
import { InvalidLockArgumentError, InvalidLockOptionError } from './errors';
import { describeValue } from './options';

const storage = new AsyncLocalStorage<string>();

export function runWithLockOwner<T>(owner: string, fn: () => T): T {
  const who = validateOwner(owner);
  if (typeof fn !== 'function') throw new InvalidLockArgumentError('fn', 'expected a function to run as the owner.');
  return storage.run(who, fn);
}

/** The owner bound by the innermost `runWithLockOwner`, if any. */
export function currentLockOwner(): string | undefined {
  return storage.getStore();
}

/** The smallest request shape the middleware needs; Express's Request fits it. */
export interface RequestWithSession {
  sessionID?: string;
}

export interface LockOwnerMiddlewareOptions<Req> {
  /** Picks the owner for a request. Default: `req.sessionID` (express-session). */
  owner?: (req: Req) => string | undefined;
}

/**
 * Express (or Connect) middleware that runs the rest of the request as the request's owner.
 * Requests without an owner (no session yet) run without one: their writes are treated as
 * anonymous, so locked documents refuse them.
 */
export function lockOwnerMiddleware<Req = RequestWithSession>(options: LockOwnerMiddlewareOptions<Req> = {}) {
  if (options === null || typeof options !== 'object' || Array.isArray(options)) {
    throw new InvalidLockOptionError('(middleware options)', `expected an object such as { owner: (req) => req.sessionID }, got ${describeValue(options)}.`);
  }
  for (const key of Object.keys(options)) {
    if (key !== 'owner') throw new InvalidLockOptionError(key, 'unknown option here. Known options: owner.');
  }
  const pick = options.owner ?? ((req: Req) => (req as RequestWithSession).sessionID);
  if (typeof pick !== 'function') throw new InvalidLockArgumentError('owner', 'expected a function (req) => string.');
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
