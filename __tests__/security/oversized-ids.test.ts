/**
 * Issue 16, item 7: an id mongod cannot store as a lock record's `_id` is refused before anything
 * is sent. A 17 MB string id used to reach the driver, which failed with `RangeError
 * (ERR_OUT_OF_RANGE)` after the command had been started. The bound is mongod's: a lock record
 * holds the id, and a document may be at most BSONObjMaxUserSize = 16 MiB
 * (src/mongo/bson/util/builder.h; an upsert beyond it fails with 17420, UpsertStage in
 * src/mongo/db/exec/upsert_stage.cpp). The `_id` index sets no lower bound since 4.2 (SERVER-36278).
 * `lockStatus` answers in one batch, which mongod fills with at most 16 MiB of documents
 * (src/mongo/db/query/find_common.cpp), so its ids together are bounded the same way.
 */
import { Schema, Types, mongo } from 'mongoose';
import { InvalidLockArgumentError, LockTargetNotFoundError, MAX_ID_BYTES, lockPlugin, type LockableModel } from '../../src';
import { LOCK_RECORD_RESERVE_BYTES, MAX_DOCUMENT_BYTES } from '../../src/id-value';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('bigids');
let conn: MonitoredConnection;
let WorkItem: WorkItemModel;
let Strings: LockableModel<{ _id: string; title: string }>;
let Buffers: LockableModel<{ _id: Buffer; title: string }>;
let Mixed: LockableModel<{ _id: unknown; title: string }>;

const huge = 'x'.repeat(17 * 1024 * 1024);

function model<T>(name: string, idType: typeof String | typeof Buffer | typeof Schema.Types.Mixed): LockableModel<T> {
  const schema = new Schema({ _id: idType, title: String });
  schema.plugin(lockPlugin);
  return conn.connection.model(name, schema) as unknown as LockableModel<T>;
}

beforeAll(async () => {
  conn = await connect(db.name);
  WorkItem = await workItemModel(conn.connection);
  Strings = model('BigStringIdItem', String);
  Buffers = model('BigBufferIdItem', Buffer);
  Mixed = model('BigMixedIdItem', Schema.Types.Mixed);
  for (const m of [Strings, Buffers, Mixed] as unknown as WorkItemModel[]) {
    await m.init();
    await m.lockModel().init();
  }
  await Strings.create({ _id: 'small', title: 'small' });
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

async function refusedWithoutCommands(call: () => Promise<unknown>, argument = 'id'): Promise<InvalidLockArgumentError> {
  conn.resetCommands();
  const error = await call().then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(InvalidLockArgumentError);
  expect((error as InvalidLockArgumentError).argument).toBe(argument);
  expect(conn.commands).toEqual([]);
  return error as InvalidLockArgumentError;
}

const entryPoints: [string, (id: unknown) => Promise<unknown>][] = [
  ['lock', (id) => Strings.lock(id as string, 'alice')],
  ['tryLock', (id) => Strings.tryLock(id as string, 'alice')],
  ['acquireLock', (id) => Strings.acquireLock(id as string, 'alice')],
  ['withLock', (id) => Strings.withLock(id as string, 'alice', () => 1)],
  ['unlock', (id) => Strings.unlock(id as string, 'alice')],
  ['isLocked', (id) => Strings.isLocked(id as string)],
  ['getLock', (id) => Strings.getLock(id as string)],
  ['forceUnlock', (id) => Strings.forceUnlock(id as string)],
  ['lockStatus', (id) => Strings.lockStatus(['small', id as string])],
  ['lock (Mixed _id)', (id) => Mixed.lock(id as string, 'alice')],
  ['lock (ObjectId _id)', (id) => WorkItem.lock(id as Types.ObjectId, 'alice')],
];

describe('a 17 MB string id', () => {
  test.each(entryPoints)('%s refuses it before sending anything, saying why', async (_name, call) => {
    const error = await refusedWithoutCommands(() => call(huge));
    expect(error.message).toMatch(/16 MiB/);
    expect(error.message).toContain(String(MAX_ID_BYTES));
  });
});

test('a 17 MB Buffer id is refused before sending anything (Buffer and Mixed _id)', async () => {
  const bytes = Buffer.alloc(17 * 1024 * 1024, 1);
  await refusedWithoutCommands(() => Buffers.lock(bytes, 'alice'));
  await refusedWithoutCommands(() => Mixed.forceUnlock(bytes as unknown as string));
});

test('the bound is exact: one byte more than MAX_ID_BYTES is refused', async () => {
  // A string's BSON value is 4 (length) + its UTF-8 bytes + 1 (terminator).
  const error = await refusedWithoutCommands(() => Strings.getLock('y'.repeat(MAX_ID_BYTES - 4)));
  expect(error.message).toContain(`${MAX_ID_BYTES + 1} bytes`);
});

test('the largest id accepted makes a lock record mongod can store', () => {
  // Every other field at its largest: a plain owner of 512 three-byte characters, a label of 100,
  // a token and a claim (22 characters), the fence as a double, four dates.
  const record = {
    _id: 'z'.repeat(MAX_ID_BYTES - 5),
    owner: '\u20ac'.repeat(512),
    token: 't'.repeat(22),
    fence: 1.5e15,
    acquiredAt: new Date(),
    expiresAt: new Date(),
    label: '\u20ac'.repeat(100),
    lastWriteAt: new Date(),
    claim: 'c'.repeat(22),
  };
  const size = mongo.BSON.calculateObjectSize(record);
  expect(size).toBeLessThanOrEqual(MAX_DOCUMENT_BYTES);
  expect(MAX_DOCUMENT_BYTES - size).toBeLessThan(LOCK_RECORD_RESERVE_BYTES); // the reserve is not wasteful either
});

test('a large id within the bound (1 MiB, far above the index key limit mongod had before 4.2) locks and unlocks', async () => {
  const id = 'w'.repeat(1024 * 1024);
  await Strings.create({ _id: id, title: 'large' });
  const doc = await Strings.lock(id, 'alice');
  expect(doc.heldLock()!.documentId).toBe(id);
  expect(await Strings.isLocked(id)).toBe(true);
  await doc.unlock();
  await expect(Strings.lock('w'.repeat(1024 * 1024 + 1), 'alice')).rejects.toBeInstanceOf(LockTargetNotFoundError);
}, 60_000);

test('lockStatus refuses ids that together would not fit in its one find command', async () => {
  const nine = (c: string) => c.repeat(9 * 1024 * 1024);
  const error = await refusedWithoutCommands(() => Strings.lockStatus([nine('a'), nine('b')]), 'ids');
  expect(error.message).toMatch(/one find command/);
});

const notIds: [string, unknown][] = [
  ['Infinity', Infinity],
  ['-Infinity', -Infinity],
  ['an invalid Date', new Date(Number.NaN)],
  ['a boolean', true],
  ['an empty string', ''],
  ['a symbol', Symbol('id')],
];

test.each(notIds)('%s is refused before sending anything (Mixed _id)', async (_label, id) => {
  await refusedWithoutCommands(() => Mixed.lock(id as string, 'alice'));
});
