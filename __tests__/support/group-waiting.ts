/**
 * Black-box helpers for the attacks on groups that wait (issue 17 item 2): they look only at the
 * lock records the plugin documents (`{ _id, owner, token, expiresAt, ... }`, src/lock-store.ts
 * header; owners in clear with `ownerStorage: 'plain'`) and judge expiry by the server's clock
 * (`$$NOW` in `$expr`), never at fields a particular waiting design adds.
 */
import type { Connection, Types } from 'mongoose';
import { connect, sleep, type MonitoredConnection } from './db';
import { workItemModel, type WorkItemModel } from './work-item';

/** Who holds each of `ids` on the server right now (an unexpired record by the server's clock), by id hex. */
export async function holders(model: WorkItemModel, ids: readonly unknown[]): Promise<Map<string, { owner: string; token: string }>> {
  const records = await model
    .lockModel()
    .collection.find({ _id: { $in: ids as never[] }, token: { $ne: null }, $expr: { $gt: ['$expiresAt', '$$NOW'] } }, { projection: { owner: 1, token: 1 } })
    .toArray();
  return new Map(records.map((r) => [String(r._id), { owner: String(r.owner), token: String(r.token) }]));
}

/** The unexpired records `owner` holds in the model's lock collection (server clock). */
export async function heldCount(model: WorkItemModel, owner: string): Promise<number> {
  return model.lockModel().collection.countDocuments({ owner, token: { $ne: null }, $expr: { $gt: ['$expiresAt', '$$NOW'] } });
}

/**
 * Problems with a group that was just handed out: each document must carry a lock with time left,
 * held on the server by `owner` under the very token the document carries, and what the client
 * counts on (`msLeft`) must not reach past the expiry the server wrote (one clock: the emulator runs
 * on this machine; 2 ms of slack for whole-millisecond dates).
 */
export async function groupProblems(model: WorkItemModel, docs: ReadonlyArray<{ _id: unknown; heldLock(): { token: string; msLeft(): number } | null }>, owner: string): Promise<string[]> {
  const problems: string[] = [];
  const beliefs = docs.map((doc) => {
    const held = doc.heldLock();
    return { id: String(doc._id), token: held?.token, t: Date.now(), m: held ? held.msLeft() : 0 };
  });
  const records = await model
    .lockModel()
    .collection.find({ _id: { $in: docs.map((d) => d._id) as never[] } }, { projection: { owner: 1, token: 1, expiresAt: 1 } })
    .toArray();
  const byId = new Map(records.map((r) => [String(r._id), r]));
  for (const belief of beliefs) {
    const record = byId.get(belief.id);
    if (!belief.token) problems.push(`${belief.id}: handed out without a lock`);
    else if (belief.m <= 0) problems.push(`${belief.id}: handed out with no time left (msLeft ${belief.m})`);
    if (!record) {
      problems.push(`${belief.id}: no lock record on the server`);
      continue;
    }
    if (record.owner !== owner || record.token !== belief.token) problems.push(`${belief.id}: the server grants it to ${String(record.owner)} (${String(record.token)}), the caller ${owner} believes it holds ${String(belief.token)}`);
    const expiresAt = (record.expiresAt as Date | null)?.getTime() ?? 0;
    if (belief.t + belief.m > expiresAt + 2) problems.push(`${belief.id}: counted on until ${Math.round(belief.t + belief.m)}, the server grants until ${expiresAt}`);
  }
  return problems;
}

/** Connections with their own appName each (so a fail point can pick one), closed by `closeAll`. */
export async function appConnections(dbName: string, prefix: string, count: number): Promise<Array<MonitoredConnection & { app: string }>> {
  const out: Array<MonitoredConnection & { app: string }> = [];
  for (let i = 0; i < count; i++) {
    const app = `${prefix}-${i}-${process.pid}`;
    out.push({ ...(await connect(dbName, { appName: app })), app });
  }
  return out;
}

