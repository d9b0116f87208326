/**
 * In check-then-write mode (`transactions: 'never'`, and every write on a standalone server) an
 * upsert is never pinned and never re-run (PRODUCT.md property 10: writes to documents nobody has
 * locked succeed as they would without the plugin, also under contention).
 *
 * A single-document write whose filter does not name `_id` is checked against the document a
 * `find` returns and then sent "pinned" to that `_id`. With `upsert: true` the pin changed what
 * the write does when that document stops matching between the find and the write (someone
 * changed or deleted it; no lock involved):
 *  - changed: the pinned upsert matched nothing and inserted a document seeded with the pinned
 *    `_id`, which exists: E11000 duplicate key (without the plugin: a new document);
 *  - deleted: the pinned upsert re-created it; `findOneAndUpdate` returns `null` (the document
 *    before), which the guard read as "touched nothing" and ran the write AGAIN: a `$inc` applied
 *    twice.
 * Now (issue 16) what the search found is written without `upsert` and re-searched when it
 * matched nothing, and only a search that found nothing sends the upsert, which can then only
 * insert (write-guard.ts, checkThenWrite; check-mode-upsert-stopped-matching.test.ts). The window
 * (one round trip) is widened by a fail point that delays A's write.
 * (Found by the attack run, `__tests__/attack/check-mode-pinned-upsert.test.ts`.)
 */
import { deploymentFacts, describeIf } from '../../conformance/support/server';
import { connect, testDatabase, type MonitoredConnection } from '../../support/db';
import { workItemModel, type WorkItemModel } from '../../support/work-item';
import { blockCommands, failPointOff, outcome, rawCollection } from './support';
import { usesPrivateServer } from '../../support/private-server';

// This file configures failCommand: on a server of its own where it can (support/private-server.ts).
usesPrivateServer();

const db = testDatabase('checkmodeupsert');
const APP_A = `mpl-checkmode-upsert-${process.pid}`;
let connA: MonitoredConnection;
let other: MonitoredConnection;
let A: WorkItemModel;

describeIf(deploymentFacts().failPoints, 'needs fail points')("check-then-write (transactions: 'never')", () => {
  beforeAll(async () => {
    connA = await connect(db.name, { appName: APP_A, retryWrites: false });
    other = await connect(db.name);
    A = await workItemModel(connA.connection, { ttl: 30_000, transactions: 'never' }, 'PinUpsert');
  });

  afterAll(async () => {
    await failPointOff(other.connection);
    await db.drop(other.connection);
    await Promise.all([connA.close(), other.close()]);
  });

  afterEach(async () => {
    await failPointOff(other.connection);
  });

  /** Runs `write` with A's next `command` held 1 s, and `meanwhile` while it is held. */
  async function raced<T>(command: string, write: () => Promise<T>, meanwhile: () => Promise<unknown>) {
    const namespace = `${db.name}.${A.collection.collectionName}`;
    const reached = new Promise<void>((resolve) => {
      const listener = (event: { commandName: string; command: Record<string, unknown> }) => {
        if (event.commandName === command && event.command[command] === A.collection.collectionName) {
          connA.connection.getClient().off('commandStarted', listener);
          resolve();
        }
      };
      connA.connection.getClient().on('commandStarted', listener);
    });
    await blockCommands(other.connection, { appName: APP_A, namespace, commands: [command], blockTimeMS: 1_000 });
    const result = outcome(write());
    await reached;
    await meanwhile();
    return result;
  }

  test('updateOne(filter, update, { upsert: true }) whose target stopped matching upserts instead of failing with E11000', async () => {
    const raw = rawCollection(A);
    await raw.deleteMany({});
    const { _id: t } = await A.create({ title: 'queue', status: 'open', edits: 0 });
    const result = await raced(
      'update',
      () => A.updateOne({ title: 'queue', status: 'open' }, { $inc: { edits: 1 } }, { upsert: true }).exec(),
      () => raw.updateOne({ _id: t }, { $set: { status: 'done' } }),
    );
    expect(result.ok ? 'ok' : String((result.error as Error).message)).toBe('ok');
    expect(await raw.countDocuments({ title: 'queue', status: 'open' })).toBe(1);
  }, 20_000);

  test('findOneAndUpdate(filter, $inc, { upsert: true }) whose target was deleted applies the $inc once', async () => {
    const raw = rawCollection(A);
    await raw.deleteMany({});
    const { _id: t } = await A.create({ title: 'counter', status: 'open', edits: 0 });
    const result = await raced(
      'findAndModify',
      () => A.findOneAndUpdate({ title: 'counter' }, { $inc: { edits: 1 } }, { upsert: true }).exec(),
      () => raw.deleteOne({ _id: t }),
    );
    expect(result.ok).toBe(true);
    const docs = await raw.find({ title: 'counter' }).toArray();
    expect(docs.map((d) => d.edits)).toEqual([1]);
  }, 20_000);
});
