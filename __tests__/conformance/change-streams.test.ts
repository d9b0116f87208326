/**
 * Change streams on a collection: event shapes for insert/update/replace/delete, updateLookup,
 * transactions (events only at commit, in order; none for an abort), resuming after a token,
 * and awaitData getMores that wait up to maxAwaitTimeMS instead of spinning.
 *
 * Sources: manual "Change Events" (re-read: https://www.mongodb.com/docs/manual/reference/change-events/update/
 * and its insert/replace/delete siblings: event shapes, updateDescription with
 * updatedFields/removedFields/truncatedArrays), "Lookup Full Document for Update Operations"
 * (updateLookup returns the current majority-committed version, null if deleted), "Change Streams and
 * transactions" (events at commit, with lsid and txnNumber), "Resume a Change Stream" (resumeAfter /
 * startAfter); change-streams spec (mongodb/specifications source/change-streams/change-streams.md)
 * for maxAwaitTimeMS being sent as the getMore's maxTimeMS.
 * Where a new stream starts: a stream opened without resumeAfter/startAfter/startAtOperationTime
 * starts "one tick beyond the most recent operation, to ensure that the stream does not return it"
 * (DocumentSourceChangeStream::getStartTimeForNewStream, src/mongo/db/pipeline/
 * document_source_change_stream.cpp: the node's last applied optime + 1), so a write acknowledged
 * before the stream's aggregate was sent, by this client or another, is never reported, and every
 * write committed after it is.
 */
import {
  Timestamp,
  type ChangeStream,
  type ChangeStreamDocument,
  type ChangeStreamOptions,
  type Collection,
  type CommandStartedEvent,
  type Db,
  type Document,
  type MongoClient,
} from 'mongodb';
import { deploymentFacts, describeIf, openClient, uniqueDbName, type Loose } from './support/server';

const dbName = uniqueDbName('conf_streams');
let client: MongoClient;
let db: Db;
const streams: ChangeStream[] = [];

type Event = ChangeStreamDocument<Loose>;

/** Opens a stream and sends its aggregate, so that it sees every write made after this returns. */
async function openStream(coll: Collection<Loose>, options: ChangeStreamOptions = {}): Promise<ChangeStream<Loose, Event>> {
  const stream = coll.watch<Loose, Event>([], { maxAwaitTimeMS: 200, ...options });
  streams.push(stream);
  expect(await stream.tryNext()).toBeNull();
  return stream;
}

/** The next event, polling with bounded awaitData getMores. */
async function nextEvent(stream: ChangeStream<Loose, Event>, timeoutMs = 5000): Promise<Event> {
  const end = Date.now() + timeoutMs;
  while (Date.now() < end) {
    const event = await stream.tryNext();
    if (event) return event;
  }
  throw new Error(`no change event within ${timeoutMs} ms`);
}

async function nextEvents(stream: ChangeStream<Loose, Event>, count: number): Promise<Event[]> {
  const events: Event[] = [];
  for (let i = 0; i < count; i += 1) events.push(await nextEvent(stream));
  return events;
}

/** Asserts that nothing arrives for a while (a few awaitData rounds). */
async function expectQuiet(stream: ChangeStream<Loose, Event>, ms = 700): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    const event = await stream.tryNext();
    expect(event).toBeNull();
  }
}

async function fresh(name: string, docs: Loose[] = []): Promise<Collection<Loose>> {
  const coll = await db.createCollection<Loose>(name);
  if (docs.length) await coll.insertMany(docs);
  return coll;
}

function doc(event: Event): Document {
  return event as unknown as Document;
}

const facts = deploymentFacts();

