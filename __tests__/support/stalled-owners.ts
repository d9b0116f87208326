/**
 * The cast of the stall tests (reliability/lease-beliefs-under-stalls,
 * reliability/group-lease-beliefs-under-stalls and the exclusion-under-stalls tests): owners with a connection and an appName each (so a
 * fail point can pick one as its victim), whose replies can be made late (support/late-replies.ts),
 * and an admin connection for the fail points; every model stores owners in clear, so the lock
 * collection's change stream names them. Registers its own beforeAll/afterAll (nothing is set up
 * where the server has no fail points).
 */
import { deploymentFacts } from '../conformance/support/server';
import { performance } from 'node:perf_hooks';
import type { Connection } from 'mongoose';
import { blockCommands, failPointOff } from '../plugin/guard/support';
import { connect, sleep, type MonitoredConnection, type testDatabase } from './db';
import { lateReplies, on, type LateReplies } from './late-replies';
import { workItemModel, type WorkItemModel } from './work-item';

export interface Owner {
  name: string;
  app: string;
  conn: MonitoredConnection;
  model: WorkItemModel;
  late: LateReplies;
}

export interface Cast {
  owners: Owner[];
  admin: MonitoredConnection;
  adminModel: WorkItemModel;
}

export function stalledOwners(db: ReturnType<typeof testDatabase>, options: { count: number; appPrefix: string; modelName: string }): Cast {
  const cast = { owners: [] } as unknown as Cast;
  const set = stalledActors(db, {
    kinds: Array.from({ length: options.count }, () => 'owner'),
    appPrefix: options.appPrefix,
    name: (_kind, i) => `owner-${i}`,
    models: (conn) => workItemModel(conn, { ttl: 30_000, ownerStorage: 'plain' }, options.modelName),
    onlyWithFailPoints: true,
  });
  beforeAll(async () => {
    if (!set.admin) return;
    cast.admin = set.admin;
    cast.adminModel = await workItemModel(cast.admin.connection, { ttl: 30_000, ownerStorage: 'plain' }, options.modelName);
    cast.owners = set.actors.map(({ name, app, conn, models, late }) => ({ name, app, conn, model: models, late }));
  }, 60_000);
  return cast;
}

/** One client of a stall test: its own connection and appName (a fail point's victim), its models. */
export interface Actor<K extends string, M> extends FaultVictim {
  name: string;
  kind: K;
  app: string;
  conn: MonitoredConnection;
  models: M;
  late: LateReplies;
}

export interface Actors<K extends string, M> {
  admin: MonitoredConnection;
  actors: Actor<K, M>[];
}

/**
 * An actor per entry of `kinds` (named `${kind}-${i}` unless `name` says otherwise), each with a
 * connection and appName of its own (`${appPrefix}-${i}-${pid}`), its `models`, and late replies
 * it can be given (support/late-replies.ts); and an admin connection for the fail points. Registers
 * its own beforeAll/afterAll: they are set up before the file's tests and closed after, the
 * database dropped. With `onlyWithFailPoints`, nothing is set up where the server has none.
 */
export function stalledActors<K extends string, M>(
  db: ReturnType<typeof testDatabase>,
  options: { kinds: readonly K[]; appPrefix: string; models: (conn: Connection) => Promise<M>; name?: (kind: K, i: number) => string; onlyWithFailPoints?: boolean },
): Actors<K, M> {
  const set = { actors: [] } as unknown as Actors<K, M>;
  beforeAll(async () => {
    if (options.onlyWithFailPoints && !deploymentFacts().failPoints) return;
    set.admin = await connect(db.name);
    for (const [i, kind] of options.kinds.entries()) {
      const app = `${options.appPrefix}-${i}-${process.pid}`;
      const conn = await connect(db.name, { appName: app });
      const models = await options.models(conn.connection);
      set.actors.push({ name: options.name?.(kind, i) ?? `${kind}-${i}`, kind, app, conn, models, late: lateReplies(conn.connection) });
    }
  }, 60_000);
  afterAll(async () => {
    if (!set.admin) return;
    await failPointOff(set.admin.connection).catch(() => undefined);
    for (const actor of set.actors) actor.late.stop();
    await db.drop(set.admin.connection);
    await Promise.all([set.admin.close(), ...set.actors.map((actor) => actor.conn.close())]);
    set.actors = [];
  });
  return set;
}

/** A random integer in [lo, hi). */
export const rand = (lo: number, hi: number): number => lo + Math.floor(Math.random() * (hi - lo));
/** A random element. */
export const pick = <T>(items: readonly T[]): T => items[Math.floor(Math.random() * items.length)]!;

/** A client injectFaults can pick: its appName (failCommand's filter) and its late-reply switch. */
export interface FaultVictim {
  app: string;
  name?: string;
  late: LateReplies;
}

/** What injectFaults does, and on whom (each range [lo, hi) in ms). */
export interface FaultPlan<V extends FaultVictim> {
  admin: Connection;
  victims: readonly V[];
  /** Date.now() at which the faults stop. */
  stopAt: number;
  /** The pause between two faults. */
  gapMs: [number, number];
  /** `database.collection` of the commands the server holds (drawn per fault). */
  blockNamespace: () => string;
  blockCommands: string[];
  blockMs: [number, number];
  /** The collection whose next `update` reply reaches the victim late. */
  lateCollection: string;
  lateMs: [number, number];
  /** Counts a fault by kind (and victim). */
  count: (kind: string, victim?: V) => void;
}

/**
 * Random faults until `stopAt`, the stall tests' common adversary: after each gap, one of four
 * kinds with equal chance: the server holds the victim's commands (failCommand blockConnection,
 * once or twice), the victim's next `update` reply arrives late (support/late-replies.ts), the
 * whole process stands still for 0.3-1.3 s (a busy loop: no timer, no reply is handled), or
 * nothing. Ends with the fail point off.
 */
export async function injectFaults<V extends FaultVictim>(plan: FaultPlan<V>): Promise<void> {
  while (Date.now() < plan.stopAt) {
    await sleep(rand(...plan.gapMs));
    const victim = pick(plan.victims);
    const kind = rand(0, 4);
    try {
      if (kind === 0) {
        await blockCommands(plan.admin, { appName: victim.app, namespace: plan.blockNamespace(), commands: plan.blockCommands, blockTimeMS: rand(...plan.blockMs), times: rand(1, 3) });
        plan.count('fault: commands held by the server', victim);
      } else if (kind === 1) {
        victim.late.arm(on('update', plan.lateCollection), rand(...plan.lateMs));
        plan.count('fault: late reply', victim);
      } else if (kind === 2) {
        const end = performance.now() + rand(300, 1_300);
        while (performance.now() < end) {
          // the whole process stands still
        }
        plan.count('fault: process pause');
      }
    } catch {
      plan.count('fault: could not arm');
    }
  }
  await failPointOff(plan.admin);
}
