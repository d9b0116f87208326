/**
 * `doc.heldLock()` hands the caller an object whose fields are documented read-only (`HeldLock`:
 * `readonly documentId`, `token`, `ttl`, ...; docs/api.md). The plugin must not take its own
 * decisions from what the caller may then write on that object: the release, the guard's holder
 * check and the loss reason must stay those of the acquisition. Either the assignment is refused
 * (a TypeError in strict mode, as for `ticket`) or it changes nothing the plugin does.
 *
 * On perf2 (and before it) the object handed out IS the state's `lock` (src/held-lock.ts,
 * HeldLockView; plugin.ts `heldLock` returns `state.lock`), its data fields are writable, and
 * LockStore.release / verify read `state.lock.documentId` and `state.lock.token`
 * (src/lock-store.ts): after `doc.heldLock().token = 'x'`, `doc.unlock()` reports the lock
 * `taken_over` while the server still holds it for this owner, and a `save()` is refused as a
 * takeover. (held-lock-fields.test.ts pins that the ticket ignores such writes; the release does not.)
 */
import { LockNotHeldError } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('heldlockstate');
let conn: MonitoredConnection;
let M: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  M = await workItemModel(conn.connection, { ttl: 30_000 });
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

/** Writes `value` to `key` of the held lock as a JavaScript caller would; a refusal (TypeError) is fine. */
function tryOverwrite(lock: object, key: string, value: unknown): void {
  try {
    (lock as Record<string, unknown>)[key] = value;
  } catch (error) {
    expect(error).toBeInstanceOf(TypeError);
  }
}

test('after the caller wrote to heldLock().token, doc.unlock() still releases this acquisition', async () => {
  const { _id: id } = await M.create({ title: 'token overwritten' });
  const doc = await M.lock(id, 'alice');
  tryOverwrite(doc.heldLock()!, 'token', 'not-the-token');
  const outcome = await doc.unlock().then(
    () => 'released',
    (error: unknown) => (error instanceof LockNotHeldError ? `LockNotHeldError ${error.reason}` : String(error)),
  );
  expect({ outcome, lockedOnServer: await M.isLocked(id) }).toEqual({ outcome: 'released', lockedOnServer: false });
});

test("after the caller wrote another document's id to heldLock().documentId, save() writes as the holder and unlock() releases this document", async () => {
  const { _id: id } = await M.create({ title: 'id overwritten' });
  const { _id: other } = await M.create({ title: 'the other' });
  const doc = await M.lock(id, 'alice');
  tryOverwrite(doc.heldLock()!, 'documentId', other);
  doc.title = 'saved by the holder';
  const saved = await doc.save().then(
    () => 'saved',
    (error: unknown) => `${(error as Error).name}: ${(error as Error).message}`,
  );
  expect(saved).toBe('saved');
  await doc.unlock();
  expect(await M.isLocked(id)).toBe(false);
  expect(await M.isLocked(other)).toBe(false);
});

test("after the caller wrote heldLock().expiresAt, the acquisition's expiry (seen by its other instances) is still the server's", async () => {
  const { _id: id } = await M.create({ title: 'expiry overwritten' });
  const doc = await M.lock(id, 'alice', { ttl: 30_000 });
  const lock = doc.heldLock()!;
  // Another instance of the acquisition (a resume in this process: one shared lease).
  const other = await M.lock(id, 'alice', { resume: lock.ticket, ttl: 30_000 });
  const serverExpiry = other.heldLock()!.expiresAt.getTime();
  tryOverwrite(lock, 'expiresAt', new Date(0));
  expect(doc.heldLock()).toBe(lock); // the caller's object keeps what the caller wrote
  expect(other.heldLock()!.expiresAt.getTime()).toBe(serverExpiry);
  expect(doc.heldLock()!.msLeft()).toBeGreaterThan(20_000);
  await other.unlock();
  expect(doc.heldLock()!.msLeft()).toBe(0);
});
