/**
 * A waiter in a process of its own, for the tests of waiters that crash (workers/waiter.ts): started
 * with `lock`/`lockMany` and `wait`, killed with SIGKILL when the test says (no `finally`, no
 * release, no clearing of anything), so whatever it wrote stays until it lapses.
 */
import type { Types } from 'mongoose';
import { connect, sleep, type MonitoredConnection, type testDatabase } from '../../support/db';
import { workItemModel, type WorkItemModel } from '../../support/work-item';
import { killAll, spawnWorker, type Child } from './children';
import type { WaiterConfig } from '../workers/waiter';

/** Starts the child waiting for `ids` (in the test server's `dbName`); resolves once its call is made. */
export async function startWaiter(dbName: string, options: Omit<WaiterConfig, 'uri' | 'dbName' | 'ids' | 'waitMs'> & { ids: Types.ObjectId[]; waitMs?: number }): Promise<Child> {
  const config: WaiterConfig = { ...options, uri: process.env.MONGODB_URI!, dbName, ids: options.ids.map((id) => id.toHexString()), waitMs: options.waitMs ?? 60_000 };
  const child = spawnWorker('waiter.ts', { MPL_WAITER: JSON.stringify(config) }, 90_000);
  const first = await child.nextLine(60_000);
  if (first !== 'started') throw new Error(`the waiter printed ${first}: ${child.stderr()}`);
  return child;
}

/** Kills the child (SIGKILL) and waits for its end. */
export async function kill(child: Child): Promise<void> {
  child.process.kill('SIGKILL');
  await child.exited;
}

/** Waits until `id`'s lock record carries a live reservation (and `also`, when given), up to 30 s. */
export async function untilReserved(model: WorkItemModel, id: Types.ObjectId, child: Child, also: () => Promise<boolean> = async () => true): Promise<void> {
  const deadline = Date.now() + 30_000;
  const reserved = async () => (await model.lockModel().countDocuments({ _id: id, $expr: { $gt: ['$reservedUntil', '$$NOW'] } })) === 1;
  while (!((await reserved()) && (await also()))) {
    if (Date.now() > deadline) throw new Error(`the child did not reserve ${String(id)} within 30 s: ${child.stderr()}`);
    await sleep(50);
  }
}

/**
 * The test's side of a crashed-waiter test: one model of `modelName` (the children's, with the
 * same options) on a connection of the test's own. beforeAll opens it; afterAll kills every child
 * still running, drops the database and closes the connection.
 */
export function waiterTestModel(db: ReturnType<typeof testDatabase>, modelName: string, options: Pick<WaiterConfig, 'ttl' | 'ownerStorage'>): { model: WorkItemModel } {
  const fixture = {} as { model: WorkItemModel; conn: MonitoredConnection };
  beforeAll(async () => {
    fixture.conn = await connect(db.name);
    fixture.model = await workItemModel(fixture.conn.connection, { ttl: options.ttl, ...(options.ownerStorage ? { ownerStorage: options.ownerStorage } : {}) }, modelName);
  });
  afterAll(async () => {
    await killAll();
    await db.drop(fixture.conn.connection);
    await fixture.conn.close();
  });
  return fixture;
}