describeIf(facts.setName !== undefined, 'change streams need a replica set; this deployment is a standalone')('change streams', () => {
  beforeAll(async () => {
    client = await openClient();
    db = client.db(dbName);
  });

  afterEach(async () => {
    for (const stream of streams.splice(0)) await stream.close();
  });

  afterAll(async () => {
    await db.dropDatabase();
    await client.close();
  });

  test('insert, update, replace and delete events have the documented shapes; other collections are not seen', async () => {
    const coll = await fresh('cs_shapes');
    const other = await fresh('cs_other');
    const stream = await openStream(coll);

    await other.insertOne({ _id: 'elsewhere' });
    await coll.insertOne({ _id: 1, a: 1, keep: 'k' });
    await coll.updateOne({ _id: 1 }, { $set: { b: 2 }, $unset: { a: '' } });
    await coll.replaceOne({ _id: 1 }, { c: 3 });
    await coll.deleteOne({ _id: 1 });

    const [insert, update, replace, remove] = (await nextEvents(stream, 4)).map(doc);
    const ns = { db: dbName, coll: 'cs_shapes' };

    expect(insert).toMatchObject({ operationType: 'insert', ns, documentKey: { _id: 1 }, fullDocument: { _id: 1, a: 1, keep: 'k' } });
    expect(insert._id).toEqual(expect.objectContaining({ _data: expect.anything() }));
    expect(insert.clusterTime).toBeInstanceOf(Timestamp);

    expect(update).toMatchObject({
      operationType: 'update',
      ns,
      documentKey: { _id: 1 },
      updateDescription: { updatedFields: { b: 2 }, removedFields: ['a'], truncatedArrays: [] },
    });
    expect(update.fullDocument).toBeUndefined();

    expect(replace).toMatchObject({ operationType: 'replace', ns, documentKey: { _id: 1 }, fullDocument: { _id: 1, c: 3 } });

    expect(remove).toMatchObject({ operationType: 'delete', ns, documentKey: { _id: 1 } });
    expect(remove.fullDocument).toBeUndefined();

    // Cluster times never decrease along the stream; tokens are distinct.
    const times = [insert, update, replace, remove].map((e) => e.clusterTime as Timestamp);
    for (let i = 1; i < times.length; i += 1) expect(times[i].compare(times[i - 1])).toBeGreaterThanOrEqual(0);
    expect(new Set([insert, update, replace, remove].map((e) => JSON.stringify(e._id))).size).toBe(4);

    await expectQuiet(stream, 400);
  });

  test('a new stream starts after the last applied write: earlier writes of any client are not reported, later ones are', async () => {
    const coll = await fresh('cs_start');
    const other = await openClient();
    try {
      const elsewhere = other.db(dbName).collection<Loose>('cs_start');
      await elsewhere.insertOne({ _id: 'before-other' });
      await coll.insertOne({ _id: 'before-mine' });
      await other.db(dbName).collection<Loose>('cs_start_dropped').insertOne({ _id: 1 });
      await other.db(dbName).collection('cs_start_dropped').drop();
      const stream = await openStream(coll);
      await elsewhere.insertOne({ _id: 'after-other' });
      await coll.insertOne({ _id: 'after-mine' });
      const events = (await nextEvents(stream, 2)).map(doc);
      expect(events.map((e) => (e.documentKey as Document)._id)).toEqual(['after-other', 'after-mine']);
      await expectQuiet(stream, 400);
    } finally {
      await other.close();
    }
  });

  test('updateMany produces one update event per modified document', async () => {
    const coll = await fresh('cs_many', [{ _id: 1, s: 'a' }, { _id: 2, s: 'a' }, { _id: 3, s: 'b' }]);
    const stream = await openStream(coll);
    await coll.updateMany({ s: 'a' }, { $set: { s: 'z' } });
    const events = (await nextEvents(stream, 2)).map(doc);
    expect(events.map((e) => e.operationType)).toEqual(['update', 'update']);
    expect(events.map((e) => (e.documentKey as Document)._id).sort()).toEqual([1, 2]);
    for (const e of events) expect((e.updateDescription as Document).updatedFields).toEqual({ s: 'z' });
    await expectQuiet(stream, 400);
  });

  test("fullDocument: 'updateLookup' returns the document as it is when read, or null once deleted", async () => {
    const coll = await fresh('cs_lookup');
    const stream = await openStream(coll, { fullDocument: 'updateLookup' });

    await coll.insertOne({ _id: 'kept', a: 0 });
    await coll.updateOne({ _id: 'kept' }, { $set: { a: 1 } });
    await coll.updateOne({ _id: 'kept' }, { $set: { a: 2 } });
    await coll.insertOne({ _id: 'gone', a: 0 });
    await coll.updateOne({ _id: 'gone' }, { $set: { a: 1 } });
    await coll.deleteOne({ _id: 'gone' });

    const events = (await nextEvents(stream, 6)).map(doc);
    expect(events.map((e) => e.operationType)).toEqual(['insert', 'update', 'update', 'insert', 'update', 'delete']);
    // Both updates of 'kept' are looked up after the second one happened.
    expect(events[1].updateDescription).toMatchObject({ updatedFields: { a: 1 } });
    expect(events[1].fullDocument).toEqual({ _id: 'kept', a: 2 });
    expect(events[2].fullDocument).toEqual({ _id: 'kept', a: 2 });
    expect(events[4].updateDescription).toMatchObject({ updatedFields: { a: 1 } });
    expect(events[4].fullDocument).toBeNull();
  });

  test("a transaction's events appear only at commit, in order; an aborted transaction produces none", async () => {
    const coll = await fresh('cs_txn', [{ _id: 'p', v: 0 }, { _id: 'q', v: 0 }]);
    const stream = await openStream(coll);
    const session = client.startSession();
    try {
      session.startTransaction();
      await coll.insertOne({ _id: 't1' }, { session });
      await coll.updateOne({ _id: 'p' }, { $set: { v: 1 } }, { session });
      await coll.deleteOne({ _id: 'q' }, { session });
      await coll.insertOne({ _id: 't2' }, { session });
      await expectQuiet(stream, 600);
      await session.commitTransaction();

      const events = (await nextEvents(stream, 4)).map(doc);
      expect(events.map((e) => [e.operationType, (e.documentKey as Document)._id])).toEqual([
        ['insert', 't1'],
        ['update', 'p'],
        ['delete', 'q'],
        ['insert', 't2'],
      ]);
      for (const e of events) {
        expect(e.lsid).toEqual(expect.objectContaining({ id: expect.anything() }));
        expect(e.txnNumber).toBeDefined();
      }

      session.startTransaction();
      await coll.insertOne({ _id: 'aborted' }, { session });
      await coll.updateOne({ _id: 'p' }, { $set: { v: 'aborted' } }, { session });
      await session.abortTransaction();
      await coll.insertOne({ _id: 'after-abort' });
      const next = doc(await nextEvent(stream));
      expect(next).toMatchObject({ operationType: 'insert', documentKey: { _id: 'after-abort' } });
      await expectQuiet(stream, 400);
    } finally {
      if (session.inTransaction()) await session.abortTransaction().catch(() => undefined);
      await session.endSession();
    }
  });

  test('resumeAfter and startAfter a token yield exactly the events after it', async () => {
    const coll = await fresh('cs_resume');
    const first = await openStream(coll);
    for (const id of ['r1', 'r2', 'r3', 'r4']) await coll.insertOne({ _id: id });
    const original = await nextEvents(first, 4);
    expect(original.map((e) => (doc(e).documentKey as Document)._id)).toEqual(['r1', 'r2', 'r3', 'r4']);
    await first.close();

    const resumed = coll.watch<Loose, Event>([], { resumeAfter: original[1]._id, maxAwaitTimeMS: 200 });
    streams.push(resumed);
    const after = await nextEvents(resumed, 2);
    expect(after.map((e) => (doc(e).documentKey as Document)._id)).toEqual(['r3', 'r4']);
    expect(after.map((e) => JSON.stringify(e._id))).toEqual([JSON.stringify(original[2]._id), JSON.stringify(original[3]._id)]);
    await expectQuiet(resumed, 400);

    const started = coll.watch<Loose, Event>([], { startAfter: original[2]._id, maxAwaitTimeMS: 200 });
    streams.push(started);
    expect((doc(await nextEvent(started)).documentKey as Document)._id).toBe('r4');

    // A resumed stream also sees new writes.
    await coll.insertOne({ _id: 'r5' });
    expect((doc(await nextEvent(resumed)).documentKey as Document)._id).toBe('r5');
    expect((doc(await nextEvent(started)).documentKey as Document)._id).toBe('r5');
  });

  describe('awaitData', () => {
    let monitored: MongoClient;
    const getMores: CommandStartedEvent[] = [];

    beforeAll(async () => {
      monitored = await openClient({ monitorCommands: true });
      monitored.on('commandStarted', (event) => {
        if (event.commandName === 'getMore') getMores.push(event);
      });
    });

    afterAll(async () => {
      await monitored.close();
    });

    test('a getMore on a quiet stream waits about maxAwaitTimeMS and sends it to the server', async () => {
      const coll = monitored.db(dbName).collection<Loose>('cs_await');
      await db.createCollection('cs_await');
      const stream = coll.watch<Loose, Event>([], { maxAwaitTimeMS: 600 });
      streams.push(stream);
      expect(await stream.tryNext()).toBeNull();

      getMores.length = 0;
      const started = Date.now();
      expect(await stream.tryNext()).toBeNull();
      const elapsed = Date.now() - started;
      expect(elapsed).toBeGreaterThanOrEqual(500);
      expect(elapsed).toBeLessThan(3000);
      expect(getMores).toHaveLength(1);
      expect(getMores[0].command.maxTimeMS).toBe(600);

      // Two seconds of polling: a handful of getMores, not a busy loop.
      getMores.length = 0;
      const end = Date.now() + 2000;
      while (Date.now() < end) expect(await stream.tryNext()).toBeNull();
      expect(getMores.length).toBeGreaterThanOrEqual(2);
      expect(getMores.length).toBeLessThanOrEqual(6);
    });

    test('a waiting getMore returns early when an event arrives', async () => {
      const coll = monitored.db(dbName).collection<Loose>('cs_wake');
      await db.createCollection('cs_wake');
      const stream = coll.watch<Loose, Event>([], { maxAwaitTimeMS: 5000 });
      streams.push(stream);
      expect(await stream.tryNext()).toBeNull();

      const started = Date.now();
      const pending = stream.tryNext();
      setTimeout(() => {
        void db.collection<Loose>('cs_wake').insertOne({ _id: 'wake' });
      }, 300);
      const event = await pending;
      const elapsed = Date.now() - started;
      expect(event && doc(event)).toMatchObject({ operationType: 'insert', documentKey: { _id: 'wake' } });
      expect(elapsed).toBeLessThan(3000);
    });
  });
});
