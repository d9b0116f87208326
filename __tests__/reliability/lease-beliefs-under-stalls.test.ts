/**
 * PRODUCT.md properties 1 and 13 under random stalls, checked against the server's own history:
 * at no instant does one owner believe it holds the lock (a handle's `msLeft()` > 0) while the
 * server grants it to another owner.
 *
 * Owners (one connection and appName each) take the lock on one document over and over with
 * `acquireLock` (random ttl 300-1200 ms, `wait`, autoExtend on or off), hold it for a random time
 * (up to 2.5 ttls, so renewals must work), sometimes save through the guard, and release. Meanwhile
 * faults arrive at random: the server holds one owner's findAndModify or update
 * (`failCommand` blockConnection, past the ttl), one owner's replies reach it late (the process
 * pauses as the reply arrives: support/late-replies.ts), or the whole process stands still (a
 * busy loop longer than a ttl: a GC pause, a blocked event loop).
 *
 * The independent record:
 *  - the server's grants come from a change stream on the lock collection (owners stored in
 *    clear, `ownerStorage: 'plain'`): a grant starts at its `acquiredAt` (the command's `$$NOW`)
 *    and ends at the last `expiresAt` written while its token was current (an extension moves it,
 *    a release sets it to the release's `$$NOW`);
 *  - each owner's belief is sampled every few milliseconds: at wall time t its handle says
 *    msLeft() = m, so it believes it holds the lock over [t, t + m].
 * The emulator runs on this machine, so the server's dates and `Date.now()` read one clock.
 * Belief samples that overlap another owner's grant are violations of property 13; grants that
 * overlap each other, of property 1. The abort EVENT of each handle is also compared with the
 * next owner's grant, and its lateness reported (a timer on a loaded event loop can fire late;
 * reading `signal` re-checks the lease, README "Keeping a lock alive").
 *
 * Needs change streams and fail points: skipped on a standalone server.
 */
import { performance } from 'node:perf_hooks';
import { mongo } from 'mongoose';
import type { LockTargetId } from '../../src';
import { testUri } from '../conformance/support/server';
import { blockCommands, failPointOff } from '../plugin/guard/support';
import { sleep, testDatabase, waitUntil, type MonitoredConnection } from '../support/db';
import { usesPrivateServer } from '../support/private-server';
import { beliefViolations, grantsFrom, serverOverlaps, type Belief } from '../support/grant-history';
import { on } from '../support/late-replies';
import { replicaSetOnly } from '../support/topology';
import { pick, rand, stalledOwners, type Owner } from '../support/stalled-owners';
import type { WorkItemModel } from '../support/work-item';

usesPrivateServer();

const db = testDatabase('leasebeliefs');
const OWNERS = 4;
const RUN_MS = Number(process.env.MPL_LEASE_BELIEFS_MS ?? 30_000);

const cast = stalledOwners(db, { count: OWNERS, appPrefix: 'mpl-beliefs', modelName: 'Beliefs' });
let owners: Owner[];
let admin: MonitoredConnection;
let adminModel: WorkItemModel;

beforeAll(() => {
  ({ owners, admin, adminModel } = cast);
});

