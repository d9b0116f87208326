/**
 * The emulator's change streams: first the module against a fake storage (no sockets), then end
 * to end through the official driver against a private emulator.
 */
import { EventEmitter } from 'node:events';
import { Timestamp, type Document } from 'bson';
import { MongoClient, type ChangeStream } from 'mongodb';
import { startEmulator, type RunningEmulator } from '../../test-backend/emulator';
import { createChangeStreams, type ChangeStreams } from '../../test-backend/emulator/change-streams';
import { MongoCommandError } from '../../test-backend/emulator/errors';
import type { ChangeEvent, ChangeSource } from '../../test-backend/emulator/hooks';
import { usesPrivateServer } from '../support/private-server';

// This file configures failCommand: on a server of its own where it can (support/private-server.ts).
usesPrivateServer();

/** A storage stand-in: documents by namespace and _id, and a change emitter. */
class FakeStorage implements ChangeSource {
  readonly changes = new EventEmitter();
  private readonly docs = new Map<string, Document>();
  private t = 1_700_000_000;
  private i = 0;

  currentClusterTime(): Timestamp {
    return new Timestamp({ t: this.t, i: this.i });
  }
  lookupDocument(db: string, coll: string, id: unknown): Document | null {
    return this.docs.get(`${db}.${coll}.${String(id)}`) ?? null;
  }
  private tick(): Timestamp {
    this.i += 1;
    return this.currentClusterTime();
  }
  private emit(ev: Omit<ChangeEvent, 'clusterTime'>): void {
    this.changes.emit('change', { ...ev, clusterTime: this.tick() });
  }
  insert(coll: string, doc: Document, db = 'db'): void {
    this.docs.set(`${db}.${coll}.${String(doc._id)}`, doc);
    this.emit({ operationType: 'insert', ns: { db, coll }, documentKey: { _id: doc._id }, fullDocument: doc });
  }
  set(coll: string, id: unknown, fields: Document, db = 'db', txn?: { lsid: Document; txnNumber: number }): void {
    const key = `${db}.${coll}.${String(id)}`;
    this.docs.set(key, { ...this.docs.get(key), ...fields });
    this.emit({
      operationType: 'update',
      ns: { db, coll },
      documentKey: { _id: id },
      fullDocument: this.docs.get(key),
      updateDescription: { updatedFields: fields, removedFields: [], truncatedArrays: [] },
      ...(txn ?? {}),
    });
  }
  replace(coll: string, doc: Document, db = 'db'): void {
    this.docs.set(`${db}.${coll}.${String(doc._id)}`, doc);
    this.emit({ operationType: 'replace', ns: { db, coll }, documentKey: { _id: doc._id }, fullDocument: doc });
  }
  remove(coll: string, id: unknown, db = 'db'): void {
    this.docs.delete(`${db}.${coll}.${String(id)}`);
    this.emit({ operationType: 'delete', ns: { db, coll }, documentKey: { _id: id } });
  }
  drop(coll: string, db = 'db'): void {
    this.emit({ operationType: 'drop', ns: { db, coll } });
  }
  dropDatabase(db = 'db'): void {
    this.emit({ operationType: 'dropDatabase', ns: { db } });
  }
}

function setup(historyLimit?: number): { storage: FakeStorage; streams: ChangeStreams } {
  const storage = new FakeStorage();
  return { storage, streams: createChangeStreams(storage, historyLimit === undefined ? {} : { historyLimit }) };
}

/** Opens a stream on db.c; `coll: null` opens a database-wide one. */
const open = (streams: ChangeStreams, options: Document = {}, pipeline: Document[] = [], coll: string | null = 'c', db = 'db') =>
  streams.openCursor({ db, coll: coll ?? undefined, options, pipeline, command: { aggregate: coll ?? 1, pipeline: [{ $changeStream: options }, ...pipeline] } });

async function rejection(fn: () => unknown): Promise<MongoCommandError> {
  try {
    await fn();
  } catch (e) {
    if (e instanceof MongoCommandError) return e;
    throw e;
  }
  throw new Error('expected a command error');
}

const ops = (batch: Document[]): string[] => batch.map((e) => e.operationType as string);

