/**
 * Issue 16, item 1, with an unacknowledged write concern (`w: 0`): in check mode
 * (`transactions: 'never'`, standalone servers) the guard writes a found target WITHOUT `upsert` and
 * searches again when the write matched nothing (write-guard.ts, checkThenWrite: `touchedNothing`).
 * With `w: 0` the driver gets no reply (`{ acknowledged: false }`, no counts), so `touchedNothing`
 * is false and the guard returns after the first round whatever the write did. When the found
 * document stopped matching before the write arrived, the narrowed, non-upsert write matches
 * nothing and NOTHING is written: no update of the other matching document, no insert. No serial
 * execution of the unguarded upsert leaves the collection unchanged (an upsert always updates or
 * inserts), and without the plugin the same race updates Y (PRODUCT.md property 10).
 *
 * X and Y match `{ title, status: 'open' }`; the guard's search finds X; a fail point holds the
 * guard's write 1 s while X is set to 'done'. Valid outcomes: X updated before its change
 * (X.edits 1) or Y updated (Y.edits 1); nothing inserted. The same race against the unguarded
 * driver is run first as the expectation.
 *
 * The same holds for a non-upsert single-document write (`deleteOne` with `w: 0`): its re-search
 * never runs, and nothing is deleted while Y matched all along (before issue 16 too).
 *
 * Observed with both drivers: with Mongoose 8 (mongodb 6) these cases PASS, although the guard's
 * write is sent with `w: 0` (asserted): the guard still got counts back and searched again. With
 * Mongoose 9 (mongodb 7) the write goes out unacknowledged and returns no counts, and they fail.
 *
 * Status when committed (attack on 8078351), Mongoose 9: both guarded cases FAIL (upsert: X.edits 0, Y.edits 0,
 * nothing inserted; deleteOne: both documents left).
 *
 * The fix (write-guard.ts, checkThenWrite): the guard needs each round's counts, so in check mode
 * it sends its narrowed writes acknowledged (`w: 1`, asserted below) and answers the caller what
 * the driver answers an unacknowledged write (`{ acknowledged: false, ... }` with no counts: mongodb
 * 6 and 7, lib/operations/update.js and delete.js, handleOk on the `{ ok: 1 }` of a moreToCome
 * reply). Refusing `w: 0` instead would refuse writes nobody's lock stands in the way of.
 */
import { mongo } from 'mongoose';
import { deploymentFacts, describeIf } from '../../conformance/support/server';
import { connect, testDatabase, waitUntil, type MonitoredConnection } from '../../support/db';
import { workItemModel, type WorkItemModel } from '../../support/work-item';
import { usesPrivateServer } from '../../support/private-server';
import { blockCommands, failPointOff, outcome, rawCollection } from './support';

// This file configures failCommand: on a server of its own where it can (support/private-server.ts).
usesPrivateServer();

const db = testDatabase('checkunackupsert');
/** How long an unacknowledged write may take to land after its 1 s hold (generous: a loaded machine). */
const LANDED_MS = 15_000;
const APP_A = `mpl-check-unack-${process.pid}`;
let connA: MonitoredConnection;
let other: MonitoredConnection;
let Never: WorkItemModel;
/** The update statements A's client sent on the model's collection, with the command's write concern. */
const sent: { q: unknown; upsert?: unknown; w?: unknown }[] = [];

