/**
 * Every array the public API takes is judged by its elements, each read once, and only what was
 * cast is sent (PRODUCT.md properties 7 and 11): `lockMany` / `acquireLocks` / `withLocks` ids,
 * `lockAll` targets (and each [Model, id] pair), `unlockMany` / `unlockAll` documents.
 *
 * The group calls used the caller's own array object after `Array.isArray` and a `length` check
 * (group-arguments.ts validateIdList, castIdList `ids.map`, group-statics.ts membersOf
 * `list.map`), so its own `map` decided what was sent as the lock records' `_id`s (a RegExp, the
 * server evaluates it as a pattern), a Proxy's `length` could grow past MAX_LOCK_MANY_IDS after
 * the check, and the documents were loaded by the caller's object again (`rawId`), serialized a
 * second time (a stateful `toBSON` could then send a query). Now each array is copied once
 * (readArgumentArray, src/arguments.ts) and the document is loaded by the value its one
 * serialization decoded to (CastId.loadId).
 */
import { Types, mongo } from 'mongoose';
import { InvalidLockArgumentError, MAX_LOCK_MANY_IDS, lockAll, unlockAll } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('idarraysonce');
let conn: MonitoredConnection;
let WorkItem: WorkItemModel;
let a: Types.ObjectId;
let b: Types.ObjectId;
/** Every command that names `_id`s (update statements' filters, finds' filters), as sent. */
const sent: mongo.Document[] = [];

