/**
 * `Model.lockStatus(ids)` must judge the ids array by its elements, read once, and send only the
 * ids it cast (PRODUCT.md properties 7 and 11).
 *
 * plugin.ts calls `list.map((id) => castId(this, id))` on the caller's own array object, after
 * validateStatusIds checked `Array.isArray(ids)` and `ids.length` (status-arguments.ts). So:
 *  - an array with its own `map` (or an Array subclass overriding it) decides what is sent: its
 *    result goes to `{ _id: { $in: <result> } }` (LockStore.statusOf) without any cast, so a
 *    RegExp is evaluated by the server as a pattern, and a forged ObjectId reaches the server;
 *  - a Proxy whose `length` grows after the check is read again by `map`, past MAX_STATUS_IDS;
 *  - a sparse array (a hole where an id belongs) fails with a raw TypeError, not a typed error.
 * Reading the elements once into a fresh array (`Array.from`, `Array.prototype.slice.call`)
 * before any check closes all of these.
 */
import { Types, mongo } from 'mongoose';
import { InvalidLockArgumentError, LockError, MAX_STATUS_IDS } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('statusidsonce');
let conn: MonitoredConnection;
let WorkItem: WorkItemModel;
let real: Types.ObjectId;
/** Every `find` on a lock collection since the last reset. */
const finds: mongo.Document[] = [];

beforeAll(async () => {
  conn = await connect(db.name);
  conn.connection.getClient().on('commandStarted', (event) => {
    if (event.commandName === 'find' && String(event.command.find).endsWith('.locks')) finds.push(event.command);
  });
  WorkItem = await workItemModel(conn.connection);
  real = (await WorkItem.create({ title: 'real' }))._id;
  await WorkItem.lock(real, 'alice');
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

/**
 * What a value becomes on the wire, as Extended JSON: js-bson calls a value's own toBSON, so a
 * forged ObjectId shows here as the query it serializes to (and never reaches Jest's printer,
 * which cannot print it under js-bson 6).
 */
function onTheWire(value: unknown): string {
  try {
    const decoded = mongo.BSON.deserialize(mongo.BSON.serialize({ v: value } as mongo.Document)) as { v: unknown };
    return mongo.BSON.EJSON.stringify(decoded.v as mongo.Document, { relaxed: false });
  } catch (error) {
    return `unserializable (${(error as Error).message})`;
  }
}

/** The `$in` lists of the lock-collection finds sent by `call` (as sent), or its error. */
async function sentIds(call: () => Promise<unknown>): Promise<{ result?: unknown; error?: unknown; inLists: string[][] }> {
  finds.length = 0;
  const out: { result?: unknown; error?: unknown } = {};
  await call().then(
    (result) => (out.result = result),
    (error: unknown) => (out.error = error),
  );
  const inLists = finds.map((command) => (((command.filter as { _id?: { $in?: unknown[] } })._id?.$in ?? []) as unknown[]).map(onTheWire));
  return { ...out, inLists };
}

/** Passes `instanceof ObjectId`, serializes to a query. */
function forged(): Types.ObjectId {
  return Object.assign(Object.create(Types.ObjectId.prototype) as Types.ObjectId, { toBSON: () => ({ $ne: null }) });
}

test('an ids array with its own map() cannot send a RegExp to be evaluated by the server', async () => {
  const ids: Types.ObjectId[] = [real];
  Object.defineProperty(ids, 'map', { value: () => [/./] });
  const { error, inLists } = await sentIds(() => WorkItem.lockStatus(ids));
  // Either refused, or the array's real element was cast and sent; never the RegExp.
  for (const list of inLists) for (const value of list) expect(value).not.toMatch(/\$regularExpression/);
  if (error === undefined) expect(inLists).toEqual([[onTheWire(real)]]);
  else expect(error).toBeInstanceOf(InvalidLockArgumentError);
});

test('an Array subclass overriding map() cannot slip a forged ObjectId past the cast', async () => {
  class Ids extends Array<Types.ObjectId> {
    override map<U>(): U[] {
      return [forged()] as unknown as U[];
    }
  }
  const ids = Ids.from([real]) as Ids;
  const { result, error, inLists } = await sentIds(() => WorkItem.lockStatus(ids));
  // Nothing reached the server but the real id (cast): no forged value, no server error.
  if (error === undefined) {
    expect(inLists).toEqual([[onTheWire(real)]]);
    expect(onTheWire((result as { documentId?: unknown }[])[0]?.documentId)).toBe(onTheWire(real));
  } else {
    expect(error).toBeInstanceOf(InvalidLockArgumentError);
    expect(inLists).toEqual([]);
  }
});

test(`a Proxy array cannot grow past MAX_STATUS_IDS (${MAX_STATUS_IDS}) after the length check`, async () => {
  let reads = 0;
  const many = Array.from({ length: MAX_STATUS_IDS * 3 }, () => new Types.ObjectId());
  const ids = new Proxy([real], {
    get(target, key, receiver) {
      if (key === 'length') return reads++ === 0 ? 1 : many.length; // 1 for the check, 3000 afterwards
      if (typeof key === 'string' && /^\d+$/.test(key)) return many[Number(key)];
      return Reflect.get(target, key, receiver) as unknown;
    },
    has: (_target, key) => typeof key === 'string' && /^\d+$/.test(key) && Number(key) < many.length,
  });
  const { error, inLists } = await sentIds(() => WorkItem.lockStatus(ids));
  const sent = inLists.reduce((n, list) => n + list.length, 0);
  expect(sent).toBeLessThanOrEqual(MAX_STATUS_IDS);
  if (error !== undefined) expect(error).toBeInstanceOf(InvalidLockArgumentError);
});

test('a hole in the ids array is refused with a typed error, before anything is sent', async () => {
  // eslint-disable-next-line no-sparse-arrays
  const ids = [, real] as unknown as Types.ObjectId[];
  conn.resetCommands();
  const error = await WorkItem.lockStatus(ids).catch((e: unknown) => e);
  expect(error).toBeInstanceOf(LockError);
  expect(error).toBeInstanceOf(InvalidLockArgumentError);
  expect(conn.commands).toEqual([]);
});
