/**
 * A guarded `updateMany` / `deleteMany` whose target search found nothing does not land on a
 * document that someone locks, and saves into the filter, while the write is on its way
 * (PRODUCT.md property 6; README: the check and the write are one transaction under
 * `transactions: 'auto'`).
 *
 * The search runs outside any transaction; when it finds nothing, the guard searches again as the
 * first statement of its own transaction and claims what that finds, so the write sees exactly
 * that snapshot (compatibility record, divergence 5). `empty-search.test.ts` holds Bob's search or
 * write while the holder saves; this test holds the anonymous writer's write while a holder LOCKS,
 * loads and saves the document into the filter, for updateMany and deleteMany. It passed since
 * that fix (commit d5b4107) and is kept as coverage of the multi-document path, which now also
 * routes upserts and collated string ids through the same one-transaction write. (From the attack
 * run, `__tests__/attack/multi-zero-targets.test.ts`.)
 */
import { LockedError } from '../../../src';
import { deploymentFacts, describeIf } from '../../conformance/support/server';
import { connect, testDatabase, type MonitoredConnection } from '../../support/db';
import { workItemModel, type WorkItemModel } from '../../support/work-item';
import { blockCommands, failPointOff, outcome, rawCollection } from './support';
import { usesPrivateServer } from '../../support/private-server';

// This file configures failCommand: on a server of its own where it can (support/private-server.ts).
usesPrivateServer();

const db = testDatabase('multizero');
const APP_A = `mpl-multizero-${process.pid}`;
let connA: MonitoredConnection;
let connB: MonitoredConnection;
let admin: MonitoredConnection;
let A: WorkItemModel;
let B: WorkItemModel;

describeIf(deploymentFacts().setName !== undefined && deploymentFacts().failPoints, 'needs a replica set and fail points')('multi-document write that found no targets', () => {
  beforeAll(async () => {
    connA = await connect(db.name, { appName: APP_A, retryWrites: false });
    connB = await connect(db.name);
    admin = await connect(db.name);
    A = await workItemModel(connA.connection, { ttl: 30_000 }, 'MultiZero');
    B = await workItemModel(connB.connection, { ttl: 30_000 }, 'MultiZero');
  });

  afterAll(async () => {
    await failPointOff(admin.connection);
    await db.drop(admin.connection);
    await Promise.all([connA.close(), connB.close(), admin.close()]);
  });

  afterEach(async () => {
    await failPointOff(admin.connection);
  });

  test.each([
    ['updateMany', 'update', (): Promise<unknown> => A.updateMany({ title: 'ready' }, { $set: { status: 'done' } }).exec()],
    ['deleteMany', 'delete', (): Promise<unknown> => A.deleteMany({ title: 'ready' }).exec()],
  ] as const)('%s by an anonymous writer does not land on a document locked while it ran', async (_name, command, write) => {
    await rawCollection(B).deleteMany({});
    const { _id: id } = await B.create({ title: 'draft', status: 'open' });
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
    await blockCommands(admin.connection, { appName: APP_A, namespace, commands: [command], blockTimeMS: 1_500 });

    // A: "mark every ready item done" — nothing is ready yet.
    const aWrite = outcome(write());
    await reached;
    // B locks X, loads it and makes it ready while A's write is on its way.
    const held = await B.lock(id, 'holder-b');
    held.title = 'ready';
    await held.save();
    expect(await B.isLocked(id)).toBe(true);

    const result = await aWrite;
    const stored = await rawCollection(B).findOne({ _id: id });
    // B still holds X: A, anonymous, must not have changed it.
    expect(stored).not.toBeNull();
    expect(stored!.status).toBe('open');
    if (!result.ok) expect(result.error).toBeInstanceOf(LockedError);
    await held.unlock();
  }, 30_000);
});