beforeAll(async () => {
  conn = await connect(db.name);
  conn.connection.getClient().on('commandStarted', (event) => {
    if (['update', 'find'].includes(event.commandName)) sent.push(event.command);
  });
  WorkItem = await workItemModel(conn.connection);
  a = (await WorkItem.create({ title: 'a' }))._id;
  b = (await WorkItem.create({ title: 'b' }))._id;
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

/** Every value compared with `_id` in the commands sent since the last reset, as Extended JSON on the wire. */
function idsOnTheWire(): string[] {
  const out: string[] = [];
  const visit = (filter: unknown) => {
    const id = (filter as { _id?: unknown } | undefined)?._id;
    if (id === undefined) return;
    const values = id !== null && typeof id === 'object' && '$in' in id ? (id as { $in: unknown[] }).$in : [id];
    for (const value of values) out.push(mongo.BSON.EJSON.stringify(mongo.BSON.deserialize(mongo.BSON.serialize({ v: value })).v as mongo.Document, { relaxed: false }));
  };
  for (const command of sent) {
    visit(command.filter);
    for (const statement of (command.updates as { q: unknown }[] | undefined) ?? []) visit(statement.q);
  }
  return out;
}

const wire = (id: unknown) => mongo.BSON.EJSON.stringify(id as mongo.Document, { relaxed: false });

/** Passes `instanceof ObjectId`; serializes to `first` once, then to a RegExp (a pattern the server evaluates). */
function stateful(first: Types.ObjectId): Types.ObjectId {
  let reads = 0;
  return Object.assign(Object.create(Types.ObjectId.prototype) as Types.ObjectId, { toBSON: () => (reads++ === 0 ? first : /./) });
}

test("lockMany's ids with their own map() cannot send a RegExp as a lock record's _id", async () => {
  const ids: Types.ObjectId[] = [a];
  Object.defineProperty(ids, 'map', { value: () => [/./] });
  sent.length = 0;
  const docs = await WorkItem.lockMany(ids, 'alice');
  expect(docs.map((doc) => String(doc._id))).toEqual([String(a)]);
  for (const value of idsOnTheWire()) expect(value).not.toMatch(/regularExpression/);
  expect(new Set(idsOnTheWire())).toEqual(new Set([wire(a)]));
  await WorkItem.unlockMany(docs);
});

test('an Array subclass overriding map() is read by its elements', async () => {
  class Ids extends Array<Types.ObjectId> {
    override map<U>(): U[] {
      return [/./] as unknown as U[];
    }
  }
  sent.length = 0;
  const docs = await WorkItem.lockMany(Ids.from([a, b]) as Ids, 'alice');
  expect(docs.map((doc) => String(doc._id))).toEqual([String(a), String(b)]);
  expect(new Set(idsOnTheWire())).toEqual(new Set([wire(a), wire(b)]));
  await WorkItem.unlockMany(docs);
});

test(`a Proxy array cannot grow past MAX_LOCK_MANY_IDS (${MAX_LOCK_MANY_IDS}) after the length check`, async () => {
  let reads = 0;
  const many = Array.from({ length: MAX_LOCK_MANY_IDS * 3 }, () => new Types.ObjectId());
  const ids = new Proxy([a], {
    get(target, key, receiver) {
      if (key === 'length') return reads++ === 0 ? 1 : many.length;
      if (typeof key === 'string' && /^\d+$/.test(key)) return Number(key) === 0 ? a : many[Number(key)];
      return Reflect.get(target, key, receiver) as unknown;
    },
  });
  sent.length = 0;
  const docs = await WorkItem.lockMany(ids, 'alice');
  expect(docs).toHaveLength(1);
  expect(reads).toBe(1);
  expect(new Set(idsOnTheWire())).toEqual(new Set([wire(a)]));
  await WorkItem.unlockMany(docs);
});

test('the documents are loaded by the value that was checked, never by the caller object serialized again', async () => {
  sent.length = 0;
  const docs = await WorkItem.lockMany([stateful(a)], 'alice');
  expect(docs.map((doc) => String(doc._id))).toEqual([String(a)]);
  for (const value of idsOnTheWire()) expect(value).not.toMatch(/regularExpression/);
  await WorkItem.unlockMany(docs);

  sent.length = 0;
  const [doc] = await lockAll([[WorkItem, stateful(b)]], 'alice');
  expect(String(doc._id)).toBe(String(b));
  for (const value of idsOnTheWire()) expect(value).not.toMatch(/regularExpression/);
  await unlockAll([doc]);
});

test('a hole in lockMany ids is refused with a typed error before anything is sent', async () => {
  // eslint-disable-next-line no-sparse-arrays
  const ids = [a, , b] as unknown as Types.ObjectId[];
  conn.resetCommands();
  const error = await WorkItem.lockMany(ids, 'alice').catch((e: unknown) => e);
  expect(error).toBeInstanceOf(InvalidLockArgumentError);
  expect((error as InvalidLockArgumentError).argument).toBe('ids[1]');
  expect(conn.commands).toEqual([]);
});

test('lockAll reads its targets and each pair once', async () => {
  let pairReads = 0;
  const pair = new Proxy([WorkItem, a] as const, {
    get(target, key, receiver) {
      if (key === '0') pairReads++;
      // The model the first time, something else afterwards.
      if (key === '0' && pairReads > 1) return { lockMany: () => Promise.resolve([]) };
      return Reflect.get(target, key, receiver) as unknown;
    },
  });
  const targets = [pair] as unknown as [[WorkItemModel, Types.ObjectId]];
  Object.defineProperty(targets, 'map', { value: () => [] });
  const [doc] = await lockAll(targets, 'alice');
  expect(String(doc._id)).toBe(String(a));
  expect(pairReads).toBe(1);
  await unlockAll([doc]);
});

test("unlockMany / unlockAll read their documents once: an own forEach cannot skip the check", async () => {
  const docs = await WorkItem.lockMany([a], 'alice');
  const list: unknown[] = [...docs, { not: 'a document' }];
  Object.defineProperty(list, 'forEach', { value: () => undefined });
  conn.resetCommands();
  await expect(WorkItem.unlockMany(list as never)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', argument: 'docs[1]' });
  await expect(unlockAll(list as never)).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', argument: 'docs[1]' });
  expect(conn.commands).toEqual([]);
  await WorkItem.unlockMany(docs);
});
