/**
 * `doc.heldLock()` hands the caller a plain data object (README, docs/api.md: `{ documentId, owner,
 * token, fence, acquiredAt, expiresAt, ttl, ticket, label, msLeft }`). Applications pass such
 * objects through wrappers that read each field with themselves as the receiver: reactive state
 * (Vue's `reactive()`, MobX's observable proxies: `Reflect.get(target, key, receiver)` with the
 * Proxy as receiver), logging and redaction proxies, and objects that inherit from it
 * (`Object.create(lock)`, an "extended" view). Every field must read the same through them as
 * on the object itself, as on main (the fields' accessors were closures over the acquisition).
 *
 * perf2 builds the held lock with a class whose shared accessors read the instance's private
 * fields (`#state`, `#issued`: src/held-lock.ts, HeldLockView). A private field is found only on
 * the object it was installed on (ECMA-262 PrivateFieldGet: the receiver, not the target), so
 * `ticket` and `expiresAt` read through a Proxy or an heir throw
 * "TypeError: Cannot read private member ... from an object whose class did not declare it".
 */
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('heldlockwrap');
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

/** What reactive libraries do: every read through a Proxy with the Proxy as the receiver (Vue 3 baseHandlers `get`). */
function reactiveLike<T extends object>(target: T): T {
  return new Proxy(target, {
    get: (t, key, receiver) => Reflect.get(t, key, receiver),
  });
}

/** The fields of a held lock as read through `view`. */
function readAll(view: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const key of ['documentId', 'owner', 'token', 'fence', 'acquiredAt', 'expiresAt', 'ttl', 'ticket', 'label']) {
    try {
      out[key] = view[key];
    } catch (error) {
      out[key] = `threw ${(error as Error).name}: ${(error as Error).message}`;
    }
  }
  return out;
}

test('read through a reactive-style Proxy (receiver: the Proxy), every field of the held lock is the one on the object', async () => {
  const { _id: id } = await M.create({ title: 'reactive view' });
  const doc = await M.lock(id, 'alice', { label: 'Alice' });
  const lock = doc.heldLock()!;
  const direct = readAll(lock as unknown as Record<string, unknown>);
  const viaProxy = readAll(reactiveLike(lock) as unknown as Record<string, unknown>);
  expect(viaProxy).toEqual(direct);
  // A ticket read through the wrapper continues the acquisition like the one read directly.
  const resumed = await M.lock(id, 'alice', { resume: viaProxy.ticket as string });
  expect(resumed.heldLock()!.token).toBe(lock.token);
  await resumed.unlock();
});

test('read through an object that inherits from the held lock (Object.create), every field is the one on the object', async () => {
  const { _id: id } = await M.create({ title: 'inherited view' });
  const doc = await M.lock(id, 'alice');
  const lock = doc.heldLock()!;
  const direct = readAll(lock as unknown as Record<string, unknown>);
  const heir = Object.create(lock) as Record<string, unknown>;
  expect(readAll(heir)).toEqual(direct);
  await doc.unlock();
});

test('a reactive-style Proxy of the held lock still sees an extension (expiresAt is the shared lease)', async () => {
  const { _id: id } = await M.create({ title: 'reactive extension' });
  const doc = await M.lock(id, 'alice', { ttl: 5_000 });
  const view = reactiveLike(doc.heldLock()!);
  const extended = await doc.extendLock(60_000);
  let seen: unknown;
  try {
    seen = view.expiresAt;
  } catch (error) {
    seen = `threw ${(error as Error).name}`;
  }
  expect(seen).toEqual(extended);
  await doc.unlock();
});