describeIf(deploymentFacts().failPoints, 'needs fail points')('an unacknowledged (w: 0) upsert whose found target stops matching before the write', () => {
  beforeAll(async () => {
    connA = await connect(db.name, { appName: APP_A, retryWrites: false });
    other = await connect(db.name);
    Never = await workItemModel(connA.connection, { ttl: 30_000, transactions: 'never' }, 'UnackNever');
    connA.connection.getClient().on('commandStarted', (event) => {
      const c = event.command as Record<string, unknown>;
      if (event.commandName === 'update' && typeof c.update === 'string' && !c.update.endsWith('.locks')) {
        const w = (c.writeConcern as { w?: unknown } | undefined)?.w;
        sent.push(...(c.updates as { q: unknown; upsert?: unknown }[]).map((u) => ({ ...u, w })));
      }
    });
  });

  afterAll(async () => {
    await failPointOff(other.connection);
    await db.drop(other.connection);
    await Promise.all([connA.close(), other.close()]);
  });

  afterEach(async () => {
    await failPointOff(other.connection);
  });

  /**
   * Runs `write` with A's next update on the collection held 1 s, and `meanwhile` while it is held;
   * then lets the unacknowledged write land: waits (up to LANDED_MS) until `landed()` says the
   * collection changed, as every serial execution of the write changes it.
   */
  async function raced<T>(write: () => Promise<T>, meanwhile: () => Promise<unknown>, landed: () => Promise<boolean>) {
    const collection = Never.collection.collectionName;
    const reached = new Promise<void>((resolve) => {
      const listener = (event: { commandName: string; command: Record<string, unknown> }) => {
        if (event.commandName === 'update' && event.command.update === collection) {
          connA.connection.getClient().off('commandStarted', listener);
          resolve();
        }
      };
      connA.connection.getClient().on('commandStarted', listener);
    });
    await blockCommands(other.connection, { appName: APP_A, namespace: `${db.name}.${collection}`, commands: ['update'], blockTimeMS: 1_000 });
    const result = outcome(write());
    await reached;
    await meanwhile();
    const settled = await result;
    // The server runs the held write after the fail point's 1 s, and an unacknowledged write has
    // no reply to wait for: wait for its effect instead of a fixed time a loaded machine may outlast.
    await waitUntil(landed, LANDED_MS, 50);
    return settled;
  }

  async function twoMatching(title: string) {
    const raw = rawCollection(Never);
    await raw.deleteMany({});
    const x = new mongo.ObjectId();
    const y = new mongo.ObjectId();
    await raw.insertMany([
      { _id: x, title, status: 'open', edits: 0 },
      { _id: y, title, status: 'open', edits: 0 },
    ]);
    const stored = async () =>
      (await raw.find({ title }).sort({ _id: 1 }).toArray()).map((d) => [String(d._id) === String(x) ? 'X' : String(d._id) === String(y) ? 'Y' : 'new', d.edits as unknown]);
    // Every serial execution of the upsert updates one of them or inserts a document.
    const written = async () => (await raw.countDocuments({ title, $or: [{ edits: { $ne: 0 } }, { _id: { $nin: [x, y] } }] })) > 0;
    return { raw, x, stored, written, stopMatching: () => raw.updateOne({ _id: x }, { $set: { status: 'done' } }) };
  }

  /** A serial execution of the upsert: X updated before its change, or Y after it; nothing inserted. */
  const SERIAL = [
    [['X', 1], ['Y', 0]],
    [['X', 0], ['Y', 1]],
  ];

  test('the unguarded upsert (the expectation): Y is updated', async () => {
    const { stored, written, stopMatching } = await twoMatching('plain');
    const unguarded = connA.connection.getClient().db(db.name).collection(Never.collection.collectionName);
    const result = await raced(() => unguarded.updateOne({ title: 'plain', status: 'open' }, { $inc: { edits: 1 } }, { upsert: true, writeConcern: { w: 0 } }), stopMatching, written);
    expect(result.ok).toBe(true);
    expect(SERIAL).toContainEqual(await stored());
  }, 30_000);

  test("transactions: 'never': the guarded w: 0 upsert updates X or Y, as some serial execution of it does", async () => {
    const { x, stored, written, stopMatching } = await twoMatching('guarded');
    sent.length = 0;
    // Through the model's collection (the guard's own entry point, the driver's options as given),
    // so the test does not depend on how a Mongoose version passes a query's write concern on.
    const guarded = Never.collection as unknown as mongo.Collection;
    const result = await raced(() => guarded.updateOne({ title: 'guarded', status: 'open' }, { $inc: { edits: 1 } }, { upsert: true, writeConcern: { w: 0 } }), stopMatching, written);
    // The race happened: the guard's first write, sent acknowledged, was narrowed to X; the caller
    // gets the unacknowledged write's answer.
    expect({ ok: result.ok, racedOnX: JSON.stringify(sent[0]?.q ?? null).includes(x.toHexString()), w: sent[0]?.w }).toEqual({ ok: true, racedOnX: true, w: 1 });
    expect(result.ok && result.value).toEqual({ acknowledged: false, modifiedCount: undefined, upsertedId: null, upsertedCount: 0, matchedCount: undefined });
    expect(SERIAL).toContainEqual(await stored());
  }, 30_000);

  test("transactions: 'never': a guarded w: 0 deleteOne (no upsert; the re-search is the same) deletes X or Y, as some serial execution of it does", async () => {
    const { raw, x, stopMatching } = await twoMatching('deleted');
    const deletes: unknown[] = [];
    const listener = (event: { commandName: string; command: Record<string, unknown> }) => {
      if (event.commandName === 'delete' && event.command.delete === Never.collection.collectionName) {
        const w = (event.command.writeConcern as { w?: unknown } | undefined)?.w;
        deletes.push(...(event.command.deletes as { q: unknown }[]).map((d) => ({ q: d.q, w })));
      }
    };
    connA.connection.getClient().on('commandStarted', listener);
    try {
      const collection = Never.collection.collectionName;
      const reached = new Promise<void>((resolve) => {
        const once = (event: { commandName: string; command: Record<string, unknown> }) => {
          if (event.commandName === 'delete' && event.command.delete === collection) {
            connA.connection.getClient().off('commandStarted', once);
            resolve();
          }
        };
        connA.connection.getClient().on('commandStarted', once);
      });
      await blockCommands(other.connection, { appName: APP_A, namespace: `${db.name}.${collection}`, commands: ['delete'], blockTimeMS: 1_000 });
      const result = outcome((Never.collection as unknown as mongo.Collection).deleteOne({ title: 'deleted', status: 'open' }, { writeConcern: { w: 0 } }));
      await reached;
      await stopMatching();
      const settled = await result;
      expect(settled.ok && settled.value).toEqual({ acknowledged: false, deletedCount: undefined });
      // Every serial execution of the delete removes one of the two: wait for that (bounded).
      await waitUntil(async () => (await raw.countDocuments({ title: 'deleted' })) < 2, LANDED_MS, 50);
    } finally {
      connA.connection.getClient().off('commandStarted', listener);
    }
    // The race happened: the guard's first delete, sent acknowledged, was narrowed to X.
    expect({ racedOnX: JSON.stringify((deletes[0] as { q?: unknown } | undefined)?.q ?? null).includes(x.toHexString()), w: (deletes[0] as { w?: unknown } | undefined)?.w }).toEqual({ racedOnX: true, w: 1 });
    // One of the two is gone (X before its change, or Y): one document is left.
    expect(await raw.countDocuments({ title: 'deleted' })).toBe(1);
  }, 30_000);
});
