/**
 * The cast of the belief tests (reliability/lease-beliefs-under-stalls,
 * reliability/group-lease-beliefs-under-stalls): owners with a connection and an appName each (so a
 * fail point can pick one as its victim), whose replies can be made late (support/late-replies.ts),
 * and an admin connection for the fail points; every model stores owners in clear, so the lock
 * collection's change stream names them. Registers its own beforeAll/afterAll (nothing is set up
 * where the server has no fail points).
 */
import { deploymentFacts } from '../conformance/support/server';
import { failPointOff } from '../plugin/guard/support';
import { connect, type MonitoredConnection, type testDatabase } from './db';
import { lateReplies, type LateReplies } from './late-replies';
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
  beforeAll(async () => {
    if (!deploymentFacts().failPoints) return;
    cast.admin = await connect(db.name);
    cast.adminModel = await workItemModel(cast.admin.connection, { ttl: 30_000, ownerStorage: 'plain' }, options.modelName);
    for (let i = 0; i < options.count; i++) {
      const app = `${options.appPrefix}-${i}-${process.pid}`;
      const conn = await connect(db.name, { appName: app });
      const model = await workItemModel(conn.connection, { ttl: 30_000, ownerStorage: 'plain' }, options.modelName);
      cast.owners.push({ name: `owner-${i}`, app, conn, model, late: lateReplies(conn.connection) });
    }
  }, 60_000);
  afterAll(async () => {
    if (!cast.admin) return;
    await failPointOff(cast.admin.connection).catch(() => undefined);
    for (const owner of cast.owners) owner.late.stop();
    await db.drop(cast.admin.connection);
    await Promise.all([cast.admin.close(), ...cast.owners.map((owner) => owner.conn.close())]);
    cast.owners = [];
  });
  return cast;
}

/** A random integer in [lo, hi). */
export const rand = (lo: number, hi: number): number => lo + Math.floor(Math.random() * (hi - lo));
/** A random element. */
export const pick = <T>(items: readonly T[]): T => items[Math.floor(Math.random() * items.length)]!;
