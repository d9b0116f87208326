/**
 * A guarded updateMany whose target search finds nothing must not write unchecked a document
 * that starts to match afterwards (PRODUCT.md property 6). Found by the compatibility review:
 * the search ran before the guard's transaction existed, and the write then ran in a transaction
 * whose snapshot was taken only at the write itself (a transaction's snapshot is fixed by its
 * first statement: manual, "Transactions and Read Concern", snapshot; the emulator does the
 * same), so it saw, and wrote, a document the holder had saved into the filter meanwhile.
 *
 * Alice holds D (`status: 'open'`). Bob, holding nothing, runs `updateMany({ status: 'done' })`.
 * A fail point holds Bob's write (only Bob's connection, only this namespace) while Alice saves D
 * with `status: 'done'` and keeps the lock. Afterwards D must carry Alice's edit: Bob's write either
 * matched nothing (its snapshot predates Alice's save) or was refused because D is locked.
 */
import { LockedError } from '../../../src';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../../support/db';
import { replicaSetOnly } from '../../support/topology';
import { workItemModel, type WorkItemModel } from '../../support/work-item';
import { blockCommands, failPointOff, outcome, rawCollection } from './support';
import { usesPrivateServer } from '../../support/private-server';

// This file configures failCommand: on a server of its own where it can (support/private-server.ts).
usesPrivateServer();

const db = testDatabase('emptysearch');
const APP_BOB = `mpl-empty-search-bob-${process.pid}`;
let connAlice: MonitoredConnection;
let connBob: MonitoredConnection;
let admin: MonitoredConnection;
let Alice: WorkItemModel;
let Bob: WorkItemModel;

beforeAll(async () => {
  connAlice = await connect(db.name);
  connBob = await connect(db.name, { appName: APP_BOB, retryWrites: false });
  admin = await connect(db.name);
  Alice = await workItemModel(connAlice.connection, { ttl: 30_000 }, 'EmptySearchItem');
  Bob = await workItemModel(connBob.connection, { ttl: 30_000 }, 'EmptySearchItem');
});

afterAll(async () => {
  await failPointOff(admin.connection).catch(() => undefined);
  await db.drop(admin.connection);
  await Promise.all([connAlice.close(), connBob.close(), admin.close()]);
});

describe.each(['update', 'find'])("Bob's %s is held while Alice saves the locked document into his filter", (blocked) => {
  replicaSetOnly('the guard runs its own transaction only on replica sets')('the locked document keeps Alice\'s edit', async () => {
    const { _id: id } = await Alice.create({ title: 'draft', status: 'open' });
    const held = await Alice.lock(id, 'alice');
    const namespace = `${db.name}.${Alice.collection.collectionName}`;
    // The first matching command of Bob's on this namespace is held: with 'find' his target
    // search, with 'update' his write.
    await blockCommands(admin.connection, { appName: APP_BOB, namespace, commands: [blocked], blockTimeMS: 800 });
    const bob = outcome(Bob.updateMany({ status: 'done' }, { $set: { title: 'bob was here' } }).exec());
    await sleep(250);
    held.title = 'alice finished';
    held.status = 'done';
    await held.save(); // Alice keeps the lock: Bob may not write D at all while she holds it
    const result = await bob;
    await failPointOff(admin.connection);

    const stored = await rawCollection(Alice).findOne({ _id: id });
    expect(stored?.title).toBe('alice finished');
    expect(held.heldLock()).not.toBeNull();
    await held.unlock();
    if (result.ok) expect((result.value as { modifiedCount: number }).modifiedCount).toBe(0);
    else expect(result.error).toBeInstanceOf(LockedError);
  });
});
