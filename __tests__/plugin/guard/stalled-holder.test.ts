/**
 * Issue 10's "done when": a stalled holder never lands a stale write, on any guarded path, under
 * `transactions: 'auto'` (PRODUCT.md property 5). Holder A takes the lock with a short ttl and
 * starts a write; a fail point blocks A's write of the document (only A's connection, only the
 * document's namespace) until well past A's ttl. Meanwhile owner B takes the lock over, reads the
 * document and writes it. Afterwards the document must be exactly what B wrote: A's write was
 * either refused or committed before B's tenure began (B then saw it when it loaded).
 *
 * Why this holds on mongod: A's check writes A's lock record inside A's transaction, so B's
 * takeover (a write of that record outside any transaction) waits until A's transaction commits
 * or aborts (jstests/core/txns/write_conflicts_with_non_txns.js: a non-transactional write to a
 * document written by a running transaction retries until the transaction ends).
 *
 * Covers defects 5 (a session outside a transaction) and 6 (plain save() and doc.deleteOne()).
 * Needs a replica set and fail points.
 */
import type { ClientSession } from 'mongoose';
import { LockTargetNotFoundError, runWithLockOwner } from '../../../src';
import { deploymentFacts, describeIf } from '../../conformance/support/server';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../../support/db';
import { workItemModel, type WorkItemModel } from '../../support/work-item';
import { blockCommands, failPointOff, outcome, rawCollection } from './support';
import { usesPrivateServer } from '../../support/private-server';

// This file configures failCommand: on a server of its own where it can (support/private-server.ts).
usesPrivateServer();

const db = testDatabase('stalled');
const APP_A = `mpl-stalled-a-${process.pid}`;
let connA: MonitoredConnection;
let connB: MonitoredConnection;
let admin: MonitoredConnection;
let A: WorkItemModel;
let B: WorkItemModel;

/** A's ttl: long enough for A's write to reach the server before it expires, also on a loaded machine. */
const TTL = 1_000;
/** How long the fail point holds A's document write: well past A's ttl. */
const BLOCK_MS = 3_000;
type Doc = Awaited<ReturnType<WorkItemModel['lock']>>;
/** A's write options. (Typed loosely: the `lockOwner` declaration reaches Mongoose 8's types only when both share one mongodb package.) */
const asA: Record<string, unknown> = { lockOwner: 'holder-a' };

/** One guarded write by holder A, given the lock it took (a document) and its id. */
type StaleWrite = (doc: Doc, id: unknown) => Promise<unknown>;

const paths: [string, 'update' | 'delete', StaleWrite][] = [
  ['doc.save()', 'update', (doc) => { doc.title = 'stale A'; return doc.save(); }],
  ['doc.saveAndUnlock()', 'update', (doc) => { doc.title = 'stale A'; return doc.saveAndUnlock(); }],
  ['doc.deleteOne()', 'delete', (doc) => doc.deleteOne()],
  ['updateOne with lockOwner', 'update', (_d, id) => A.updateOne({ _id: id }, { $set: { title: 'stale A' } }, asA).exec()],
  ['updateOne by a field, in the owner context', 'update', (_d, id) => runWithLockOwner('holder-a', () => A.updateOne({ _id: id, status: 'open' }, { $set: { title: 'stale A' } }).exec())],
  ['updateMany with lockOwner', 'update', (_d, id) => A.updateMany({ _id: id }, { $set: { title: 'stale A' } }, asA).exec()],
  ['findOneAndUpdate with lockOwner', 'update', (_d, id) => A.findOneAndUpdate({ _id: id }, { $set: { title: 'stale A' } }, asA).exec()],
  ['findOneAndReplace with lockOwner', 'update', (_d, id) => A.findOneAndReplace({ _id: id }, { title: 'stale A', status: 'open', edits: 0 }, asA).exec()],
  ['replaceOne with lockOwner', 'update', (_d, id) => A.replaceOne({ _id: id }, { title: 'stale A', status: 'open', edits: 0 }, asA).exec()],
  ['deleteOne with lockOwner', 'delete', (_d, id) => A.deleteOne({ _id: id }, asA).exec()],
  ['deleteMany with lockOwner', 'delete', (_d, id) => A.deleteMany({ _id: id }, asA).exec()],
  ['findOneAndDelete with lockOwner', 'delete', (_d, id) => A.findOneAndDelete({ _id: id }, asA).exec()],
  ['bulkWrite with lockOwner', 'update', (_d, id) => A.bulkWrite([{ updateOne: { filter: { _id: id }, update: { $set: { title: 'stale A' } } } }], asA)],
  ['updateOne with lockOwner and a session outside a transaction', 'update', async (_d, id) => {
    const session: ClientSession = await connA.connection.startSession();
    try {
      return await A.updateOne({ _id: id }, { $set: { title: 'stale A' } }, { ...asA, session }).exec();
    } finally {
      await session.endSession();
    }
  }],
  ['doc.save({ session }) with a session outside a transaction', 'update', async (doc) => {
    const session: ClientSession = await connA.connection.startSession();
    try {
      doc.title = 'stale A';
      return await doc.save({ session });
    } finally {
      doc.$session(null);
      await session.endSession();
    }
  }],
];

