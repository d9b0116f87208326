/**
 * Express error handling for the plugin's errors, so a web app needs no glue:
 * `app.use(lockErrorHandler())` after the routes answers every LockError with its HTTP status
 * (423 locked, 409 lock gone, 404 no such document, 400 bad input, 503 transient database
 * fault, 500 otherwise), a `Retry-After` header where waiting helps, and a JSON body that never
 * contains an owner, a token or a stack trace. Other errors go to the next handler unchanged.
 *
 * The shapes below are structural, so the package depends on neither Express nor its types;
 * Express 4 and 5 (and Connect-style frameworks) fit them. Express recognises an error handler
 * by its four parameters, which the returned function declares.
 */
import { LockDatabaseError, LockError, LockNotHeldError, LockedError, type LockErrorCode, type LockLossReason } from './errors';

/** The JSON body `lockErrorHandler` sends. */
export interface LockErrorBody {
  error: {
    code: LockErrorCode;
    /** What happened and what to do. For database faults, a generic text (the driver's message may name hosts). */
    message: string;
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
  headersSent: boolean;
  status(code: number): unknown;
  setHeader(name: string, value: string): unknown;
  json(body: unknown): unknown;
}

export type LockErrorHandler = (error: unknown, req: unknown, res: LockErrorResponse, next: (error?: unknown) => void) => void;

/** Express error middleware for LockErrors; see the module comment. Register it after your routes. */
export function lockErrorHandler(): LockErrorHandler {
  return function handleLockError(error: unknown, _req: unknown, res: LockErrorResponse, next: (error?: unknown) => void): void {
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