replicaSetOnly('change streams and fail points need a replica set')(
  "under random stalls, pauses and late replies no owner believes it holds the lock while the server grants it to another",
  async () => {
    const { _id: id } = await adminModel.create({ title: 'contended' });
    const locksName = adminModel.lockModel().collection.collectionName;
    // A client of its own (not the plugin's, not recorded as a plugin command).
    const watcher = new mongo.MongoClient(testUri());
    await watcher.connect();
    const stream: mongo.ChangeStream = watcher.db(db.name).collection(locksName).watch([], {});
    const events: mongo.ChangeStreamDocument[] = [];
    // The first tryNext opens the stream: from then on every change is captured.
    const first = await stream.tryNext();
    if (first) events.push(first);
    // The run ends with a marker written to the collection: every change of the run comes before
    // it in the stream, so collecting stops there (not after a fixed pause, which a loaded
    // machine's late getMore could outlast, leaving grants out of the history).
    const END_OF_RUN = 'end-of-run';
    let endSeen = false;
    const collecting = (async () => {
      try {
        for (;;) {
          const event = await stream.next();
          if ('documentKey' in event && (event.documentKey._id as unknown) === END_OF_RUN) {
            endSeen = true;
            return;
          }
          events.push(event);
        }
      } catch {
        // closed
      }
    })();

    const beliefs: Belief[] = [];
    const aborts: Array<{ owner: string; token: string; at: number }> = [];
    const live = new Map<string, { token: string; handle: Awaited<ReturnType<WorkItemModel['acquireLock']>> }>();
    const sampler = setInterval(() => {
      for (const [owner, { token, handle }] of live) {
        const t = Date.now();
        const m = handle.msLeft();
        if (m > 0) beliefs.push({ owner, token, t, m });
      }
    }, 3);

    const stopAt = Date.now() + RUN_MS;
    const outcomes = new Map<string, number>();
    const log: string[] = [];
    /** Counts an outcome by its kind; the detail goes to the log only (dumped on a violation). */
    const count = (kind: string, detail = '') => {
      log.push(`${Date.now()} ${kind} ${detail}`);
      outcomes.set(kind, (outcomes.get(kind) ?? 0) + 1);
    };

    async function work(owner: Owner): Promise<void> {
      while (Date.now() < stopAt) {
        const ttl = rand(300, 1_200);
        let handle: Awaited<ReturnType<WorkItemModel['acquireLock']>>;
        try {
          handle = await owner.model.acquireLock(id as LockTargetId, owner.name, { ttl, wait: 3_000, autoExtend: Math.random() < 0.7 });
        } catch (error) {
          count(`acquire: ${(error as Error).constructor.name}`, owner.name);
          continue;
        }
        count('acquired', `${owner.name} ${handle.document.heldLock()!.token} ttl ${ttl}`);
        const token = handle.document.heldLock()!.token;
        live.set(owner.name, { token, handle });
        handle.signal.addEventListener('abort', () => aborts.push({ owner: owner.name, token, at: Date.now() }));
        const holdFor = rand(0, Math.round(ttl * 2.5));
        const until = performance.now() + holdFor;
        try {
          while (performance.now() < until && !handle.signal.aborted) {
            await sleep(Math.min(50, until - performance.now()));
            if (Math.random() < 0.03) {
              // An explicit extension, sometimes shorter than what is left.
              const extendTo = rand(200, 1_500);
              await handle.extend(extendTo).then(
                () => count('extended', `${owner.name} to ${extendTo}`),
                (error: unknown) => count(`extend: ${(error as Error).constructor.name}`, owner.name),
              );
            }
            if (Math.random() < 0.05) {
              handle.document.edits += 1;
              await handle.document.save().then(
                () => count('saved'),
                (error: unknown) => count(`save: ${(error as Error).constructor.name}`, owner.name),
              );
            }
          }
        } finally {
          live.delete(owner.name);
          await handle.release().then(
            () => count('released', owner.name),
            (error: unknown) => count(`release: ${(error as Error).constructor.name}`, `${owner.name} ${(error as Error).message}`),
          );
        }
      }
    }

    async function faults(): Promise<void> {
      while (Date.now() < stopAt) {
        await sleep(rand(200, 800));
        const victim = pick(owners);
        const kind = rand(0, 5);
        try {
          if (kind === 0) {
            await blockCommands(admin.connection, { appName: victim.app, namespace: `${db.name}.${locksName}`, commands: ['findAndModify'], blockTimeMS: rand(300, 1_500), times: rand(1, 3) });
            count('fault: findAndModify held', victim.name);
          } else if (kind === 1) {
            await blockCommands(admin.connection, { appName: victim.app, namespace: `${db.name}.${locksName}`, commands: ['update'], blockTimeMS: rand(300, 1_500), times: 1 });
            count('fault: update held', victim.name);
          } else if (kind === 2) {
            victim.late.arm(on('findAndModify', locksName), rand(200, 1_300));
            count('fault: late reply', victim.name);
          } else if (kind === 3) {
            const end = performance.now() + rand(300, 1_300);
            while (performance.now() < end) {
              // the whole process stands still
            }
            count('fault: process pause');
          }
        } catch {
          count('fault: could not arm');
        }
      }
      await failPointOff(admin.connection);
    }

    await Promise.all([...owners.map((owner) => work(owner)), faults()]);
    clearInterval(sampler);
    await watcher.db(db.name).collection<{ _id: string }>(locksName).insertOne({ _id: END_OF_RUN });
    const endOfRunSeenInTheStream = await waitUntil(() => endSeen, 60_000);
    await stream.close();
    await collecting;
    await watcher.close();
    expect({ endOfRunSeenInTheStream }).toEqual({ endOfRunSeenInTheStream: true });

    const grants = grantsFrom(events);
    // Property 1 on the server's own history; property 13 for every sample (support/grant-history.ts).
    const serverOverlapsFound = serverOverlaps(grants);
    const beliefOverlaps: string[] = [];
    const violating: Belief[] = [];
    for (const belief of beliefs) {
      const found = beliefViolations(belief, grants);
      beliefOverlaps.push(...found);
      if (found.length > 0) violating.push(belief);
    }
    // The abort events: how late after another owner's grant began (reported, not asserted).
    let worstAbortLateness = 0;
    for (const abort of aborts) {
      const next = grants.find((grant) => grant.owner !== abort.owner && grant.start >= (grants.find((g) => g.token === abort.token)?.start ?? Infinity));
      if (next && abort.at > next.start) worstAbortLateness = Math.max(worstAbortLateness, abort.at - next.start);
    }
    process.stdout.write(
      `lease beliefs: ${grants.length} grants, ${beliefs.length} belief samples, ${aborts.length} aborts (worst abort event ${worstAbortLateness} ms after another's grant), ` +
        `outcomes ${JSON.stringify(Object.fromEntries(outcomes))}\n`,
    );
    if (beliefOverlaps.length > 0 && process.env.MPL_LEASE_BELIEFS_DUMP) {
      const { writeFileSync } = await import('node:fs');
      writeFileSync(
        process.env.MPL_LEASE_BELIEFS_DUMP,
        JSON.stringify({ grants, beliefs: violating, events, log }, null, 1),
      );
    }
    expect(grants.length).toBeGreaterThan(10);
    expect(serverOverlapsFound).toEqual([]);
    expect(beliefOverlaps.slice(0, 5)).toEqual([]);
  },
  RUN_MS + 120_000,
);