/** Resolves once `conn` has sent `n` commands on `collection` since the call (command monitoring). */
export function commandsSent(conn: MonitoredConnection, collection: string, n: number): Promise<void> {
  const client = conn.connection.getClient();
  let seen = 0;
  return new Promise((resolve) => {
    const listener = (event: { command: Record<string, unknown>; commandName: string }) => {
      if (Object.values(event.command).includes(collection) || event.command[event.commandName] === collection) {
        if (++seen >= n) {
          client.off('commandStarted', listener);
          resolve();
        }
      }
    };
    client.on('commandStarted', listener);
  });
}

/** Settles a promise into `{ ok, value }` / `{ ok: false, error }` with the time it took. */
export async function timed<T>(promise: Promise<T>): Promise<{ ok: true; value: T; ms: number } | { ok: false; error: unknown; ms: number }> {
  const started = performance.now();
  try {
    const value = await promise;
    return { ok: true, value, ms: Math.round(performance.now() - started) };
  } catch (error) {
    return { ok: false, error, ms: Math.round(performance.now() - started) };
  }
}

/** Retries `tryLock`-like `attempt` every `everyMs` until it returns non-null or `timeoutMs` passes. */
export async function retryUntil<T>(attempt: () => Promise<T | null>, timeoutMs: number, everyMs = 100): Promise<{ value: T | null; ms: number; tries: number }> {
  const started = performance.now();
  let tries = 0;
  for (;;) {
    tries++;
    const value = await attempt();
    const ms = Math.round(performance.now() - started);
    if (value !== null || ms >= timeoutMs) return { value, ms, tries };
    await sleep(everyMs);
  }
}

/** Turns the fail point off (best effort). */
export async function failPointOff(connection: Connection): Promise<void> {
  await connection.getClient().db('admin').command({ configureFailPoint: 'failCommand', mode: 'off' }).catch(() => undefined);
}

/** The cast of the waiting-group attacks: G waits, H holds, X probes (one model of `testDatabase`). */
export interface GroupCast {
  /** X's connection; it also arms the fail points (the fail points pick G by its appName). */
  admin: MonitoredConnection;
  gConn: MonitoredConnection & { app: string };
  hConn: MonitoredConnection;
  G: WorkItemModel;
  H: WorkItemModel;
  X: WorkItemModel;
  /** The lock collection's name. */
  locks: string;
}

/**
 * G on a connection with an appName of its own (`${appPrefix}-0-${pid}`), with `gTtl`; H and X (on
 * the admin connection) with 30 s; owners in clear. beforeAll opens them, afterAll turns failCommand
 * off, drops the database and closes the connections.
 */
export function groupCast(db: { name: string; drop(conn: Connection): Promise<void> }, options: { appPrefix: string; modelName: string; gTtl: number }): GroupCast {
  const cast = {} as GroupCast;
  beforeAll(async () => {
    cast.admin = await connect(db.name);
    [cast.gConn] = await appConnections(db.name, options.appPrefix, 1);
    cast.hConn = await connect(db.name);
    cast.G = await workItemModel(cast.gConn.connection, { ttl: options.gTtl, ownerStorage: 'plain' }, options.modelName);
    cast.H = await workItemModel(cast.hConn.connection, { ttl: 30_000, ownerStorage: 'plain' }, options.modelName);
    cast.X = await workItemModel(cast.admin.connection, { ttl: 30_000, ownerStorage: 'plain' }, options.modelName);
    cast.locks = cast.G.lockModel().collection.collectionName;
  });
  afterAll(async () => {
    await failPointOff(cast.admin.connection);
    await db.drop(cast.admin.connection);
    await Promise.all([cast.admin.close(), cast.gConn.close(), cast.hConn.close()]);
  });
  return cast;
}

/** Three new documents of `model`, their ids in canonical (hex) order. */
export async function threeDocuments(model: WorkItemModel): Promise<Types.ObjectId[]> {
  return (await model.insertMany([{ title: 'd0' }, { title: 'd1' }, { title: 'd2' }])).map((d) => d._id).sort((x, y) => x.toHexString().localeCompare(y.toHexString()));
}
