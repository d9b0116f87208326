/**
 * Attack (held up): PRODUCT.md properties 1, 12 and 13 under randomized interleavings of the web
 * story's calls: resume with a current or stale ticket (stale after its lock expired, after a
 * takeover, after a release), Model.unlock with and without a ticket, releaseAllFor, doc.unlock,
 * saveAndUnlock and fresh acquisitions, by 12 workers (12 owners) over 3 connections on 2
 * documents. Every successful lock or resume enters a critical section (at most 60 ms) watched by
 * an in-memory overlap detector that no lock code touches. Each worker releases only its own locks,
 * and only outside its critical section, so any overlap is two owners holding at once. (forceUnlock
 * and shared owners are left out on purpose: they end a tenure legitimately while its holder is
 * still inside.)
 *
 * Robust on a loaded machine (issue 18: at load 20 on 2 cores it once saw 0 resumes, and a stalled
 * event loop used to switch the overlap check off altogether):
 *  - What it must have raced is made to happen, not hoped for: every few acquisitions the worker
 *    resumes its fresh ticket at once (current: it succeeds unless the lock expired meanwhile), and
 *    resumes a ticket it has just released itself (stale: refused as released), and now and then
 *    lets a lock on a quiet third document run out before resuming it (stale: expired, or taken
 *    over when another worker got there first). The run lasts at least MIN_RUN_MS and then goes
 *    on until each kind of resume, and enough judged sections (below), were seen, bounded by
 *    MAX_RUN_MS; the counts are asserted.
 *  - The overlap check is always on, and judged by leases (property 13): a section counts only if
 *    its holder's lease (`heldLock().msLeft()`, timed from when the granting request was sent) was
 *    still running when it left the section. Two such sections of different owners on one document
 *    must never overlap, however long the process stalled: the second grant can only come after the
 *    first lock ended on the server, which is after the first lease ended. Sections whose lease ran
 *    out inside (a stall longer than the ttl) are counted and reported, not judged.
 */
import type { Types } from 'mongoose';
import { LockError, LockExpiredOnArrivalError, LockNotHeldError, type LockableDocument } from '../../src';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItem, type WorkItemModel } from '../support/work-item';

const db = testDatabase('atk_resumerace');
const conns: MonitoredConnection[] = [];
const models: WorkItemModel[] = [];
const TTL = 2_000;
const MIN_RUN_MS = 8_000;
const MAX_RUN_MS = 150_000;

beforeAll(async () => {
  for (let i = 0; i < 3; i++) {
    const conn = await connect(db.name);
    conns.push(conn);
    models.push(await workItemModel(conn.connection, { ttl: TTL }, 'RaceItem'));
  }
});

afterAll(async () => {
  await db.drop(conns[0]!.connection);
  for (const conn of conns) await conn.close();
});

interface Section {
  owner: string;
  key: string;
  enteredAt: number;
  leftAt: number;
  /** The holder's lease still ran when it left the section. */
  leased: boolean;
}

/** Pairs of sections of different owners on one document that overlap in time. */
function overlapsOf(sections: readonly Section[]): string[] {
  const overlaps: string[] = [];
  for (const [i, a] of sections.entries()) {
    for (const b of sections.slice(i + 1)) {
      if (a.key === b.key && a.owner !== b.owner && a.enteredAt < b.leftAt && b.enteredAt < a.leftAt) {
        overlaps.push(`${a.owner} and ${b.owner} both inside on ${a.key}`);
      }
    }
  }
  return overlaps;
}

test('the overlap detector reports two owners inside at once (the check can fail)', () => {
  const section = (owner: string, key: string, enteredAt: number, leftAt: number): Section => ({ owner, key, enteredAt, leftAt, leased: true });
  expect(overlapsOf([section('a', 'x', 0, 10), section('b', 'x', 5, 15)])).toEqual(['a and b both inside on x']);
  expect(overlapsOf([section('a', 'x', 0, 10), section('b', 'x', 10, 15), section('a', 'x', 5, 8), section('c', 'y', 0, 20)])).toEqual([]);
});

