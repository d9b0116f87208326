/**
 * PRODUCT.md properties 1, 13 and 15 for GROUPS under random stalls, checked against the server's
 * own history (the group counterpart of lease-beliefs-under-stalls.test.ts): at no instant does
 * one owner believe it holds a document of its group (that document's `heldLock().msLeft()` > 0)
 * while the server grants that document to another owner, and no owner counts on a document
 * longer than the server granted its acquisition at that moment.
 *
 * Owners (one connection and appName each) take groups of 2 or 3 of 4 documents, overlapping each
 * other's, with `acquireLocks` (random ttl 400-1500 ms, `wait`, autoExtend on or off), hold them
 * for up to 2.5 ttls, and meanwhile renew explicitly (sometimes two renewals at once, sometimes
 * shorter than what is left: group-renewals-in-flight-together), save, `saveAndUnlock` one member
 * (a member's own release racing the group's renewals), and release the group (`release()` or
 * `unlockMany`). Faults at random: the server holds a victim's `update` (group takes, renewals
 * and releases are `update` commands: failCommand blockConnection, past the ttl), a victim's
 * `update` replies reach it late (support/late-replies.ts), or the whole process stands still.
 *
 * The independent record: the lock collection's change stream (owners in clear), replayed per
 * document into grants (start: `acquiredAt`, the command's `$$NOW`; end: the last `expiresAt`
 * written while its token was current); each owner's belief sampled every few milliseconds. The
 * emulator runs on this machine, so the server's dates and `Date.now()` read one clock.
 * Needs change streams and fail points: skipped on a standalone server.
 */