describeIf(deploymentFacts().setName !== undefined && deploymentFacts().failPoints, 'needs a replica set (transactions) and fail points')('a stalled holder', () => {
  beforeAll(async () => {
    connA = await connect(db.name, { appName: APP_A, retryWrites: false });
    connB = await connect(db.name);
    admin = await connect(db.name);
    A = await workItemModel(connA.connection, { ttl: 10_000 }, 'Stalled');
    B = await workItemModel(connB.connection, { ttl: 10_000 }, 'Stalled');
  });

  afterAll(async () => {
    await failPointOff(admin.connection);
    await db.drop(admin.connection);
    await Promise.all([connA.close(), connB.close(), admin.close()]);
  });

  afterEach(async () => {
    await failPointOff(admin.connection);
  });

  test.each(paths)('%s: no stale write lands after the takeover', async (_name, command, write) => {
    const { _id: id } = await B.create({ title: 'original' });
    const holder = await A.lock(id, 'holder-a', { ttl: TTL });
    const lockedAt = Date.now();
    const namespace = `${db.name}.${A.collection.collectionName}`;
    const started = new Promise<void>((resolve) => {
      const listener = (event: { commandName: string; command: Record<string, unknown> }) => {
        if ((event.commandName === command || event.commandName === 'findAndModify') && event.command[event.commandName] === A.collection.collectionName) {
          connA.connection.getClient().off('commandStarted', listener);
          resolve();
        }
      };
      connA.connection.getClient().on('commandStarted', listener);
    });
    await blockCommands(admin.connection, { appName: APP_A, namespace, commands: [command, 'findAndModify'], blockTimeMS: BLOCK_MS });

    const stale = outcome(write(holder, id));
    // A's document write reaches the server and is held there by the fail point (unless the
    // machine was so slow that A's lock expired first and the guard refused A outright).
    const reached = await Promise.race([started.then(() => true), stale.then(() => false)]);
    if (!reached) console.warn(`stalled holder / ${_name}: A was refused before its write reached the server (lock expired first); the race was not exercised this time`);
    await sleep(Math.max(0, TTL + 100 - (Date.now() - lockedAt))); // A's ttl has passed

    // B takes over, reads what is there, writes.
    const taken = await outcome(B.lock(id, 'holder-b'));
    let expected: string | null;
    if (taken.ok) {
      const fresh = taken.value;
      fresh.title = 'written by B';
      await fresh.save();
      expected = 'written by B';
    } else {
      // A's delete committed before B's takeover could proceed: B finds nothing to lock.
      expect(taken.error).toBeInstanceOf(LockTargetNotFoundError);
      expected = null;
    }
    await stale;
    const stored = await rawCollection(B).findOne({ _id: id });
    expect(stored === null ? null : stored.title).toBe(expected);
    if (taken.ok) await taken.value.unlock();
  }, 60_000);
});