test('no two holders at once, whatever resumes, releases and takeovers interleave', async () => {
  const ids: Types.ObjectId[] = [];
  for (let i = 0; i < 2; i++) ids.push((await models[0]!.create({ title: `race ${i}` }))._id);
  // A third document that workers touch only now and then: a lock left to run out there is often
  // still unclaimed when its owner resumes it (stale as expired), and sometimes taken over first.
  // On the two busy documents another worker nearly always takes an expired lock at once.
  const quiet = (await models[0]!.create({ title: 'race quiet' }))._id;
  const sections: Section[] = [];
  const counts: Record<string, number> = {};
  const count = (key: string) => (counts[key] = (counts[key] ?? 0) + 1);
  const seen = (key: string) => counts[key] ?? 0;

  const started = Date.now();
  const enough = () => seen('judged') >= 100 && seen('resume') >= 20 && seen('stale:released') >= 5 && seen('stale:taken_over') >= 3 && seen('stale:expired') >= 1;
  const running = () => Date.now() - started < MIN_RUN_MS || (!enough() && Date.now() - started < MAX_RUN_MS);

  /** A critical section under `doc`'s lock, entered only while its lease runs. */
  async function critical(owner: string, id: Types.ObjectId, doc: LockableDocument<WorkItem>) {
    if (doc.heldLock()!.msLeft() <= 0) return count('lease-over-before-section');
    const enteredAt = performance.now();
    await sleep(Math.random() * 60);
    const leased = doc.heldLock()!.msLeft() > 0;
    sections.push({ owner, key: String(id), enteredAt, leftAt: performance.now(), leased });
    if (leased) count('judged');
  }

  async function resume(M: WorkItemModel, id: Types.ObjectId, owner: string, ticket: string): Promise<LockableDocument<WorkItem>> {
    const doc = await M.lock(id, owner, { resume: ticket });
    count('resume');
    await critical(owner, id, doc);
    return doc;
  }

  async function worker(w: number) {
    const M = models[w % models.length]!;
    const owner = `owner-${w}`;
    const tickets = new Map<string, string>();
    let acquisitions = 0;
    while (running()) {
      const id = Math.random() < 0.05 ? quiet : ids[Math.floor(Math.random() * ids.length)]!;
      const key = String(id);
      const roll = Math.random();
      try {
        if (Math.random() < 0.02) {
          // Let a fresh lock on the quiet document run out, then resume it: refused as expired, or
          // as taken over when another worker's lock got there first, or (the lease ends before the
          // server's expiry) a resume that still finds it current.
          const doc = await M.lock(quiet, owner);
          count('lock');
          await critical(owner, quiet, doc);
          while (doc.heldLock()!.msLeft() > 0) await sleep(50); // bounded: a lease ends within its ttl
          await sleep(Math.random() * TTL * 0.2);
          await resume(M, quiet, owner, doc.heldLock()!.ticket);
        } else if (roll < 0.35) {
          const doc = await M.lock(id, owner);
          count('lock');
          const ticket = doc.heldLock()!.ticket;
          tickets.set(key, ticket);
          await critical(owner, id, doc);
          acquisitions++;
          if (acquisitions % 3 === 1) {
            // A current ticket, resumed at once: a resume that succeeds unless the lock expired meanwhile.
            await resume(M, id, owner, ticket);
          } else if (acquisitions % 3 === 2) {
            // A ticket released by its own owner (logout in another tab): stale by construction.
            await doc.unlock();
            await resume(M, id, owner, ticket);
          } else if (Math.random() < 0.5) {
            await doc.unlock();
          }
        } else if (roll < 0.75 && tickets.has(key)) {
          if (Math.random() < 0.25) await sleep(TTL * (0.5 + Math.random() * 0.8)); // sometimes past the ttl
          const doc = await resume(M, id, owner, tickets.get(key)!);
          if (Math.random() < 0.5) await doc.saveAndUnlock();
        } else if (roll < 0.85 && tickets.has(key)) {
          if (await M.unlock(id, owner, { ticket: tickets.get(key)! })) count('unlock-ticket');
        } else if (roll < 0.93) {
          if (await M.unlock(id, owner)) count('unlock');
        } else {
          count(`releaseAllFor:${await M.releaseAllFor(owner)}`);
        }
      } catch (error) {
        if (!(error instanceof LockError)) throw error;
        count(error.code);
        // A late answer is not a stale ticket: counted apart.
        if (error instanceof LockExpiredOnArrivalError) count('late');
        else if (error instanceof LockNotHeldError) count(`stale:${error.reason}`);
        await sleep(Math.random() * 20);
      }
    }
  }

  await Promise.all(Array.from({ length: 12 }, (_, w) => worker(w)));

  const judged = sections.filter((s) => s.leased);
  const overlaps = overlapsOf(judged);
  console.log(JSON.stringify({ ms: Date.now() - started, sections: sections.length, judged: judged.length, counts }));
  expect(overlaps).toEqual([]);
  // It raced what it claims to race: current resumes, and stale ones of each kind.
  expect(seen('resume')).toBeGreaterThanOrEqual(20);
  expect(seen('stale:released')).toBeGreaterThanOrEqual(5);
  expect(seen('stale:taken_over')).toBeGreaterThanOrEqual(3);
  expect(seen('stale:expired')).toBeGreaterThanOrEqual(1);
  expect(judged.length).toBeGreaterThanOrEqual(100); // enough sections ran within their lease to judge
}, MAX_RUN_MS + 60_000);
