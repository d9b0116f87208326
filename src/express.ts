/**
 * Express error handling for the plugin's errors, so a web app needs no glue:
 * `app.use(lockErrorHandler())` after the routes answers every LockError with its HTTP status
 * (423 locked, 409 lock gone, 404 no such document, 400 bad input, 503 transient database
 * fault, 500 otherwise), a `Retry-After` header where waiting helps, and a JSON body that never
 * contains an owner, a token or a stack trace. A lock call whose AbortSignal was aborted (not
 * timed out: that is a LockedError) rejects with the signal's reason; when that reason is an
 * AbortError (`controller.abort()`, typically wired to the client going away), the handler
 * answers 499, the status nginx logs for a request the client closed (not in RFC 9110: the
 * client is usually gone, and it is not a server fault). Other errors, other abort reasons
 * included, go to the next handler unchanged.
 *
 * The shapes below are structural, so the package depends on neither Express nor its types;
 * Express 4 and 5 (and Connect-style frameworks) fit them. Express recognises an error handler
 * by its four parameters, which the returned function declares.
 */
import { LockDatabaseError, LockError, LockNotHeldError, LockedError, type LockErrorCode, type LockLossReason } from './errors';
import { abortedLockCall } from './lock-waiter';

/** Status answered for a lock call its AbortSignal called off (nginx's "client closed request"). */
const ABORTED_STATUS = 499;

/** The JSON body `lockErrorHandler` sends. */
export interface LockErrorBody {
  /** The error, described without owner, token or stack trace. */
  error: {
    /** A LockError's code, or `ABORTED` for a lock call whose AbortSignal was aborted (status 499). */
    code: LockErrorCode | 'ABORTED';
    /** What happened and what to do. For database faults, a generic text (the driver's message may name hosts). */
    message: string;
    /** Whether the same request may succeed if tried again (LockError's `retryable`). */
    retryable: boolean;
    /** LockNotHeldError: why the caller's lock is gone. */
    reason?: LockLossReason;
    /**
     * LockNotHeldError with reason `'taken_over'`, when known: whether the acquisition that took it
     * over is the caller's own owner's (another tab of the same session). Never names an owner.
     */
    sameOwner?: boolean;
    /** The document concerned, as text (an ObjectId as hex). */
    documentId?: string;
    /** LockedError: when the holder's lock expires (server time, ISO 8601). */
    expiresAt?: string;
    /** LockedError: milliseconds until then, by the server's clock. */
    retryAfterMs?: number;
    /** LockedError: the holder's display label, if it gave one (user data: escape it before showing it as HTML). */
    label?: string | null;
  };
}

/** The parts of an Express response the handler uses. */
export interface LockErrorResponse {
  /** Whether a response was already started: then the handler passes the error on. */
  headersSent: boolean;
  /** Sets the HTTP status. */
  status(code: number): unknown;
  /** Sets a header (`Retry-After`). */
  setHeader(name: string, value: string): unknown;
  /** Sends the JSON body. */
  json(body: unknown): unknown;
}

/** An Express error middleware (four parameters), as `lockErrorHandler()` returns it. */
export type LockErrorHandler = (error: unknown, req: unknown, res: LockErrorResponse, next: (error?: unknown) => void) => void;

/**
 * Express error middleware for LockErrors: answers each with its HTTP status (423 locked, 409
 * lock gone, 404 no such document, 400 bad input, 503 transient database fault, 500 otherwise),
 * a `Retry-After` header where waiting helps, and a LockErrorBody that never contains an owner,
 * a token or a stack trace; a lock call ended by its AbortSignal (an AbortError) gets 499. Other
 * errors go to the next handler unchanged. Register it after your routes.
 *
 * @example
 * ```ts
 * app.post('/items/:id/edit', async (req, res) => {
 *   const item = await Item.lock(req.params.id, req.sessionID, { wait: 2_000 });
 *   res.render('edit', { item });
 * });
 * app.use(lockErrorHandler()); // a refused lock answers 423 with the holder's label
 * ```
 */
export function lockErrorHandler(): LockErrorHandler {
  return function handleLockError(error: unknown, _req: unknown, res: LockErrorResponse, next: (error?: unknown) => void): void {
    const aborted = error instanceof LockError ? undefined : abortedLockCall(error);
    if (aborted && (error as { name?: unknown }).name === 'AbortError' && !res.headersSent) {
      res.status(ABORTED_STATUS);
      res.json(abortedBody(aborted.documentId));
      return;
    }
    if (!(error instanceof LockError) || res.headersSent) {
      next(error);
      return;
    }
    const retryAfter = retryAfterSeconds(error);
    if (retryAfter !== undefined) res.setHeader('Retry-After', String(retryAfter));
    res.status(error.status);
    res.json(lockErrorBody(error));
  };
}

/** The body `lockErrorHandler` sends for `error`, for apps that render errors themselves. */
export function lockErrorBody(error: LockError): LockErrorBody {
  const body: LockErrorBody['error'] = {
    code: error.code,
    message: error instanceof LockDatabaseError ? `The database failed during ${error.operation}.${error.retryable ? ' Try again.' : ''}` : error.message,
    retryable: error.retryable,
  };
  const documentId = (error as { documentId?: unknown }).documentId;
  if (documentId !== undefined) body.documentId = idText(documentId);
  if (error instanceof LockNotHeldError) {
    body.reason = error.reason;
    if (error.sameOwner !== undefined) body.sameOwner = error.sameOwner;
  }
  if (error instanceof LockedError) {
    if (error.expiresAt) body.expiresAt = error.expiresAt.toISOString();
    if (error.retryAfterMs !== undefined) body.retryAfterMs = error.retryAfterMs;
    body.label = error.label;
  }
  return { error: body };
}

function abortedBody(documentId: unknown): LockErrorBody {
  const what = documentId === undefined ? 'a lock' : `the lock on document ${idText(documentId)}`;
  const body: LockErrorBody['error'] = {
    code: 'ABORTED',
    message: `The request was aborted (its AbortSignal) before ${what} was taken; nothing was locked.`,
    retryable: true,
  };
  if (documentId !== undefined) body.documentId = idText(documentId);
  return { error: body };
}

/**
 * Whole seconds to wait (RFC 9110 Retry-After): until the holder's lock expires for a
 * LockedError that knows it, one second for a transient database fault, otherwise none.
 */
function retryAfterSeconds(error: LockError): number | undefined {
  if (error instanceof LockedError) return error.retryAfterMs === undefined ? undefined : Math.ceil(error.retryAfterMs / 1000);
  if (error instanceof LockDatabaseError && error.retryable) return 1;
  return undefined;
}

function idText(id: unknown): string {
  if (id !== null && typeof id === 'object' && typeof (id as { toHexString?: unknown }).toHexString === 'function') return (id as { toHexString(): string }).toHexString();
  if (id instanceof Date) return id.toISOString();
  return String(id);
}
