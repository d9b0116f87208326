/**
 * Issue 16, item 1: in check mode (`transactions: 'never'`, and every write on a standalone
 * server) an upsert whose found target stops matching before the write reaches it must not
 * insert a stray document (PRODUCT.md property 10: writes nobody's lock concerns behave as without
 * the plugin, also under contention).
 *
 * X and Y match the filter; the guard's search finds X; a fail point holds the guard's write 1 s
 * while X is changed so that it no longer matches. Without the plugin the upsert, run at any
 * instant of the call, updates X (before the change) or Y (after it), and inserts nothing. The
 * guard used to send the upsert narrowed to X (`_id: { $gte: X, $lte: X }`): it matched nothing
 * and INSERTED a third document, leaving Y untouched, an outcome no serial execution of the
 * unguarded upsert produces. Now what was found is written without `upsert`, and a write that
 * matched nothing searches again (write-guard.ts, checkThenWrite).
 *
 * The race is real: the test asserts that the guard's first write was the one narrowed to X (so
 * X's change landed between the guard's search and its write). On a replica set the same race
 * runs against `transactions: 'auto'` too (the guard's own transaction: the write conflicts and
 * the transaction is retried) and against the unguarded driver (the expectation itself).
 */
import { mongo } from 'mongoose';
import { deploymentFacts, describeIf } from '../../conformance/support/server';
import { connect, testDatabase, type MonitoredConnection } from '../../support/db';
import { workItemModel, type WorkItemModel } from '../../support/work-item';
import { usesPrivateServer } from '../../support/private-server';
import { blockCommands, failPointOff, hasTransactions, outcome, rawCollection } from './support';

// This file configures failCommand: on a server of its own where it can (support/private-server.ts).
usesPrivateServer();

const db = testDatabase('checkupsertrace');
const APP_A = `mpl-checkupsert-race-${process.pid}`;
let connA: MonitoredConnection;
let other: MonitoredConnection;
let Never: WorkItemModel;
let Auto: WorkItemModel;
let transactions = false;
/** The filters of the writes A's client sent on the model's collection, in order. */
const writes: { command: string; filter: unknown; upsert: unknown }[] = [];

