/**
 * The independent record of the belief tests (reliability/lease-beliefs-under-stalls,
 * reliability/group-lease-beliefs-under-stalls): one lock record's change events (owners stored in
 * clear, `ownerStorage: 'plain'`) replayed into the server's grants, and an owner's belief sampled
 * at one instant judged against them (PRODUCT.md properties 1 and 13).
 *
 * Change events and samples carry whole milliseconds, and the emulator runs on this machine, so
 * the server's dates and `Date.now()` read one clock. Whatever happened in the very millisecond of
 * a sample may have come before or after it: each check gives the benefit of that doubt, never more.
 */
import type { mongo } from 'mongoose';

export interface Grant {
  owner: string;
  token: string;
  /** Its `acquiredAt`: the acquisition's `$$NOW`. */
  start: number;
  /**
   * When the acquisition's write became visible (its change event's wallTime). An acquisition
   * that waited behind a transaction holding the record (R17: a guarded save, a saveAndUnlock)
   * may decide with a `$$NOW` read before that wait (R6: once per command for `update` and through
   * mongos, and on the emulator; mongod's findAndModify reads it again per attempt), so `start` can
   * precede the commit of the previous holder's release, and until that commit the previous holder
   * still holds the lock on the server.
   */
  committed: number;
  /** When the server stopped granting it: its expiry, its release, or the next acquisition. */
  end: number;
  /**
   * Each expiry the server wrote for it (its grant, extensions, its release), with the change
   * event's wall time: what the server granted at a given moment is the last one written by then.
   */
  expiries: Array<{ at: number; expiresAt: number }>;
}

/** What one owner believed at one instant: at wall time `t` its lock had `m` ms left. */
export interface Belief {
  owner: string;
  token: string;
  t: number;
  m: number;
}

/** Replays one lock record's change events into its grants, one per acquisition token, by start. */
export function grantsFrom(events: readonly mongo.ChangeStreamDocument[]): Grant[] {
  const grants = new Map<string, Grant>();
  let current: string | null = null;
  let owner: string | null = null;
  for (const event of events) {
    if (event.operationType === 'delete') {
      current = null;
      owner = null;
      continue;
    }
    let fields: Record<string, unknown>;
    if (event.operationType === 'insert' || event.operationType === 'replace') fields = event.fullDocument as Record<string, unknown>;
    else if (event.operationType === 'update') fields = event.updateDescription.updatedFields as Record<string, unknown>;
    else continue;
    const expiresAt = fields.expiresAt instanceof Date ? fields.expiresAt.getTime() : undefined;
    const at = (event as { wallTime?: Date }).wallTime?.getTime() ?? 0;
    // A diff names only the fields that changed: an owner that takes its own lock again keeps it.
    if ('owner' in fields) owner = (fields.owner as string | null) ?? null;
    if (typeof fields.token === 'string' && fields.token !== current) {
      // A new acquisition: from the command's $$NOW (acquiredAt) to the expiry it wrote. It ends
      // the acquisition it replaced (the same owner renewing, or the previous one expired).
      const start = (fields.acquiredAt as Date).getTime();
      const replaced = current === null ? undefined : grants.get(current);
      if (replaced && replaced.end > start) replaced.end = start;
      current = fields.token;
      grants.set(current, { owner: owner!, token: current, start, committed: at, end: expiresAt!, expiries: [{ at, expiresAt: expiresAt! }] });
    } else if ('token' in fields && fields.token === null) {
      // A release: the grant that was current ends at the release's $$NOW (its expiresAt).
      const grant = current === null ? undefined : grants.get(current);
      if (grant && expiresAt !== undefined) {
        grant.end = expiresAt;
        grant.expiries.push({ at, expiresAt });
      }
      current = null;
    } else if (expiresAt !== undefined && current !== null) {
      // An extension or a resume of the current acquisition.
      const grant = grants.get(current)!;
      grant.end = expiresAt;
      grant.expiries.push({ at, expiresAt });
    }
  }
  return [...grants.values()].sort((a, b) => a.start - b.start);
}

/**
 * The latest expiry the server may have granted `grant` at wall time `t`: the last one written
 * before `t`, or one written in `t`'s own millisecond (which may have come just before the sample).
 */
