/**
 * `doc.heldLock()` hands out a view (src/held-lock.ts, HeldLockView) whose accessors read the
 * acquisition through a symbol-keyed property (ACQUISITION). Commit 4d3ea79 says writes to the view
 * "reach nothing the plugin does" and that it "works through Proxies" (Vue's `reactive()`).
 *
 * 1. The symbol is an own property of the view: `Object.getOwnPropertySymbols(lock)` finds it, and
 *    its value is the plugin's own LockState (state.lock === the state itself), whose fields are
 *    plain writable data properties (`readonly` is TypeScript only). A caller writing
 *    `lock[sym].token` changes the token LockStore.release sends: unlock() reports taken_over
 *    while the server still holds the lock. A caller writing `lock[sym].validUntil` makes the
 *    plugin count on a lease the server never granted.
 * 2. A deep reactive Proxy (Vue 3 baseHandlers `get`: a non-builtin symbol key is tracked and an
 *    object result is wrapped in `reactive()` too) hands `this[ACQUISITION]` back as a Proxy of the
 *    LockState; `ticket()` then reads `this.#ticket` on the Proxy and throws
 *    "Cannot read private member #ticket from an object whose class did not declare it".
 */
import { LockNotHeldError } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('heldlockinternal');
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

/** Whatever the view keeps under its own symbol keys, as a caller can reach it. */
function symbolValues(lock: object): Record<string, unknown>[] {
  return Object.getOwnPropertySymbols(lock).map((s) => (lock as Record<symbol, Record<string, unknown>>)[s]!);
}

function tryWrite(target: Record<string, unknown>, key: string, value: unknown): void {
  try {
    target[key] = value;
  } catch {
    /* a refusal is the fix */
  }
}

test("writing the token through the held lock's symbol-keyed property does not change what unlock() releases", async () => {
  const { _id: id } = await M.create({ title: 'symbol token' });
  const doc = await M.lock(id, 'alice');
  for (const inner of symbolValues(doc.heldLock()!)) tryWrite(inner, 'token', 'not-the-token');
  const outcome = await doc.unlock().then(
    () => 'released',
    (error: unknown) => (error instanceof LockNotHeldError ? `LockNotHeldError ${error.reason}` : String(error)),
  );
  expect({ outcome, lockedOnServer: await M.isLocked(id) }).toEqual({ outcome: 'released', lockedOnServer: false });
});

test("writing validUntil through the held lock's symbol-keyed property does not extend the lease the plugin counts on", async () => {
  const { _id: id } = await M.create({ title: 'symbol lease' });
  const doc = await M.lock(id, 'alice', { ttl: 5_000 });
  for (const inner of symbolValues(doc.heldLock()!)) tryWrite(inner, 'validUntil', Number.MAX_SAFE_INTEGER);
  // The server granted 5 s: the plugin may never count on more than that.
  expect(doc.heldLock()!.msLeft()).toBeLessThanOrEqual(5_000);
  await doc.unlock();
});

/**
 * Vue 3 reactive(): receiver = the Proxy, and every object read (a non-builtin symbol's value too)
 * wrapped again, except what Vue cannot observe: @vue/reactivity's getTargetType answers INVALID for
 * a value with `__v_skip` or that is not extensible (`!Object.isExtensible(value)`), and
 * createReactiveObject then returns the value itself (packages/reactivity/src/reactive.ts).
 */
function deepReactive<T extends object>(target: T, cache = new WeakMap<object, object>()): T {
  const known = cache.get(target);
  if (known) return known as T;
  const proxy = new Proxy(target, {
    get(t, key, receiver) {
      const value = Reflect.get(t, key, receiver) as unknown;
      return value !== null && typeof value === 'object' && !(value instanceof Date) && Object.isExtensible(value) ? deepReactive(value, cache) : value;
    },
  });
  cache.set(target, proxy);
  return proxy;
}

test('the ticket reads through a deep reactive Proxy (Vue 3 reactive) as on the held lock itself', async () => {
  const { _id: id } = await M.create({ title: 'deep reactive' });
  const doc = await M.lock(id, 'alice');
  const lock = doc.heldLock()!;
  let viaProxy: unknown;
  try {
    viaProxy = deepReactive(lock).ticket;
  } catch (error) {
    viaProxy = `threw ${(error as Error).name}: ${(error as Error).message}`;
  }
  expect(viaProxy).toBe(lock.ticket);
  await doc.unlock();
});