describeIf(deploymentFacts().failPoints, 'needs fail points')('an upsert whose found target stops matching before the write', () => {
  beforeAll(async () => {
    connA = await connect(db.name, { appName: APP_A, retryWrites: false });
    other = await connect(db.name);
    Never = await workItemModel(connA.connection, { ttl: 30_000, transactions: 'never' }, 'RaceNever');
    Auto = await workItemModel(connA.connection, { ttl: 30_000 }, 'RaceAuto');
    transactions = await hasTransactions(other.connection);
    connA.connection.getClient().on('commandStarted', (event) => {
      const c = event.command as Record<string, unknown>;
      if (event.commandName === 'update' && typeof c.update === 'string' && !c.update.endsWith('.locks')) {
        for (const s of c.updates as { q: unknown; upsert?: unknown }[]) writes.push({ command: 'update', filter: s.q, upsert: s.upsert });
      }
      if (event.commandName === 'findAndModify' && typeof c.findAndModify === 'string' && !c.findAndModify.endsWith('.locks')) {
        writes.push({ command: 'findAndModify', filter: c.query, upsert: c.upsert });
      }
    });
  });

  afterAll(async () => {
    await failPointOff(other.connection);
    await db.drop(other.connection);
    await Promise.all([connA.close(), other.close()]);
  });

  beforeEach(() => {
    writes.length = 0;
  });

  afterEach(async () => {
    await failPointOff(other.connection);
  });

  /** Runs `write` with A's next `command` on `collection` held 1 s, and `meanwhile` while it is held. */
  async function raced<T>(collection: string, command: string, write: () => Promise<T>, meanwhile: () => Promise<unknown>) {
    const reached = new Promise<void>((resolve) => {
      const listener = (event: { commandName: string; command: Record<string, unknown> }) => {
        if (event.commandName === command && event.command[command] === collection) {
          connA.connection.getClient().off('commandStarted', listener);
          resolve();
        }
      };
      connA.connection.getClient().on('commandStarted', listener);
    });
    await blockCommands(other.connection, { appName: APP_A, namespace: `${db.name}.${collection}`, commands: [command], blockTimeMS: 1_000 });
    const result = outcome(write());
    await reached;
    await meanwhile();
    return result;
  }

  /** X and Y both match `{ title, status: 'open' }`; X is the older (the first in `_id` and natural order). */
  async function twoMatching(model: WorkItemModel, title: string) {
    const raw = rawCollection(model);
    await raw.deleteMany({});
    const x = new mongo.ObjectId();
    const y = new mongo.ObjectId();
    await raw.insertOne({ _id: x, title, status: 'open', edits: 0 });
    await raw.insertOne({ _id: y, title, status: 'open', edits: 0 });
    return { raw, x, y, stopMatching: () => raw.updateOne({ _id: x }, { $set: { status: 'done' } }) };
  }

  /** What the collection holds for `title`, by `_id`. */
  async function stored(raw: mongo.Collection, title: string) {
    const docs = await raw.find({ title }).sort({ _id: 1 }).toArray();
    return docs.map((d) => ({ id: String(d._id), status: d.status as unknown, edits: d.edits as unknown }));
  }

  /** Whether the guard's first write on the collection was narrowed to `x` (the race happened). */
  function firstWriteNamed(x: mongo.ObjectId): boolean {
    return writes.length > 0 && JSON.stringify(writes[0].filter).includes(x.toHexString());
  }

  const modes = (): [string, () => WorkItemModel][] => [
    ["transactions: 'never'", () => Never],
    ...(transactions ? ([["transactions: 'auto' (the guard's own transaction)", () => Auto]] as [string, () => WorkItemModel][]) : []),
  ];

  test('the unguarded upsert (the expectation): Y is updated, nothing is inserted', async () => {
    const { raw, x, y, stopMatching } = await twoMatching(Never, 'plain');
    const unguarded = connA.connection.getClient().db(db.name).collection(Never.collection.collectionName);
    const result = await raced(Never.collection.collectionName, 'update', () => unguarded.updateOne({ title: 'plain', status: 'open' }, { $inc: { edits: 1 } }, { upsert: true }), stopMatching);
    expect(result.ok && { matched: result.value.matchedCount, upserted: result.value.upsertedCount }).toEqual({ matched: 1, upserted: 0 });
    expect(await stored(raw, 'plain')).toEqual([
      { id: String(x), status: 'done', edits: 0 },
      { id: String(y), status: 'open', edits: 1 },
    ]);
  }, 20_000);

  test.each([
    ['updateOne', 'update'],
    ['findOneAndUpdate', 'findAndModify'],
    ['replaceOne', 'update'],
    ['findOneAndReplace', 'findAndModify'],
  ] as const)('%s upsert: Y is written, no stray document is inserted, as without the plugin', async (method, command) => {
    for (const [label, model] of modes()) {
      const M = model();
      const title = `${method}-${label}`;
      const { raw, x, y, stopMatching } = await twoMatching(M, title);
      const filter = { title, status: 'open' as const };
      const replacement = { title, status: 'open' as const, edits: 7 };
      const write = (): Promise<unknown> => {
        if (method === 'updateOne') return M.updateOne(filter, { $inc: { edits: 1 } }, { upsert: true }).exec();
        if (method === 'replaceOne') return M.replaceOne(filter, replacement, { upsert: true }).exec();
        if (method === 'findOneAndUpdate') return M.findOneAndUpdate(filter, { $inc: { edits: 1 } }, { upsert: true, sort: { _id: 1 }, returnDocument: 'after' }).lean().exec();
        return M.findOneAndReplace(filter, replacement, { upsert: true, sort: { _id: 1 }, returnDocument: 'after' }).lean().exec();
      };
      writes.length = 0;
      const result = await raced(M.collection.collectionName, command, write, stopMatching);
      const expectedEdits = method.includes('Replace') || method === 'replaceOne' ? 7 : 1;
      expect({ label, raced: firstWriteNamed(x), ok: result.ok, stored: await stored(raw, title) }).toEqual({
        label,
        raced: true,
        ok: true,
        stored: [
          { id: String(x), status: 'done', edits: 0 },
          { id: String(y), status: 'open', edits: expectedEdits },
        ],
      });
      // The result Mongoose gets is that of an upsert that matched Y.
      const value = result.ok ? (result.value as Record<string, unknown> | null) : null;
      if (command === 'update') expect({ matchedCount: value?.matchedCount, upsertedCount: value?.upsertedCount, upsertedId: value?.upsertedId }).toEqual({ matchedCount: 1, upsertedCount: 0, upsertedId: null });
      else expect(String(value?._id)).toBe(String(y));
    }
  }, 60_000);

  test('updateMany upsert whose every found target stopped matching while another started to: that one is written, nothing inserted', async () => {
    for (const [label, model] of modes()) {
      const M = model();
      const title = `many-${label}`;
      const raw = rawCollection(M);
      await raw.deleteMany({});
      const x = new mongo.ObjectId();
      const y = new mongo.ObjectId();
      await raw.insertOne({ _id: x, title, status: 'open', edits: 0 });
      await raw.insertOne({ _id: y, title, status: 'done', edits: 0 });
      writes.length = 0;
      const result = await raced(
        M.collection.collectionName,
        'update',
        () => M.updateMany({ title, status: 'open' }, { $inc: { edits: 1 } }, { upsert: true }).exec(),
        async () => {
          await raw.updateOne({ _id: x }, { $set: { status: 'done' } });
          await raw.updateOne({ _id: y }, { $set: { status: 'open' } });
        },
      );
      expect({ label, raced: firstWriteNamed(x), stored: await stored(raw, title) }).toEqual({
        label,
        raced: true,
        stored: [
          { id: String(x), status: 'done', edits: 0 },
          { id: String(y), status: 'open', edits: 1 },
        ],
      });
      expect(result.ok && { matched: result.value.matchedCount, upserted: result.value.upsertedCount }).toEqual({ matched: 1, upserted: 0 });
    }
  }, 60_000);

  test("check mode: two concurrent upserts that both found nothing, under a unique index: one inserts, the other updates it (as mongod's own duplicate-key retry does)", async () => {
    const M = await workItemModel(connA.connection, { ttl: 30_000, transactions: 'never' }, 'RaceUnique');
    const raw = rawCollection(M);
    await raw.createIndex({ title: 1 }, { unique: true });
    await raw.deleteMany({});
    // Both writes are held 1 s after their searches found nothing, then run one after the other.
    await other.connection
      .getClient()
      .db('admin')
      .command({
        configureFailPoint: 'failCommand',
        mode: { times: 2 },
        data: { failCommands: ['update'], appName: APP_A, namespace: `${db.name}.${M.collection.collectionName}`, blockConnection: true, blockTimeMS: 1_000 },
      });
    const upsert = () => outcome(M.updateOne({ title: 'unique' }, { $inc: { edits: 1 } }, { upsert: true }).exec());
    const results = await Promise.all([upsert(), upsert()]);
    expect(results.map((r) => (r.ok ? 'ok' : String((r.error as Error).message)))).toEqual(['ok', 'ok']);
    expect((await raw.find({ title: 'unique' }).toArray()).map((d) => d.edits)).toEqual([2]);
  }, 30_000);

  test('check mode: an upsert whose search finds nothing still inserts what the unguarded upsert inserts', async () => {
    const raw = rawCollection(Never);
    await raw.deleteMany({});
    const result = await Never.updateOne({ title: 'fresh', status: 'done' }, { $set: { edits: 3 } }, { upsert: true }).exec();
    expect(result.upsertedCount).toBe(1);
    const docs = await raw.find({ title: 'fresh' }).toArray();
    expect(docs.map((d) => ({ id: String(d._id), title: d.title, status: d.status, edits: d.edits }))).toEqual([
      { id: String(result.upsertedId), title: 'fresh', status: 'done', edits: 3 },
    ]);
    // Sent as one upsert that can only insert.
    expect(writes.map((w) => ({ upsert: w.upsert, filter: w.filter }))).toEqual([{ upsert: true, filter: { title: 'fresh', status: 'done', _id: { $exists: false } } }]);
  });
});
