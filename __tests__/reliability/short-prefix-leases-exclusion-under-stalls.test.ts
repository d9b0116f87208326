/**
 * PRODUCT.md properties 1 and 13 with waiting groups whose kept prefix may run on a lease SHORTER
 * than the ttl (attack-fair4 brief: "exclusion and conservative leases with the SHORTER prefix
 * leases ... the renewal to full ttl stalled / failed / answered late; the give-up delayed (stalls)
 * so the prefix lapses under the group"), beside single waiters that reserve, callers that follow
 * the refusal's retryAfterMs, and tryLock probers. Unlike group-waiting-exclusion-under-stalls
 * (ttl 0.4-1.5 s, where a prefix lease near the hold bound is the whole ttl anyway), the ttls here
 * are 4-12 s, so a prefix lease that ends near the give-up time (bound 2 s, then 4 s) is far below
 * the ttl, and the stalls (1-5 s) outlast it but not the ttl: a stalled step, give-up or renewal
 * lets the prefix lapse while the group still counts on it, and the probers take it.
 *
 * Every owner has its own connection and appName. Faults at random: the server holds a victim's
 * `update` / `find` / `findAndModify` on the lock collection (failCommand blockConnection), a
 * victim's `update` replies reach it late (the process stands still after the server ran it), or
 * the whole process pauses. The independent record: the database's change stream (owners in
 * clear), replayed into the server's grants (support/grant-history.ts judgeRun), and each owner's
 * beliefs (`heldLock().msLeft()`) sampled every few milliseconds. No overlap, no belief beyond the
 * server's grant, no call past its bound. Needs change streams: replica set only.
 */
import type { Types } from 'mongoose';
import { LockedError } from '../../src';
import { testUri } from '../conformance/support/server';
import { beliefSampler, outcomeBook, type Held } from '../support/belief-sampler';
import { recordChangesOf } from '../support/change-record';
import { sleep, testDatabase } from '../support/db';
import { usesPrivateServer } from '../support/private-server';
import { judgeRun } from '../support/grant-history';
import { replicaSetOnly } from '../support/topology';
import { injectFaults, pick, rand, stalledActors } from '../support/stalled-owners';
import { workItemModel } from '../support/work-item';

usesPrivateServer();

const db = testDatabase('shortprefix');
const RUN_MS = Number(process.env.MPL_SHORT_PREFIX_MS ?? 25_000);
const KINDS = ['group', 'group', 'group', 'group-abort', 'single-wait', 'single-wait', 'retry-after', 'try'] as const;


const set = stalledActors(db, {
  kinds: KINDS,
  appPrefix: 'mpl-shortprefix',
  models: async (conn) => ({ items: await workItemModel(conn, { ttl: 8_000, ownerStorage: 'plain' }, 'ShortPrefixItem') }),
});
type Actor = (typeof set.actors)[number];

replicaSetOnly('change streams and fail points need a replica set')(
  'waiting groups (ttl 4-12 s, prefixes kept past stalls), reserving single waiters, Retry-After callers and probers: no owner believes it holds a document the server grants to another',
  async () => {
    const { admin, actors } = set;
    const { items } = actors[0]!.models;
    const ids: Types.ObjectId[] = (await items.create(Array.from({ length: 4 }, (_, i) => ({ title: `i${i}` })))).map((d) => d._id);
    const locks = items.lockModel().collection.collectionName;
    const record = await recordChangesOf(testUri(), db.name, { pipeline: [{ $match: { 'ns.coll': locks } }] });

    const sampler = beliefSampler();
    const stopAt = Date.now() + RUN_MS;
    const { outcomes, count, hangs, bounded: book } = outcomeBook();
    // A Retry-After caller waits as long as the refusal says before it asks again.
    const retryAfter = async (error: unknown) => {
      if (error instanceof LockedError) await sleep(Math.min(error.retryAfterMs ?? 500, 6_000) + 5);
    };
    const bounded = <T>(actor: Actor, what: string, boundMs: number, call: Promise<T>) => book(actor.name, what, boundMs, call, what === 'retry-after' ? retryAfter : undefined);
    const hold = (owner: string, docs: Held[], release: () => Promise<unknown>) => sampler.hold(owner, docs, rand(0, 600), release);

    async function work(actor: Actor): Promise<void> {
      const owner = actor.name;
      while (Date.now() < stopAt) {
        const ttl = rand(4_000, 12_000);
        if (actor.kind === 'group' || actor.kind === 'group-abort') {
          const set = [...ids].sort(() => Math.random() - 0.5).slice(0, rand(2, 5));
          const controller = new AbortController();
          const timer = actor.kind === 'group-abort' ? setTimeout(() => controller.abort(new Error('called off')), rand(300, 4_000)) : undefined;
          // Bound: the wait, plus stalls of up to 5 s on a few commands in a row.
          const docs = await bounded(actor, actor.kind, 6_000 + 20_000, actor.models.items.lockMany(set, owner, { ttl, wait: 6_000, signal: actor.kind === 'group-abort' ? controller.signal : undefined }));
          clearTimeout(timer);
          if (docs) await hold(owner, docs, () => actor.models.items.unlockMany(docs.filter((d) => d.heldLock())));
        } else if (actor.kind === 'single-wait') {
          const doc = await bounded(actor, 'lock(wait)', 5_000 + 20_000, actor.models.items.lock(pick(ids), owner, { ttl, wait: 5_000 }));
          if (doc) await hold(owner, [doc], () => doc.unlock());
        } else if (actor.kind === 'retry-after') {
          const doc = await bounded(actor, 'retry-after', 20_000, actor.models.items.lock(pick(ids), owner, { ttl }));
          if (doc) await hold(owner, [doc], () => doc.unlock());
        } else {
          const doc = await bounded(actor, 'tryLock', 20_000, actor.models.items.tryLock(pick(ids), owner, { ttl }));
          if (doc) await hold(owner, [doc], () => doc.unlock());
          else await sleep(rand(5, 50));
        }
      }
    }

    const faults = () =>
      injectFaults({ admin: admin.connection, victims: actors, stopAt, gapMs: [300, 900], blockNamespace: () => `${db.name}.${locks}`, blockCommands: ['update', 'find', 'findAndModify'], blockMs: [1_000, 5_000], lateCollection: locks, lateMs: [1_000, 4_000], count: (kind) => count(kind) });

    await Promise.all([...actors.map((actor) => work(actor)), faults()]);
    sampler.stop();
    await record.stop();

    const { grantCount, overlaps, violations } = judgeRun(record.events, sampler.beliefs);
    process.stdout.write(`short prefix leases: ${grantCount} grants, ${sampler.beliefs.length} samples, outcomes ${JSON.stringify(Object.fromEntries(outcomes))}\n`);
    expect(grantCount).toBeGreaterThan(20);
    expect(overlaps).toEqual([]);
    expect(violations.slice(0, 5)).toEqual([]);
    expect(hangs).toEqual([]);
    expect([...outcomes.keys()].filter((k) => k.includes(': other '))).toEqual([]);
  },
  RUN_MS + 150_000,
);