export function grantedAt(grant: Grant, t: number): number {
  let before = grant.expiries[0]!.expiresAt;
  let sameMillisecond = before;
  for (const entry of grant.expiries) {
    if (entry.at < t) before = sameMillisecond = entry.expiresAt;
    else if (entry.at === t) sameMillisecond = entry.expiresAt;
  }
  return Math.max(before, sameMillisecond);
}

/**
 * Property 1 on the server's own history: no acquisition starts before the expiry the server last
 * wrote for another owner's (its grant, extension or release). Not `end`: the replay ends a grant
 * that was taken over where the next one starts, so `end` cannot show a takeover that came too
 * early; the takeover's filter compares the record's expiry with the same `$$NOW` that became the
 * next `acquiredAt` (lock-store.ts, EXPIRED_EXPR), so on a correct server `start` is never earlier.
 */
export function serverOverlaps(grants: readonly Grant[]): string[] {
  const overlaps: string[] = [];
  for (let i = 1; i < grants.length; i++) {
    const previous = grants[i - 1]!;
    const next = grants[i]!;
    const until = previous.expiries[previous.expiries.length - 1]!.expiresAt;
    if (next.owner !== previous.owner && next.start < until) overlaps.push(`${previous.owner} until ${until} / ${next.owner} from ${next.start}`);
  }
  return overlaps;
}

/**
 * Property 13 for one sample, two ways: at `t` no other owner's grant (once committed) covers `t`;
 * and what the owner counts on, `t + m`, does not reach past the expiry the server had granted that
 * very acquisition at `t` (a later shorter extension, or its own release, may end it sooner: the
 * owner learns of those when it sends them). Returns the violations, described.
 */
export function beliefViolations(belief: Belief, grants: readonly Grant[]): string[] {
  const found: string[] = [];
  const other = grants.find((grant) => grant.owner !== belief.owner && Math.max(grant.start, grant.committed) + 1 < belief.t && belief.t < grant.end);
  if (other) found.push(`${belief.owner} believed at ${belief.t} (for ${Math.round(belief.m)} ms) while ${other.owner} held [${other.start} (committed ${other.committed}), ${other.end}]`);
  const own = grants.find((grant) => grant.token === belief.token);
  if (!own) found.push(`${belief.owner} believed at ${belief.t} in an acquisition the server never granted (${belief.token})`);
  else if (belief.t + belief.m > grantedAt(own, belief.t) + 1) {
    found.push(`${belief.owner} counted at ${belief.t} on its lock until ${Math.round(belief.t + belief.m)}, the server had granted it until ${grantedAt(own, belief.t)}`);
  }
  return found;
}

/**
 * A run's change events judged per lock record: the events grouped by `keyOf` (a record's `_id`,
 * or collection and `_id` when a run spans several lock collections), each record's grants
 * (grantsFrom), property 1 on each record's history (serverOverlaps) and property 13 for every
 * belief sample (`doc`: its record's key) against that record's grants (beliefViolations). Each
 * finding names its record.
 */
export function judgeRun(
  events: readonly mongo.ChangeStreamDocument[],
  beliefs: readonly (Belief & { doc: string })[],
  keyOf: (event: mongo.ChangeStreamDocument) => string = (event) => String((event as { documentKey?: { _id: unknown } }).documentKey?._id),
): { grantsByDoc: Map<string, Grant[]>; grantCount: number; overlaps: string[]; violations: string[] } {
  const byDoc = new Map<string, mongo.ChangeStreamDocument[]>();
  for (const event of events) {
    const key = keyOf(event);
    const list = byDoc.get(key) ?? [];
    list.push(event);
    byDoc.set(key, list);
  }
  const grantsByDoc = new Map([...byDoc].map(([doc, list]) => [doc, grantsFrom(list)]));
  let grantCount = 0;
  const overlaps: string[] = [];
  for (const [doc, grants] of grantsByDoc) {
    grantCount += grants.length;
    overlaps.push(...serverOverlaps(grants).map((overlap) => `${doc}: ${overlap}`));
  }
  const violations = beliefs.flatMap((belief) => beliefViolations(belief, grantsByDoc.get(belief.doc) ?? []).map((violation) => `${belief.doc}: ${violation}`));
  return { grantsByDoc, grantCount, overlaps, violations };
}
