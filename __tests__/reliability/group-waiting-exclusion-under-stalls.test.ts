/**
 * PRODUCT.md properties 1, 13 and 15 for callers that WAIT, mixed, under random stalls (issue 17
 * item 2; the fair3 brief: "reservations never let two owners hold one document"): at no instant
 * does one owner believe it holds a document (`heldLock().msLeft()` > 0) while the server grants it
 * to another, no owner counts on a document longer than the server granted it, and no waiting call
 * hangs past its bound.
 *
 * Every owner has its own connection and appName; each loops over one kind of call, on 5 documents
 * of one model and 2 of another:
 *  - groups (`acquireLocks`/`lockMany`, 2-4 documents in random order, `wait`, ttl 400-1500 ms, so
 *    a kept prefix can run out while its group waits), some called off by an explicit abort at a
 *    random moment, some by a timed-out signal;
 *  - `lockAll` across both models, waiting;
 *  - single-document `lock` with `wait`, and `tryLock` without;
 *  - `lockNext` workers claiming any free document of the model, waiting.
 * Faults at random: the server holds a victim's `update`/`findAndModify` past the ttl (failCommand
 * blockConnection), a victim's replies reach it late (the whole process stands still), or the
 * process pauses. The independent record: the change stream of the whole database (owners in
 * clear), replayed per lock record into the server's grants (support/grant-history.ts), and each
 * owner's beliefs sampled every few milliseconds. Needs change streams: replica set only.
 */
import type { Types } from 'mongoose';
import { lockAll } from '../../src';
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

const db = testDatabase('grpwaitexcl');
const RUN_MS = Number(process.env.MPL_GROUP_WAIT_EXCL_MS ?? 25_000);
const KINDS = ['group', 'group', 'group', 'group-abort', 'lockAll', 'single-wait', 'try', 'next'] as const;

const set = stalledActors(db, {
  kinds: KINDS,
  appPrefix: 'mpl-gwexcl',
  models: async (conn) => ({
    items: await workItemModel(conn, { ttl: 1_000, ownerStorage: 'plain' }, 'WaitExclItem'),
    others: await workItemModel(conn, { ttl: 1_000, ownerStorage: 'plain' }, 'WaitExclOther'),
  }),
});
type Actor = (typeof set.actors)[number];

