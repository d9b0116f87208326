/**
 * How long this process may count on a lock the server granted (PRODUCT.md property 13: leases
 * are conservative).
 *
 * The server decides expiry by its own clock: a grant, resume or extension sets
 * `expiresAt = $$NOW + ttl`, and the reply carries that `expiresAt` and the command's `$$NOW`.
 * This process cannot read the server's clock, and the reply may arrive long after the server
 * read it (a command held behind a transaction, a slow network, a paused process). So the lease
 * is timed on this process's monotonic clock from the moment the request was SENT, as Redlock
 * does (mike-marcacci/node-redlock, src/index.ts `acquire`: `start = Date.now()` before the
 * request, `expiration = start + duration - drift`):
 *
 *   validUntil = sentAt + (expiresAt - now) - drift,   drift = (expiresAt - now) * 1% + 2 ms
 *
 * Why it is never later than the real expiry: the server read `now` while it processed the
 * request, so after the request was sent; its clock then read at most `now` at `sentAt`, and the
 * lock expires at `expiresAt`, at least `expiresAt - now` after `sentAt`. This holds whichever
 * `$$NOW` the server used: mongod evaluates it afresh on each write-conflict retry of a command,
 * a mongos once for every attempt (docs/mongodb-compatibility.md, R6); either way it is a reading
 * taken after the send. The drift term covers the two clocks running at slightly different rates
 * during the lease (Redlock's `driftFactor` 0.01) and the servers' millisecond date precision
 * (Redlock's "+ 2": "Redis expires precision, which is 1 ms", plus 1 ms).
 *
 * `sentAt` is read immediately before the driver is called, so any time the driver spends
 * queueing, selecting a server or retrying the command makes the lease shorter, never longer.
 */
import { performance } from 'node:perf_hooks';

/** Share of the granted duration set aside for clock-rate drift (Redlock's default driftFactor). */
export const CLOCK_DRIFT_FACTOR = 0.01;
/** Fixed allowance for millisecond date precision on both sides (Redlock's + 2 ms). */
export const CLOCK_DRIFT_MS = 2;
/**
 * A grant that leaves less than this when its reply (and the document) arrived is never handed
 * out: it may already have expired on the server.
 */
export const MIN_LEASE_MS = 1;
/**
 * The smallest ttl a grant can ever be counted on with: below it, the drift allowance alone leaves
 * less than MIN_LEASE_MS of the lease even for a reply that arrives the instant it was sent
 * (`ttl - (ttl * CLOCK_DRIFT_FACTOR + CLOCK_DRIFT_MS) < MIN_LEASE_MS`), so every grant would be
 * released again on arrival. Smaller ttls are refused before anything is sent (options.ts).
 */
export const MIN_TTL_MS = Math.ceil((CLOCK_DRIFT_MS + MIN_LEASE_MS) / (1 - CLOCK_DRIFT_FACTOR));

/** This process's monotonic clock, in milliseconds (never goes back, unaffected by wall-clock changes). */
export function monotonicNow(): number {
  return performance.now();
}

/** The server's timing of one granting command, and when its request was sent. */
export interface GrantTiming {
  /** `monotonicNow()` read immediately before the command was handed to the driver. */
  sentAt: number;
  /** The `$$NOW` of the command (or an equivalent reading, see LockStore). */
  serverNow: Date;
  /** The expiry the command wrote. */
  expiresAt: Date;
}

/** The monotonic instant until which this process may count on the lock (see the module comment). */
export function leaseDeadline({ sentAt, serverNow, expiresAt }: GrantTiming): number {
  const granted = expiresAt.getTime() - serverNow.getTime();
  return sentAt + granted - (Math.max(0, granted) * CLOCK_DRIFT_FACTOR + CLOCK_DRIFT_MS);
}

/**
 * The most an extension (or any grant of `ttl`) sent at `sentAt` can be counted on for before
 * its reply is known: the server's `$$NOW` for it is read after `sentAt`, so it expires no
 * earlier than `ttl` after `sentAt`.
 */
export function leaseFloor(sentAt: number, ttl: number): number {
  return sentAt + ttl - (ttl * CLOCK_DRIFT_FACTOR + CLOCK_DRIFT_MS);
}
