/**
 * Issue 16, item 5: an id is judged by what it serializes to, not by its prototype.
 *
 * `Object.assign(Object.create(Types.ObjectId.prototype), { toBSON: () => ({ $ne: null }) })` passes
 * `instanceof ObjectId` (and Mongoose's ObjectId cast, which returns such a value unchanged), and the
 * driver then sends `{ _id: { $ne: null } }`: `forceUnlock(forged)` released another document's
 * lock. A value whose serialization changes between two reads (a stateful `toBSON`, a getter, a
 * Proxy) could pass one check and reach the server as another value. Every entry point that
 * takes an id must refuse the first kind before sending anything (InvalidLockArgumentError, no
 * command), and send exactly the value it checked for the second (PRODUCT.md properties 7, 11).
 */
import { Schema, Types, mongo } from 'mongoose';
import { InvalidLockArgumentError, lockPlugin, type LockableModel } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('forgedids');
let conn: MonitoredConnection;
let WorkItem: WorkItemModel;
let Mixed: LockableModel<{ _id: unknown; title: string }>;
/** Created first: the document a query such as `{ _id: { $ne: null } }` finds first. */
let first: Types.ObjectId;
let second: Types.ObjectId;
const sent: mongo.Document[] = [];

beforeAll(async () => {
  conn = await connect(db.name);
  conn.connection.getClient().on('commandStarted', (event) => sent.push(event.command));
  WorkItem = await workItemModel(conn.connection);
  first = (await WorkItem.create({ title: 'first' }))._id;
  second = (await WorkItem.create({ title: 'second' }))._id;
  const schema = new Schema<{ _id: unknown; title: string }>({ _id: Schema.Types.Mixed, title: String });
  schema.plugin(lockPlugin);
  Mixed = conn.connection.model<{ _id: unknown; title: string }, LockableModel<{ _id: unknown; title: string }>>('ForgedMixedItem', schema);
  await Mixed.init();
  await Mixed.lockModel().init();
  await Mixed.create({ _id: 'm-1', title: 'mixed' });
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

/** Passes `instanceof ObjectId`, serializes to a query. */
function forgedObjectId(): Types.ObjectId {
  return Object.assign(Object.create(Types.ObjectId.prototype) as Types.ObjectId, { toBSON: () => ({ $ne: null }) });
}

/** Serializes to `id` the first time and to a query every later time. */
function statefulObjectId(id: Types.ObjectId): Types.ObjectId {
  let reads = 0;
  return Object.assign(Object.create(Types.ObjectId.prototype) as Types.ObjectId, { toBSON: () => (reads++ === 0 ? id : { $ne: null }) });
}

const forgeries: [string, () => unknown][] = [
  ['an ObjectId look-alike whose toBSON returns a query', forgedObjectId],
  ['a real ObjectId behind a Proxy that swaps in such a toBSON', () => new Proxy(new Types.ObjectId(), { get: (target, key) => (key === 'toBSON' ? () => ({ $gt: '' }) : Reflect.get(target, key)) })],
  ['an object spoofing _bsontype', () => ({ _bsontype: 'ObjectId', id: Buffer.alloc(12) })],
  ['an ObjectId look-alike whose toBSON returns an array', () => Object.assign(Object.create(Types.ObjectId.prototype), { toBSON: () => [1, 2] })],
  ['an ObjectId look-alike whose toBSON returns null', () => Object.assign(Object.create(Types.ObjectId.prototype), { toBSON: () => null })],
  ['a Proxy whose traps throw', () => new Proxy(new Types.ObjectId(), { get: () => { throw new Error('trap'); } })],
];

async function refusedWithoutCommands(call: () => Promise<unknown>): Promise<InvalidLockArgumentError> {
  conn.resetCommands();
  const error = await call().then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(InvalidLockArgumentError);
  expect(conn.commands).toEqual([]);
  return error as InvalidLockArgumentError;
}

describe.each(forgeries)('%s', (_label, forge) => {
  beforeAll(async () => {
    await WorkItem.lock(second, 'alice');
  });

  const calls: [string, (id: unknown) => Promise<unknown>][] = [
    ['lock', (id) => WorkItem.lock(id as Types.ObjectId, 'mallory')],
    ['tryLock', (id) => WorkItem.tryLock(id as Types.ObjectId, 'mallory')],
    ['acquireLock', (id) => WorkItem.acquireLock(id as Types.ObjectId, 'mallory')],
    ['withLock', (id) => WorkItem.withLock(id as Types.ObjectId, 'mallory', () => 1)],
    ['unlock', (id) => WorkItem.unlock(id as Types.ObjectId, 'alice')],
    ['isLocked', (id) => WorkItem.isLocked(id as Types.ObjectId)],
    ['getLock', (id) => WorkItem.getLock(id as Types.ObjectId)],
    ['forceUnlock', (id) => WorkItem.forceUnlock(id as Types.ObjectId)],
    ['lockStatus', (id) => WorkItem.lockStatus([id as Types.ObjectId])],
    ['lock on a Mixed _id', (id) => Mixed.lock(id as string, 'mallory')],
    ['forceUnlock on a Mixed _id', (id) => Mixed.forceUnlock(id as string)],
  ];

  test.each(calls)('%s refuses it before sending anything', async (_name, call) => {
    const error = await refusedWithoutCommands(() => call(forge()));
    expect(error.argument).toBe('id');
  });

  test("alice's lock on another document is untouched", async () => {
    await WorkItem.forceUnlock(forge() as Types.ObjectId).catch(() => undefined);
    expect(await WorkItem.isLocked(second)).toBe(true);
    expect((await WorkItem.lock(second, 'alice')).heldLock()).not.toBeNull(); // still alice's: a renewal
  });
});

test('a Buffer whose toBSON returns a query is refused as a Mixed _id', async () => {
  const buffer = Object.assign(Buffer.from('m-1'), { toBSON: () => ({ $ne: null }) });
  await refusedWithoutCommands(() => Mixed.lock(buffer as unknown as string, 'mallory'));
  await refusedWithoutCommands(() => Mixed.forceUnlock(buffer as unknown as string));
});

test('an ObjectId look-alike with nothing inside is what it serializes to, or refused', async () => {
  // js-bson 7 (Mongoose 9) writes such a value as the all-zero ObjectId, js-bson 6 (Mongoose 8)
  // refuses to write it: either way the server sees no operator.
  conn.resetCommands();
  const error = await WorkItem.lock(Object.create(Types.ObjectId.prototype) as Types.ObjectId, 'mallory').catch((e: unknown) => e);
  if (error instanceof InvalidLockArgumentError) expect(conn.commands).toEqual([]);
  else expect(error).toMatchObject({ code: 'DOCUMENT_NOT_FOUND', documentId: new Types.ObjectId('000000000000000000000000') });
});

test('a Buffer whose toBSON returns a query, as a Buffer _id: refused, or the document of its bytes exactly', async () => {
  const schema = new Schema<{ _id: Buffer; title: string }>({ _id: Buffer, title: String });
  schema.plugin(lockPlugin);
  const Bytes = conn.connection.model<{ _id: Buffer; title: string }, LockableModel<{ _id: Buffer; title: string }>>('ForgedBufferItem', schema);
  await Bytes.init();
  await Bytes.create({ _id: Buffer.from('other'), title: 'locked by alice' });
  await Bytes.create({ _id: Buffer.from('b-1'), title: 'target' });
  await Bytes.lock(Buffer.from('other'), 'alice');
  const evil = () => Object.assign(Buffer.from('b-1'), { toBSON: () => ({ $ne: null }) });
  // Mongoose casts a Buffer _id to a new Binary of its bytes, which drops the toBSON; either way
  // the server sees no operator, and alice's lock on the other document stays.
  const outcome = await Bytes.lock(evil(), 'mallory').catch((e: unknown) => e);
  if (outcome instanceof InvalidLockArgumentError) expect(outcome.argument).toBe('id');
  else expect(Buffer.from((outcome as { _id: Buffer })._id).toString()).toBe('b-1');
  await Bytes.forceUnlock(evil()).catch(() => undefined);
  expect(await Bytes.isLocked(Buffer.from('other'))).toBe(true);
});

test('a Mongoose document is refused with a message naming its _id', async () => {
  const doc = await WorkItem.findById(first).orFail();
  const error = await refusedWithoutCommands(() => WorkItem.lock(doc as unknown as Types.ObjectId, 'mallory'));
  expect(error.message).toMatch(/doc\._id/);
});

test('an id that serializes differently on each read is sent exactly as first read: the lock and the load are of that document', async () => {
  await WorkItem.forceUnlock(first);
  await WorkItem.forceUnlock(second);
  const id = statefulObjectId(second);
  sent.length = 0;
  const doc = await WorkItem.lock(id, 'bob');
  // The document loaded is `second`, not the first one `{ _id: { $ne: null } }` would find.
  expect(String(doc._id)).toBe(String(second));
  const held = doc.heldLock()!;
  expect(held.documentId).toBeInstanceOf(Types.ObjectId);
  expect(held.documentId).not.toBe(id);
  expect(String(held.documentId)).toBe(String(second));
  // Every command named `second` by equality: none carried an operator where the id belongs.
  const ids = sent.filter((c) => ['findAndModify', 'find'].includes(Object.keys(c)[0]!)).map((c) => ((c.query ?? c.filter) as { _id?: unknown })._id);
  expect(ids.length).toBeGreaterThanOrEqual(2);
  for (const value of ids) expect(String(value)).toBe(String(second));
  expect(await WorkItem.isLocked(first)).toBe(false);
  await doc.unlock();
});

test('listLocks refuses a cursor that decodes to a query', async () => {
  for (const cursor of [
    `c2.${Buffer.from(mongo.BSON.serialize({ v: { $ne: null } })).toString('base64url')}`,
    `c2.${Buffer.from(mongo.BSON.serialize({ v: forgedObjectId() })).toString('base64url')}`,
    `c1.${Buffer.from(JSON.stringify({ id: { $ne: null } }), 'utf8').toString('base64url')}`,
  ]) {
    conn.resetCommands();
    await expect(WorkItem.listLocks({ after: cursor })).rejects.toMatchObject({ code: 'INVALID_OPTION', option: 'after' });
    expect(conn.commands).toEqual([]);
  }
});