describe('change streams (module)', () => {
  it('reports insert, update, replace and delete events shaped as mongod reports them', async () => {
    const { storage, streams } = setup();
    storage.insert('c', { _id: 0, before: true }); // before the stream opened: not reported
    const cursor = open(streams);
    expect(await cursor.nextBatch(10, { maxAwaitTimeMS: 0 })).toEqual([]); // the aggregate's own batch never waits
    storage.insert('c', { _id: 1, a: 1 });
    storage.set('c', 1, { a: 2 });
    storage.replace('c', { _id: 1, b: 1 });
    storage.remove('c', 1);
    storage.insert('other', { _id: 9 }); // another collection
    const batch = await cursor.nextBatch(10, {});
    expect(ops(batch)).toEqual(['insert', 'update', 'replace', 'delete']);
    const [ins, upd, rep, del] = batch;
    expect(Object.keys(ins)).toEqual(['_id', 'operationType', 'clusterTime', 'wallTime', 'fullDocument', 'ns', 'documentKey']);
    expect(ins._id._data).toMatch(/^[0-9A-F]+$/);
    expect(ins.clusterTime).toBeInstanceOf(Timestamp);
    expect(ins.wallTime).toBeInstanceOf(Date);
    expect(ins).toMatchObject({ fullDocument: { _id: 1, a: 1 }, ns: { db: 'db', coll: 'c' }, documentKey: { _id: 1 } });
    expect(upd).not.toHaveProperty('fullDocument'); // fullDocument: 'default'
    expect(upd.updateDescription).toEqual({ updatedFields: { a: 2 }, removedFields: [], truncatedArrays: [] });
    expect(rep.fullDocument).toEqual({ _id: 1, b: 1 });
    expect(Object.keys(del)).toEqual(['_id', 'operationType', 'clusterTime', 'wallTime', 'ns', 'documentKey']);
    expect(new Set(batch.map((e) => e._id._data)).size).toBe(4);
    cursor.close();
    streams.close();
  });

  it("fullDocument: 'updateLookup' shows the document as it is when the event is read, or null once deleted", async () => {
    const { storage, streams } = setup();
    const cursor = open(streams, { fullDocument: 'updateLookup' });
    storage.insert('c', { _id: 1, v: 1 });
    storage.set('c', 1, { v: 2 });
    storage.set('c', 1, { v: 3 });
    const batch = await cursor.nextBatch(10, {});
    expect(batch.map((e) => e.fullDocument)).toEqual([{ _id: 1, v: 1 }, { _id: 1, v: 3 }, { _id: 1, v: 3 }]);
    storage.set('c', 1, { v: 4 });
    storage.remove('c', 1);
    const later = await cursor.nextBatch(10, {});
    expect(later.map((e) => [e.operationType, e.fullDocument])).toEqual([['update', null], ['delete', undefined]]);
    streams.close();
  });

  it("fullDocument: 'whenAvailable' and fullDocumentBeforeChange: 'whenAvailable' are null (no stored images)", async () => {
    const { storage, streams } = setup();
    const cursor = open(streams, { fullDocument: 'whenAvailable', fullDocumentBeforeChange: 'whenAvailable' });
    storage.insert('c', { _id: 1 });
    storage.set('c', 1, { v: 2 });
    const [ins, upd] = await cursor.nextBatch(10, {});
    expect(ins).not.toHaveProperty('fullDocumentBeforeChange');
    expect(upd).toMatchObject({ fullDocument: null, fullDocumentBeforeChange: null });
    streams.close();
  });

  it('resumeAfter / startAfter a token yields exactly the events after it; so does the postBatchResumeToken', async () => {
    const { storage, streams } = setup();
    const first = open(streams);
    for (let i = 1; i <= 5; i++) storage.insert('c', { _id: i });
    const batch = await first.nextBatch(2, {});
    expect(batch.map((e) => e.documentKey._id)).toEqual([1, 2]);
    expect(first.postBatchResumeToken()).toEqual(batch[1]._id); // the batch ended at its last event
    for (const option of ['resumeAfter', 'startAfter']) {
      const resumed = open(streams, { [option]: batch[0]._id });
      expect((await resumed.nextBatch(10, {})).map((e) => e.documentKey._id)).toEqual([2, 3, 4, 5]);
    }
    const rest = await first.nextBatch(10, {});
    expect(rest.map((e) => e.documentKey._id)).toEqual([3, 4, 5]);
    expect(await first.nextBatch(10, { maxAwaitTimeMS: 1 })).toEqual([]);
    const hwm = first.postBatchResumeToken();
    storage.insert('c', { _id: 6 });
    const fromHwm = open(streams, { resumeAfter: hwm });
    expect((await fromHwm.nextBatch(10, {})).map((e) => e.documentKey._id)).toEqual([6]);
    streams.close();
  });

  it('the postBatchResumeToken moves past events the pipeline filtered out', async () => {
    const { storage, streams } = setup();
    const cursor = open(streams, {}, [{ $match: { operationType: 'delete' } }]);
    storage.insert('c', { _id: 1 });
    storage.insert('c', { _id: 2 });
    expect(await cursor.nextBatch(10, { maxAwaitTimeMS: 1 })).toEqual([]);
    storage.remove('c', 1);
    const resumed = open(streams, { resumeAfter: cursor.postBatchResumeToken() }, [{ $match: { operationType: 'delete' } }]);
    expect(ops(await resumed.nextBatch(10, {}))).toEqual(['delete']);
    streams.close();
  });

  it('startAtOperationTime reports events at or after that cluster time', async () => {
    const { storage, streams } = setup();
    storage.insert('c', { _id: 1 });
    const at = storage.currentClusterTime();
    storage.insert('c', { _id: 2 });
    const cursor = open(streams, { startAtOperationTime: at });
    expect((await cursor.nextBatch(10, {})).map((e) => e.documentKey._id)).toEqual([1, 2]);
    streams.close();
  });

  it('answers ChangeStreamHistoryLost (286) for resume points older than the kept history', async () => {
    const { storage, streams } = setup(5);
    const slow = open(streams);
    storage.insert('c', { _id: 0 });
    const [first] = await slow.nextBatch(1, {});
    for (let i = 1; i <= 10; i++) storage.insert('c', { _id: i });
    expect((await rejection(() => open(streams, { resumeAfter: first._id }))).code).toBe(286);
    expect((await rejection(() => open(streams, { startAtOperationTime: first.clusterTime }))).code).toBe(286);
    expect((await rejection(() => slow.nextBatch(10, {}))).codeName).toBe('ChangeStreamHistoryLost');
    streams.close();
  });

  it('applies the stages after $changeStream with mingo, and refuses to let them change the resume token', async () => {
    const { storage, streams } = setup();
    const cursor = open(streams, {}, [{ $match: { 'fullDocument.keep': true } }, { $project: { 'fullDocument.keep': 1, operationType: 1 } }]);
    storage.insert('c', { _id: 1, keep: false });
    storage.insert('c', { _id: 2, keep: true, other: 'x' });
    const [only] = await cursor.nextBatch(10, {});
    expect(only).toEqual({ _id: expect.objectContaining({ _data: expect.any(String) }), operationType: 'insert', fullDocument: { keep: true } });
    const bad = open(streams, {}, [{ $set: { _id: 'mine' } }]);
    storage.insert('c', { _id: 3 });
    expect((await rejection(() => bad.nextBatch(10, {}))).code).toBe(280);
    expect((await rejection(() => open(streams, {}, [{ $group: { _id: null } }]))).message).toBe('$group is not permitted in a $changeStream pipeline');
    streams.close();
  });

  it('a getMore waits for the next event and wakes as soon as it arrives', async () => {
    const { storage, streams } = setup();
    const cursor = open(streams);
    const started = Date.now();
    setTimeout(() => storage.insert('c', { _id: 1 }), 50);
    const batch = await cursor.nextBatch(10, { maxAwaitTimeMS: 5000 });
    expect(ops(batch)).toEqual(['insert']);
    // Woken by the event (50 ms), not at maxAwaitTimeMS (5 s): generous for a loaded machine.
    expect(Date.now() - started).toBeLessThan(4000);
    streams.close();
  });

  it('a getMore returns an empty batch when maxAwaitTimeMS is up, ignoring events the pipeline drops', async () => {
    const { storage, streams } = setup();
    const cursor = open(streams, {}, [{ $match: { operationType: 'delete' } }]);
    const started = Date.now();
    const timer = setInterval(() => storage.insert('c', { _id: Math.random() }), 20);
    const batch = await cursor.nextBatch(10, { maxAwaitTimeMS: 200 });
    clearInterval(timer);
    expect(batch).toEqual([]);
    expect(Date.now() - started).toBeGreaterThanOrEqual(190);
    streams.close();
  });

  it('closing a stream ends a waiting getMore at once', async () => {
    const { streams } = setup();
    const cursor = open(streams);
    const started = Date.now();
    const pending = cursor.nextBatch(10, { maxAwaitTimeMS: 10_000 });
    setTimeout(() => cursor.close(), 20);
    expect(await pending).toEqual([]);
    // Ended by the close (20 ms), not at maxAwaitTimeMS (10 s): generous for a loaded machine.
    expect(Date.now() - started).toBeLessThan(5000);
    streams.close();
  });

  it('drop of the collection gives drop then invalidate and ends the stream; startAfter may pass an invalidate, resumeAfter may not', async () => {
    const { storage, streams } = setup();
    const cursor = open(streams);
    storage.insert('c', { _id: 1 });
    storage.drop('c');
    storage.insert('c', { _id: 2 });
    const batch = await cursor.nextBatch(10, {});
    expect(ops(batch)).toEqual(['insert', 'drop', 'invalidate']);
    expect(Object.keys(batch[2])).toEqual(['_id', 'operationType', 'clusterTime', 'wallTime']);
    expect(cursor.exhausted).toBe(true);
    expect(cursor.postBatchResumeToken()).toEqual(batch[2]._id);
    const again = open(streams, { resumeAfter: batch[1]._id });
    expect(ops(await again.nextBatch(10, {}))).toEqual(['invalidate']);
    expect((await rejection(() => open(streams, { resumeAfter: batch[2]._id }))).code).toBe(260);
    const after = open(streams, { startAfter: batch[2]._id });
    expect((await after.nextBatch(10, {})).map((e) => e.documentKey._id)).toEqual([2]);
    streams.close();
  });

  it('a database stream sees every collection of its database; dropDatabase invalidates it', async () => {
    const { storage, streams } = setup();
    const cursor = open(streams, {}, [], null);
    expect(cursor.ns).toBe('db.$cmd.aggregate');
    storage.insert('a', { _id: 1 });
    storage.insert('b', { _id: 1 });
    storage.insert('x', { _id: 1 }, 'otherdb');
    storage.drop('a');
    storage.dropDatabase();
    const batch = await cursor.nextBatch(10, {});
    expect(batch.map((e) => `${e.operationType}:${e.ns?.coll ?? ''}`)).toEqual(['insert:a', 'insert:b', 'drop:a', 'dropDatabase:', 'invalidate:']);
    streams.close();
  });

  it('a cluster stream is opened on admin with allChangesForCluster and sees every user database', async () => {
    const { storage, streams } = setup();
    const cursor = open(streams, { allChangesForCluster: true }, [], null, 'admin');
    storage.insert('a', { _id: 1 }, 'one');
    storage.insert('b', { _id: 1 }, 'two');
    expect((await cursor.nextBatch(10, {})).map((e) => e.ns.db)).toEqual(['one', 'two']);
    expect((await rejection(() => open(streams, {}, [], null, 'admin'))).code).toBe(73);
    streams.close();
  });

  it("carries a transaction's lsid and txnNumber", async () => {
    const { storage, streams } = setup();
    const cursor = open(streams);
    storage.insert('c', { _id: 1 });
    storage.set('c', 1, { v: 1 }, 'db', { lsid: { id: 'session' }, txnNumber: 7 });
    const [, upd] = await cursor.nextBatch(10, {});
    expect(upd).toMatchObject({ lsid: { id: 'session' }, txnNumber: 7 });
    streams.close();
  });

  it('honours batchSize, continuing where the previous batch stopped', async () => {
    const { storage, streams } = setup();
    const cursor = open(streams);
    for (let i = 1; i <= 5; i++) storage.insert('c', { _id: i });
    expect((await cursor.nextBatch(2, {})).map((e) => e.documentKey._id)).toEqual([1, 2]);
    expect((await cursor.nextBatch(2, {})).map((e) => e.documentKey._id)).toEqual([3, 4]);
    expect((await cursor.nextBatch(2, {})).map((e) => e.documentKey._id)).toEqual([5]);
    streams.close();
  });

  it('rejects options and stages it does not support, naming them', async () => {
    const { streams } = setup();
    expect((await rejection(() => open(streams, { bogus: 1 }))).code).toBe(40415);
    expect((await rejection(() => open(streams, { fullDocument: 'sometimes' }))).code).toBe(2);
    expect((await rejection(() => open(streams, { showExpandedEvents: 1 }))).message).toContain('showExpandedEvents');
    expect((await rejection(() => open(streams, { resumeAfter: { _data: 'zz' } }))).code).toBe(260);
    expect((await rejection(() => open(streams, { resumeAfter: { _data: '00' }, startAtOperationTime: new Timestamp({ t: 1, i: 1 }) }))).code).toBe(40674);
    expect((await rejection(() => open(streams, {}, [{ $changeStreamSplitLargeEvent: {} }]))).code).toBe(238);
    streams.close();
  });
});