replicaSetOnly('change streams and fail points need a replica set')(
  'groups, lockAll, single locks and lockNext, all waiting, under stalls and aborts: no owner believes it holds a document the server grants to another',
  async () => {
    const { admin, actors } = set;
    const { items, others } = actors[0]!.models;
    const ids: Types.ObjectId[] = (await items.create(Array.from({ length: 5 }, (_, i) => ({ title: `i${i}` })))).map((d) => d._id);
    const otherIds: Types.ObjectId[] = (await others.create([{ title: 'o0' }, { title: 'o1' }])).map((d) => d._id);
    const locks = [items.lockModel().collection.collectionName, others.lockModel().collection.collectionName];
    const record = await recordChangesOf(testUri(), db.name, { pipeline: [{ $match: { 'ns.coll': { $in: locks } } }] });

    const sampler = beliefSampler();
    const keyOf = (coll: string) => (doc: Held) => `${coll}/${String(doc._id)}`;
    const stopAt = Date.now() + RUN_MS;
    const { outcomes, count, hangs, bounded: book } = outcomeBook();
    const bounded = <T>(actor: Actor, what: string, boundMs: number, call: Promise<T>) => book(actor.name, what, boundMs, call);
    const hold = (owner: string, docs: Held[], coll: (doc: Held) => string, release: () => Promise<unknown>) => sampler.hold(owner, docs, rand(0, 900), release, coll);

    async function work(actor: Actor): Promise<void> {
      const owner = actor.name;
      const itemKey = keyOf(locks[0]!);
      while (Date.now() < stopAt) {
        const ttl = rand(400, 1_500);
        if (actor.kind === 'group' || actor.kind === 'group-abort') {
          const set = [...ids].sort(() => Math.random() - 0.5).slice(0, rand(2, 5));
          const controller = new AbortController();
          const signal = actor.kind === 'group-abort' ? (Math.random() < 0.5 ? AbortSignal.timeout(rand(100, 2_500)) : controller.signal) : undefined;
          const timer = setTimeout(() => controller.abort(new Error('called off')), rand(0, 2_500));
          const docs = await bounded(actor, actor.kind, 4_000 + 6_000, actor.models.items.lockMany(set, owner, { ttl, wait: 4_000, signal }));
          clearTimeout(timer);
          if (docs) await hold(owner, docs, itemKey, () => actor.models.items.unlockMany(docs.filter((d) => d.heldLock())));
        } else if (actor.kind === 'lockAll') {
          const targets = [
            [actor.models.items, pick(ids)],
            [actor.models.others, pick(otherIds)],
          ] as const;
          const ordered = Math.random() < 0.5 ? [targets[0], targets[1]] : [targets[1], targets[0]];
          const docs = await bounded(actor, 'lockAll', 10_000, lockAll(ordered as never, owner, { ttl, wait: 4_000 }));
          if (docs) {
            const held = docs as unknown as Held[];
            const coll = (doc: Held) => (otherIds.some((id) => id.equals(doc._id as Types.ObjectId)) ? `${locks[1]}/${String(doc._id)}` : `${locks[0]}/${String(doc._id)}`);
            await hold(owner, held, coll, async () => {
              await actor.models.items.releaseAllFor(owner);
              await actor.models.others.releaseAllFor(owner);
            });
          }
        } else if (actor.kind === 'single-wait') {
          const doc = await bounded(actor, 'lock(wait)', 10_000, actor.models.items.lock(pick(ids), owner, { ttl, wait: 3_000 }));
          if (doc) await hold(owner, [doc], itemKey, () => doc.unlock());
        } else if (actor.kind === 'try') {
          const doc = await bounded(actor, 'tryLock', 6_000, actor.models.items.tryLock(pick(ids), owner, { ttl }));
          if (doc) await hold(owner, [doc], itemKey, () => doc.unlock());
          else await sleep(rand(5, 50));
        } else {
          const doc = await bounded(actor, 'lockNext', 10_000, actor.models.items.lockNext({ _id: { $in: ids } }, owner, { ttl, wait: 3_000 }));
          if (doc) await hold(owner, [doc], itemKey, () => doc.unlock());
        }
      }
    }

    const faults = () =>
      injectFaults({ admin: admin.connection, victims: actors, stopAt, gapMs: [200, 700], blockNamespace: () => `${db.name}.${pick(locks)}`, blockCommands: ['update', 'findAndModify'], blockMs: [300, 1_600], lateCollection: locks[0]!, lateMs: [200, 1_300], count: (kind) => count(kind) });

    await Promise.all([...actors.map((actor) => work(actor)), faults()]);
    sampler.stop();
    await record.stop();

    const { grantCount, overlaps, violations } = judgeRun(record.events, sampler.beliefs, (event) => {
      const e = event as { ns?: { coll: string }; documentKey?: { _id: unknown } };
      return `${e.ns?.coll}/${String(e.documentKey?._id)}`;
    });
    process.stdout.write(`waiting exclusion: ${grantCount} grants, ${sampler.beliefs.length} samples, outcomes ${JSON.stringify(Object.fromEntries(outcomes))}\n`);
    expect(grantCount).toBeGreaterThan(20);
    expect(overlaps).toEqual([]);
    expect(violations.slice(0, 5)).toEqual([]);
    expect(hangs).toEqual([]);
    expect([...outcomes.keys()].filter((k) => k.includes(': other '))).toEqual([]);
  },
  RUN_MS + 120_000,
);
