/**
 * The stall tests' two other instruments, beside the change-stream record (support/change-record.ts)
 * and its judge (support/grant-history.ts judgeRun):
 *  - beliefSampler: what each owner believes it holds, read every few milliseconds from the
 *    documents it was handed (`heldLock().msLeft()` > 0: a belief, with the token and the time);
 *  - outcomeBook: how each call ended (by kind and error class), whether an error is one the API
 *    documents, and every call that took longer than its bound (a hang).
 */
import { performance } from 'node:perf_hooks';
import { LockExpiredError, LockExpiredOnArrivalError, LockedError } from '../../src';
import { sleep } from './db';
import type { Belief } from './grant-history';

/** A document as an owner was handed it. */
export type Held = { _id: unknown; heldLock(): { token: string; msLeft(): number } | null };

export interface DocBelief extends Belief {
  /** The lock record (`key`, by default the document's id). */
  doc: string;
}

export interface BeliefSampler {
  beliefs: DocBelief[];
  /** What each owner holds now: its documents (read at each sample) and their record keys. */
  live: Map<string, { docs: () => readonly Held[]; key?: (doc: Held) => string }>;
  /** Counts `docs` as `owner`'s for `ms`, then releases them (a failed release is the test's to see elsewhere). */
  hold(owner: string, docs: readonly Held[], ms: number, release: () => Promise<unknown>, key?: (doc: Held) => string): Promise<void>;
  stop(): void;
}

export function beliefSampler(everyMs = 3): BeliefSampler {
  const beliefs: DocBelief[] = [];
  const live: BeliefSampler['live'] = new Map();
  const timer = setInterval(() => {
    for (const [owner, holding] of live) {
      const t = Date.now();
      for (const doc of holding.docs()) {
        const held = doc.heldLock();
        if (!held) continue;
        const m = held.msLeft();
        if (m > 0) beliefs.push({ owner, doc: holding.key ? holding.key(doc) : String(doc._id), token: held.token, t, m });
      }
    }
  }, everyMs);
  const hold: BeliefSampler['hold'] = async (owner, docs, ms, release, key) => {
    live.set(owner, { docs: () => docs, key });
    await sleep(ms);
    live.delete(owner);
    await release().catch(() => undefined);
  };
  return { beliefs, live, hold, stop: () => clearInterval(timer) };
}

export interface OutcomeBook {
  outcomes: Map<string, number>;
  count(kind: string): void;
  hangs: string[];
  /**
   * Awaits `call`, counted as `what: ok` or `what: <error class>` (and `what: other ...` when the
   * error is none the API documents for a call refused, called off or granted too late); a call
   * that took longer than `boundMs` is a hang. `onError` runs on a refusal before it returns null.
   */
  bounded<T>(name: string, what: string, boundMs: number, call: Promise<T>, onError?: (error: unknown) => Promise<void>): Promise<T | null>;
}

export function outcomeBook(): OutcomeBook {
  const outcomes = new Map<string, number>();
  const hangs: string[] = [];
  const count = (kind: string) => void outcomes.set(kind, (outcomes.get(kind) ?? 0) + 1);
  return {
    outcomes,
    count,
    hangs,
    async bounded(name, what, boundMs, call, onError) {
      const started = performance.now();
      try {
        const value = await call;
        count(`${what}: ok`);
        return value;
      } catch (error) {
        count(`${what}: ${(error as Error).constructor.name}`);
        // Documented outcomes: refused, called off, or granted too late to count on (docs/api.md).
        const documented = error instanceof LockedError || error instanceof LockExpiredOnArrivalError || error instanceof LockExpiredError || (error instanceof Error && error.message === 'called off');
        if (!documented) count(`${what}: other ${(error as Error).message.slice(0, 80)}`);
        await onError?.(error);
        return null;
      } finally {
        const ms = performance.now() - started;
        if (ms > boundMs) hangs.push(`${name} ${what} took ${Math.round(ms)} ms (bound ${boundMs})`);
      }
    },
  };
}
