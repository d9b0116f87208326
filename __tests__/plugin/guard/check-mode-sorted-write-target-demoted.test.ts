/**
 * Issue 16, item 1, with `sort`: in check mode (`transactions: 'never'`, standalone servers) a
 * guarded `findOneAndUpdate` with a `sort` searches the first document by that sort (X), and sends
 * the write narrowed to X (write-guard.ts, checkThenWrite). If, before the write arrives, X is
 * changed so that it still matches but is no longer first (someone lowered its priority) and that
 * same change touches a field the write also sets, the guard writes X anyway: an outcome no serial
 * execution of the unguarded write produces (PRODUCT.md property 10; the change's own claim:
 * "never produce an outcome that no serial execution of the unguarded write could produce").
 *
 * X { edits: 5 } and Y { edits: 3 } are open; the write is
 * `findOneAndUpdate({ status: 'open' }, { $set: { title: 'taken' } }, { sort: { edits: -1 } })`;
 * meanwhile another client sets X to `{ edits: 0, title: 'demoted' }`. The serial executions:
 *  - the write first: it takes X, then X becomes `{ edits: 0, title: 'demoted' }`; Y untouched;
 *  - the other write first: X `{ 0, 'demoted' }`, and the write takes Y (now first).
 * Either way X ends with title 'demoted'. The guard leaves X `{ edits: 0, title: 'taken' }` and Y
 * untouched (and returns X as it is after both writes, a document that was never first when it
 * looked like that). Only a found document that stopped MATCHING is searched again; one that stopped
 * being FIRST is not. Atomic mode is correct (the guard's transaction conflicts and is retried): run
 * here as the control where the deployment has transactions.
 *
 * A fix could add the found document's sort-key values to the narrowed filter (so a document whose
 * sort key changed no longer matches and is searched again); a document that starts to sort before
 * X while X is unchanged is the "as if the write had run at the search" the README already allows.
 *
 * Status when committed (attack on 8078351): the check-mode case FAILS (X ends 'taken').
 */
import { mongo } from 'mongoose';
import { deploymentFacts, describeIf } from '../../conformance/support/server';
import { connect, testDatabase, type MonitoredConnection } from '../../support/db';
import { workItemModel, type WorkItemModel } from '../../support/work-item';
import { usesPrivateServer } from '../../support/private-server';
import { replicaSetOnly } from '../../support/topology';
import { blockCommands, failPointOff, outcome, rawCollection } from './support';

// This file configures failCommand: on a server of its own where it can (support/private-server.ts).
usesPrivateServer();

const db = testDatabase('checksorteddemoted');
const APP_A = `mpl-check-sorted-${process.pid}`;
let connA: MonitoredConnection;
let other: MonitoredConnection;
let Never: WorkItemModel;
let Auto: WorkItemModel;
/** The filters of the findAndModify commands A's client sent on the models' collections. */
const sent: unknown[] = [];

describeIf(deploymentFacts().failPoints, 'needs fail points')('a sorted findOneAndUpdate whose found document stops being first before the write', () => {
  beforeAll(async () => {
    connA = await connect(db.name, { appName: APP_A, retryWrites: false });
    other = await connect(db.name);
    Never = await workItemModel(connA.connection, { ttl: 30_000, transactions: 'never' }, 'SortedNever');
    Auto = await workItemModel(connA.connection, { ttl: 30_000 }, 'SortedAuto');
    connA.connection.getClient().on('commandStarted', (event) => {
      const c = event.command as Record<string, unknown>;
      if (event.commandName === 'findAndModify' && typeof c.findAndModify === 'string' && !c.findAndModify.endsWith('.locks')) sent.push(c.query);
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

  /** Runs `write` with A's next findAndModify on `model`'s collection held 1 s, and `meanwhile` while it is held. */
  async function raced<T>(model: WorkItemModel, write: () => Promise<T>, meanwhile: () => Promise<unknown>) {
    const collection = model.collection.collectionName;
    const reached = new Promise<void>((resolve) => {
      const listener = (event: { commandName: string; command: Record<string, unknown> }) => {
        if (event.commandName === 'findAndModify' && event.command.findAndModify === collection) {
          connA.connection.getClient().off('commandStarted', listener);
          resolve();
        }
      };
      connA.connection.getClient().on('commandStarted', listener);
    });
    await blockCommands(other.connection, { appName: APP_A, namespace: `${db.name}.${collection}`, commands: ['findAndModify'], blockTimeMS: 1_000 });
    const result = outcome(write());
    await reached;
    await meanwhile();
    return result;
  }

  const scenario = async (mode: 'never' | 'auto', upsert: boolean) => {
    const M = mode === 'never' ? Never : Auto;
    const raw = rawCollection(M);
    await raw.deleteMany({});
    const x = new mongo.ObjectId();
    const y = new mongo.ObjectId();
    await raw.insertMany([
      { _id: x, title: 'x', status: 'open', edits: 5 },
      { _id: y, title: 'y', status: 'open', edits: 3 },
    ]);
    sent.length = 0;
    const result = await raced(
      M,
      () => M.findOneAndUpdate({ status: 'open' }, { $set: { title: 'taken' } }, { sort: { edits: -1 }, returnDocument: 'after', upsert }).lean().exec(),
      () => raw.updateOne({ _id: x }, { $set: { edits: 0, title: 'demoted' } }),
    );
    const stored = (await raw.find({}).sort({ _id: 1 }).toArray()).map((d) => ({ id: String(d._id) === String(x) ? 'X' : String(d._id) === String(y) ? 'Y' : 'new', title: d.title as unknown, edits: d.edits as unknown }));
    // The race happened: the guard's first write was the one narrowed to X (found first).
    const racedOnX = JSON.stringify(sent[0] ?? null).includes(x.toHexString());
    // The serial outcomes: X 'demoted' in both; Y 'taken' (the other writer first) or 'y' (the write first).
    expect({ racedOnX, ok: result.ok, x: stored.find((d) => d.id === 'X'), inserted: stored.filter((d) => d.id === 'new').length }).toEqual({
      racedOnX: true,
      ok: true,
      x: { id: 'X', title: 'demoted', edits: 0 },
      inserted: 0,
    });
  };

  test.each([
    ['without upsert', false],
    ['with upsert', true],
  ])("transactions: 'never', %s: X, demoted and changed meanwhile, is not written by the guard (X ends as the other writer left it)", (_name, upsert) => scenario('never', upsert), 30_000);

  replicaSetOnly("transactions: 'auto' is check mode on a standalone server").each([
    ['without upsert', false],
    ['with upsert', true],
  ])("control, transactions: 'auto' (the guard's own transaction), %s: X ends as the other writer left it", (_name, upsert) => scenario('auto', upsert), 30_000);
});
