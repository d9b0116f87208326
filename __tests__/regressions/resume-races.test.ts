/**
 * Attack (held up): PRODUCT.md properties 1 and 12 under randomized interleavings of the web story's
 * calls, which no existing test races: resume with a possibly stale ticket (some after their lock
 * expired, some after a takeover, some after a release), Model.unlock with and without a ticket,
 * releaseAllFor, doc.unlock, saveAndUnlock and fresh acquisitions, by 12 workers (12 owners) over 3
 * connections on 2 documents. Every successful lock or resume enters a critical section (at most
 * 60 ms, well inside the 1 s ttl) guarded by an in-memory overlap detector that no lock code
 * touches. Each worker releases only its own locks, and only outside its critical section, so any
 * overlap is two owners holding at once. (forceUnlock and shared owners are left out on purpose:
 * they end a tenure legitimately while its holder is still inside.)
 */
import type { Types } from 'mongoose';
import { LockError } from '../../src';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('atk_resumerace');
const conns: MonitoredConnection[] = [];
const models: WorkItemModel[] = [];
const TTL = 1_000;

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

test('no two holders at once, whatever resumes, releases and takeovers interleave', async () => {
  const ids: Types.ObjectId[] = [];
  for (let i = 0; i < 2; i++) ids.push((await models[0]!.create({ title: `race ${i}` }))._id);
  const inside = new Map<string, string>();
  const overlaps: string[] = [];
  let sections = 0;
  let lateSections = 0;
  const counts: Record<string, number> = {};
  const count = (key: string) => (counts[key] = (counts[key] ?? 0) + 1);
  const deadline = Date.now() + 8_000;

  async function critical(owner: string, id: Types.ObjectId, started: number) {
    const key = String(id);
    const other = inside.get(key);
    if (other !== undefined) overlaps.push(`${owner} entered while ${other} was inside`);
    inside.set(key, owner);
    await sleep(Math.random() * 60);
    if (inside.get(key) === owner) inside.delete(key);
    sections++;
    if (Date.now() - started > TTL / 2) lateSections++; // a stalled event loop, not evidence
  }

  async function worker(w: number) {
    const M = models[w % models.length]!;
    const owner = `owner-${w}`;
    const tickets = new Map<string, string>();
    while (Date.now() < deadline) {
      const id = ids[Math.floor(Math.random() * ids.length)]!;
      const key = String(id);
      const roll = Math.random();
      try {
        if (roll < 0.35) {
          const started = Date.now();
          const doc = await M.lock(id, owner);
          count('lock');
          tickets.set(key, doc.heldLock()!.ticket);
          await critical(owner, id, started);
          if (Math.random() < 0.5) await doc.unlock();
        } else if (roll < 0.75 && tickets.has(key)) {
          if (Math.random() < 0.3) await sleep(Math.random() * 1_300); // sometimes past the ttl
          const started = Date.now();
          const doc = await M.lock(id, owner, { resume: tickets.get(key)! });
          count('resume');
          await critical(owner, id, started);
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
        await sleep(Math.random() * 20);
      }
    }
  }

  await Promise.all(Array.from({ length: 12 }, (_, w) => worker(w)));
  console.log(JSON.stringify({ sections, lateSections, counts }));
  expect(counts.resume ?? 0).toBeGreaterThan(0);
  expect(counts.LOCK_NOT_HELD ?? 0).toBeGreaterThan(0); // stale resumes really happened
  if (lateSections === 0) expect(overlaps).toEqual([]);
}, 60_000);