describe('change streams (through the driver)', () => {
  let emulator: RunningEmulator;
  let client: MongoClient;
  let n = 0;
  /** A fresh collection per test, so streams never see each other's writes. */
  type Doc = { _id: number | string; [key: string]: unknown };
  const fresh = () => client.db('cs').collection<Doc>(`c${++n}`);

  beforeAll(async () => {
    emulator = await startEmulator({ port: 0 });
    client = new MongoClient(emulator.uri, { serverSelectionTimeoutMS: 5000 });
    await client.connect();
  });
  afterAll(async () => {
    await client?.close();
    await emulator?.stop();
  });

  /** Reads `count` events, each within the stream's maxAwaitTimeMS rounds, failing after 5 s. */
  async function take(stream: ChangeStream<Doc>, count: number): Promise<Document[]> {
    const out: Document[] = [];
    const deadline = Date.now() + 5000;
    while (out.length < count && Date.now() < deadline) {
      const ev = await stream.tryNext();
      if (ev) out.push(ev as Document);
    }
    return out;
  }

  it('watch() reports insert, update, replace and delete, with updateLookup', async () => {
    const coll = fresh();
    const stream = coll.watch([], { fullDocument: 'updateLookup', maxAwaitTimeMS: 100 });
    try {
      await stream.tryNext(); // the aggregate has run: the stream starts here
      await coll.insertOne({ _id: 1, v: 1 });
      await coll.updateOne({ _id: 1 }, { $set: { v: 2 } });
      await coll.replaceOne({ _id: 1 }, { v: 3 });
      await coll.deleteOne({ _id: 1 });
      const events = await take(stream, 4);
      expect(events.map((e) => e.operationType)).toEqual(['insert', 'update', 'replace', 'delete']);
      expect(events[0]).toMatchObject({ ns: { db: 'cs', coll: coll.collectionName }, documentKey: { _id: 1 }, fullDocument: { _id: 1, v: 1 } });
      expect(events[1].updateDescription).toEqual({ updatedFields: { v: 2 }, removedFields: [], truncatedArrays: [] });
      expect(events[1].fullDocument).toBeNull(); // looked up after the delete
      expect(events[2].fullDocument).toEqual({ _id: 1, v: 3 });
      expect(stream.resumeToken).toEqual(events[3]._id);
    } finally {
      await stream.close();
    }
  });

  it('an idle getMore returns after maxAwaitTimeMS with nothing', async () => {
    const stream = fresh().watch([], { maxAwaitTimeMS: 300 });
    try {
      await stream.tryNext();
      const started = Date.now();
      expect(await stream.tryNext()).toBeNull();
      expect(Date.now() - started).toBeGreaterThanOrEqual(250);
      expect(Date.now() - started).toBeLessThan(3000);
    } finally {
      await stream.close();
    }
  });

  it('resumeAfter a token yields exactly the events after it', async () => {
    const coll = fresh();
    const stream = coll.watch([], { maxAwaitTimeMS: 100 });
    try {
      await stream.tryNext();
      await coll.insertMany([{ _id: 1 }, { _id: 2 }, { _id: 3 }]);
      const [first] = await take(stream, 1);
      const resumed = coll.watch([], { resumeAfter: first._id, maxAwaitTimeMS: 100 });
      try {
        expect((await take(resumed, 2)).map((e) => e.documentKey._id)).toEqual([2, 3]);
      } finally {
        await resumed.close();
      }
    } finally {
      await stream.close();
    }
  });

  it("a transaction's writes appear at commit, in order; an aborted one's never", async () => {
    const coll = fresh();
    await coll.insertOne({ _id: 'seed' });
    const stream = coll.watch([], { maxAwaitTimeMS: 100 });
    const session = client.startSession();
    try {
      await stream.tryNext();
      session.startTransaction();
      await coll.insertOne({ _id: 'a' }, { session });
      await coll.updateOne({ _id: 'seed' }, { $set: { touched: true } }, { session });
      expect(await stream.tryNext()).toBeNull(); // not committed yet
      await session.commitTransaction();
      session.startTransaction();
      await coll.insertOne({ _id: 'aborted' }, { session });
      await session.abortTransaction();
      await coll.insertOne({ _id: 'after' });
      const events = await take(stream, 3);
      expect(events.map((e) => `${e.operationType}:${e.documentKey._id}`)).toEqual(['insert:a', 'update:seed', 'insert:after']);
      expect(events[0].txnNumber).toEqual(events[1].txnNumber);
      expect(events[0].lsid).toBeDefined();
    } finally {
      await session.endSession();
      await stream.close();
    }
  });

  it('a $match after $changeStream filters events', async () => {
    const coll = fresh();
    const stream = coll.watch([{ $match: { operationType: 'delete' } }], { maxAwaitTimeMS: 100 });
    try {
      await stream.tryNext();
      await coll.insertOne({ _id: 1 });
      await coll.deleteOne({ _id: 1 });
      expect((await take(stream, 1)).map((e) => e.operationType)).toEqual(['delete']);
    } finally {
      await stream.close();
    }
  });

  it('dropping the collection ends the stream with drop, then invalidate', async () => {
    const coll = fresh();
    await coll.insertOne({ _id: 0 });
    const stream = coll.watch([], { maxAwaitTimeMS: 100 });
    try {
      await stream.tryNext();
      await coll.drop();
      const events = await take(stream, 2);
      expect(events.map((e) => e.operationType)).toEqual(['drop', 'invalidate']);
      expect(stream.closed).toBe(true);
    } finally {
      await stream.close();
    }
  });

  it('resumes by itself after a getMore fails with a closed connection (driver resume)', async () => {
    const coll = fresh();
    const stream = coll.watch([], { maxAwaitTimeMS: 100 });
    try {
      await stream.tryNext();
      await coll.insertOne({ _id: 1 });
      expect((await take(stream, 1)).map((e) => e.documentKey._id)).toEqual([1]);
      await client.db('admin').command({ configureFailPoint: 'failCommand', mode: { times: 1 }, data: { failCommands: ['getMore'], closeConnection: true } });
      await coll.insertOne({ _id: 2 });
      expect((await take(stream, 1)).map((e) => e.documentKey._id)).toEqual([2]);
    } finally {
      await client.db('admin').command({ configureFailPoint: 'failCommand', mode: 'off' });
      await stream.close();
    }
  });

  it("a stream opened while another connection's first insert creates the collection reports that insert (the creation takes collectionCreationLatencyMs)", async () => {
    const other = new MongoClient(emulator.uri, { serverSelectionTimeoutMS: 5000 });
    await other.connect();
    try {
      await other.db('cs').command({ ping: 1 });
      const name = `new${++n}`;
      const stream = client.db('cs').collection<Doc>(name).watch([], { maxAwaitTimeMS: 100 });
      // The insert arrives first, but creating its collection takes time; the aggregate, sent in
      // the same moment on another connection, runs meanwhile and starts the stream before it.
      const inserted = other.db('cs').collection<Doc>(name).insertOne({ _id: 'same-moment' });
      const first = await stream.tryNext();
      await inserted;
      const events = first ? [first as Document] : await take(stream, 1);
      expect(events.map((e) => e.documentKey._id)).toEqual(['same-moment']);
      await stream.close();
    } finally {
      await other.close();
    }
  });

  it('rejects unsupported options with an error naming them', async () => {
    const stream = fresh().watch([{ $changeStreamSplitLargeEvent: {} }]);
    await expect(stream.tryNext()).rejects.toMatchObject({ message: expect.stringContaining('$changeStreamSplitLargeEvent') });
    await stream.close();
  });
});
