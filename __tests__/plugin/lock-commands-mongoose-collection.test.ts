/**
 * The lock call's own commands (acquire, load, release) go through Mongoose's collection, so what
 * it does for every call holds for them: the `debug` option prints them (the connection's and
 * Mongoose's), 'operation-start' / 'operation-end' listeners of the connection hear them, a lock
 * call made before the connection opened is queued until it does (bufferCommands), and a method
 * set on a model's collection object sees them. (Pins what a bypass to the driver's collection,
 * tried on a branch, had to keep.)
 */
import mongoose, { type Connection, type Types } from 'mongoose';
import { testUri } from '../../test-backend/test-env';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, workItemSchema, type WorkItem, type WorkItemModel } from '../support/work-item';

const db = testDatabase('mongoosecoll');
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

/** The [collection, method] of each call Mongoose's collection handled while `fn` ran, as `debug` reports them. */
async function debugged(set: (debug: unknown) => void, fn: () => Promise<unknown>): Promise<string[]> {
  const seen: string[] = [];
  set((collection: string, method: string) => seen.push(`${collection}.${method}`));
  try {
    await fn();
  } finally {
    set(undefined);
  }
  return seen;
}

const cycle = (id: Types.ObjectId) => async () => (await M.lock(id, 'alice')).unlock();
const locks = () => `${M.collection.collectionName}.locks`;

test("Mongoose's debug option prints the acquire, the load and the release (set globally)", async () => {
  const { _id: id } = await M.create({ title: 'debug global' });
  const seen = await debugged((debug) => mongoose.set('debug', debug as boolean), cycle(id));
  expect(seen).toEqual([`${locks()}.findOneAndUpdate`, `${M.collection.collectionName}.findOne`, `${locks()}.updateOne`]);
});

test("the connection's debug option prints them too, and a connection's debug: false silences Mongoose's", async () => {
  const { _id: id } = await M.create({ title: 'debug connection' });
  const seen = await debugged((debug) => conn.connection.set('debug', debug), cycle(id));
  expect(seen).toEqual([`${locks()}.findOneAndUpdate`, `${M.collection.collectionName}.findOne`, `${locks()}.updateOne`]);
  conn.connection.set('debug', false);
  try {
    expect(await debugged((debug) => mongoose.set('debug', debug as boolean), cycle(id))).toEqual([]);
  } finally {
    conn.connection.set('debug', undefined);
  }
});

test("listeners of the connection's operation-start and operation-end hear each command", async () => {
  const { _id: id } = await M.create({ title: 'operation events' });
  const events: string[] = [];
  const start = (event: { collectionName: string; method: string }) => events.push(`start ${event.collectionName}.${event.method}`);
  const end = (event: { collectionName: string; method: string }) => events.push(`end ${event.collectionName}.${event.method}`);
  conn.connection.on('operation-start', start);
  conn.connection.on('operation-end', end);
  try {
    await cycle(id)();
  } finally {
    conn.connection.off('operation-start', start);
    conn.connection.off('operation-end', end);
  }
  const item = M.collection.collectionName;
  expect(events).toEqual([
    `start ${locks()}.findOneAndUpdate`,
    `end ${locks()}.findOneAndUpdate`,
    `start ${item}.findOne`,
    `end ${item}.findOne`,
    `start ${locks()}.updateOne`,
    `end ${locks()}.updateOne`,
  ]);
});

test('a lock call made before its connection opened waits for it (bufferCommands) and takes the lock', async () => {
  const { _id: id } = await M.create({ title: 'before open' });
  const late: Connection = mongoose.createConnection(testUri(), { dbName: db.name });
  try {
    const Late = late.model<WorkItem, WorkItemModel>(M.modelName, workItemSchema({ ttl: 30_000 }), M.collection.collectionName);
    const doc = await Late.lock(id, 'bob');
    expect(doc.heldLock()!.owner).toBe('bob');
    expect(await M.getLock(id)).not.toBeNull();
    await doc.unlock();
    expect(await M.isLocked(id)).toBe(false);
  } finally {
    await late.close();
  }
});

test("a method set on a model's collection object (code observing it) still gets the lock call's commands", async () => {
  const { _id: id } = await M.create({ title: 'observed collections' });
  const seen: string[] = [];
  const observeOn = (collection: object, methods: string[]) => {
    const target = collection as Record<string, (...args: unknown[]) => unknown>;
    for (const method of methods) {
      const original = target[method]!;
      target[method] = function observed(this: unknown, ...args: unknown[]) {
        seen.push(method);
        return original.apply(this, args);
      };
    }
    return () => {
      for (const method of methods) delete target[method];
    };
  };
  const undoLocks = observeOn(M.lockModel().collection, ['findOneAndUpdate', 'updateOne']);
  const undoItems = observeOn(M.collection, ['findOne']);
  try {
    await cycle(id)();
  } finally {
    undoLocks();
    undoItems();
  }
  expect(seen).toEqual(['findOneAndUpdate', 'findOne', 'updateOne']);
});
