/**
 * A handle with `autoExtend` after the caller extended it itself (`handle.extend(ttl)`).
 * README, Keeping a lock alive: "With autoExtend (default true) it renews when a third of the ttl
 * is left on the lease". LockHandle.extend (src/lock-handle.ts) moves the lease and re-arms the
 * loss timer, but leaves the renewal timer where the acquisition (or the last auto-renewal) put it:
 *
 *  - `handle.extend(300)` on a handle of ttl 3 s: the next renewal is still due ~2 s after the
 *    acquisition, the lease ends after 300 ms, so the handle loses the lock (signal aborted,
 *    lock expired on the server) although it is set to renew and the database answers at once;
 *  - `handle.extend(60_000)`: the renewal still fires ~2 s after the acquisition and extends to
 *    the acquisition's ttl (3 s), cutting the caller's one-minute extension back to 3 s.
 *
 * Runs on a replica set and on a standalone server.
 */
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('renewafterextend');
let conn: MonitoredConnection;
let M: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  M = await workItemModel(conn.connection, { ttl: 30_000 }, 'RenewAfterExtend');
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

test('after handle.extend(shorter), auto-renewal keeps the lock: the handle is not lost while the database answers', async () => {
  const { _id: id } = await M.create({ title: 'shortened, auto-renewed' });
  const handle = await M.acquireLock(id, 'alice', { ttl: 3_000 });
  await handle.extend(300);
  await sleep(1_200);
  expect({ aborted: handle.signal.aborted, locked: await M.isLocked(id) }).toEqual({ aborted: false, locked: true });
  await handle.release().catch(() => undefined);
}, 20_000);

test("after handle.extend(longer), auto-renewal does not cut the caller's extension back to the acquisition's ttl", async () => {
  const { _id: id } = await M.create({ title: 'lengthened, auto-renewed' });
  const handle = await M.acquireLock(id, 'alice', { ttl: 3_000 });
  await handle.extend(60_000);
  const extendedTo = handle.expiresAt.getTime();
  // Past the renewal the acquisition scheduled (2 s in), before the 3 s ttl would run out again.
  await sleep(2_500);
  const info = await M.getLock(id);
  expect(info).not.toBeNull();
  expect(info!.expiresAt.getTime()).toBeGreaterThanOrEqual(extendedTo);
  await handle.release();
}, 20_000);