import { performance } from 'node:perf_hooks';
import type { Types } from 'mongoose';
import { testUri } from '../conformance/support/server';
import { beliefSampler } from '../support/belief-sampler';
import { recordChangesOf } from '../support/change-record';
import { sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { usesPrivateServer } from '../support/private-server';
import { judgeRun } from '../support/grant-history';
import { replicaSetOnly } from '../support/topology';
import { injectFaults, pick, rand, stalledOwners, type Owner } from '../support/stalled-owners';
import type { WorkItemModel } from '../support/work-item';

usesPrivateServer();

const db = testDatabase('groupleasebeliefs');
const OWNERS = 4;
const DOCUMENTS = 4;
const RUN_MS = Number(process.env.MPL_GROUP_BELIEFS_MS ?? 20_000);

const cast = stalledOwners(db, { count: OWNERS, appPrefix: 'mpl-gbeliefs', modelName: 'GroupBeliefs' });
let owners: Owner[];
let admin: MonitoredConnection;
let adminModel: WorkItemModel;

beforeAll(() => {
  ({ owners, admin, adminModel } = cast);
});

replicaSetOnly('change streams and fail points need a replica set')(
  'groups under random stalls, pauses, late replies and racing renewals: no owner believes it holds a document while the server grants it to another',
  async () => {
    const docs = await adminModel.create(Array.from({ length: DOCUMENTS }, (_, i) => ({ title: `contended ${i}` })));
    const ids: Types.ObjectId[] = docs.map((d) => d._id);
    const locksName = adminModel.lockModel().collection.collectionName;
    const record = await recordChangesOf(testUri(), db.name, { collection: locksName });

    type Handle = Awaited<ReturnType<WorkItemModel['acquireLocks']>>;
    const sampler = beliefSampler();
    const { beliefs, live } = sampler;

    const stopAt = Date.now() + RUN_MS;
    const outcomes = new Map<string, number>();
    const log: string[] = [];
    const count = (kind: string, detail = '') => {
      log.push(`${Date.now()} ${kind} ${detail}`);
      outcomes.set(kind, (outcomes.get(kind) ?? 0) + 1);
    };
    const settle = (kind: string, promise: Promise<unknown>, detail = '') => {
      log.push(`${Date.now()} start ${kind} ${detail}`);
      return promise.then(
        () => count(kind, detail),
        (error: unknown) => count(`${kind}: ${(error as Error).constructor.name}`, `${detail} ${(error as Error).message}`),
      );
    };

    async function work(owner: Owner): Promise<void> {
      while (Date.now() < stopAt) {
        const ttl = rand(400, 1_500);
        const size = rand(2, 4);
        const set = [...ids].sort(() => Math.random() - 0.5).slice(0, size);
        let handle: Handle;
        try {
          handle = await owner.model.acquireLocks(set, owner.name, { ttl, wait: 3_000, autoExtend: Math.random() < 0.7 });
        } catch (error) {
          count(`acquire: ${(error as Error).constructor.name}`);
          continue;
        }
        count('acquired', `${owner.name} ${handle.documents.map((d) => String(d._id).slice(-2)).join(',')} token ${handle.documents[0]!.heldLock()!.token} ttl ${ttl}`);
        live.set(owner.name, { docs: () => handle.documents });
        const until = performance.now() + rand(0, Math.round(ttl * 2.5));
        try {
          while (performance.now() < until && !handle.signal.aborted) {
            await sleep(Math.min(40, Math.max(0, until - performance.now())));
            const r = Math.random();
            if (r < 0.04) {
              const to = rand(200, 1_500);
              await settle('extended', handle.extend(to), `${owner.name} to ${to}`);
            } else if (r < 0.06) {
              const [a, b] = [rand(200, 1_500), rand(200, 1_500)];
              await settle('extended twice', Promise.all([handle.extend(a), handle.extend(b)]), `${owner.name} to ${a} and ${b}`);
            }
            else if (r < 0.1) {
              const doc = pick(handle.documents);
              if (doc.heldLock()) {
                doc.edits += 1;
                await settle('saved', doc.save(), `${owner.name} ${String(doc._id).slice(-2)}`);
              }
            } else if (r < 0.12) {
              // A member's own release, racing the group's renewals.
              const doc = pick(handle.documents);
              if (doc.heldLock()) {
                doc.edits += 1;
                const to = rand(300, 1_500);
                await settle('member saveAndUnlock', Promise.all([doc.saveAndUnlock(), handle.extend(to).catch(() => undefined)]), `${owner.name} ${String(doc._id).slice(-2)} extend ${to}`);
              }
            }
          }
        } finally {
          live.delete(owner.name);
          if (Math.random() < 0.5) await settle('released', handle.release(), owner.name);
          else {
            const held = handle.documents.filter((doc) => doc.heldLock());
            await settle('unlockMany', held.length > 0 ? owner.model.unlockMany(held) : Promise.resolve(), owner.name);
            await handle.release().catch(() => undefined);
          }
        }
      }
    }

    const faults = () =>
      injectFaults({ admin: admin.connection, victims: owners, stopAt, gapMs: [200, 700], blockNamespace: () => `${db.name}.${locksName}`, blockCommands: ['update'], blockMs: [300, 1_600], lateCollection: locksName, lateMs: [200, 1_300], count: (kind, victim) => count(kind, victim?.name) });

    await Promise.all([...owners.map((owner) => work(owner)), faults()]);
    sampler.stop();
    await record.stop();

    // Property 1 on each record's own history; property 13 for every sample (support/grant-history.ts).
    const { grantsByDoc, grantCount, overlaps: serverOverlapsFound, violations: beliefOverlaps } = judgeRun(record.events, beliefs);
    if (beliefOverlaps.length > 0 && process.env.MPL_GROUP_BELIEFS_DUMP) {
      const { writeFileSync } = await import('node:fs');
      writeFileSync(process.env.MPL_GROUP_BELIEFS_DUMP, JSON.stringify({ beliefOverlaps, grants: Object.fromEntries(grantsByDoc), log }, null, 1));
    }
    process.stdout.write(`group lease beliefs: ${grantCount} grants, ${beliefs.length} belief samples, outcomes ${JSON.stringify(Object.fromEntries(outcomes))}\n`);
    expect(grantCount).toBeGreaterThan(10);
    expect(serverOverlapsFound).toEqual([]);
    expect(beliefOverlaps.slice(0, 5)).toEqual([]);
  },
  RUN_MS + 120_000,
);
