/**
 * An acquire whose reply is lost after the grant was written: the driver retries the
 * findAndModify (retryable writes), and the server answers the retry from the stored result.
 *
 * Sources:
 *  - The fault: the `onPrimaryTransactionalWrite` fail point (src/mongo/db/transaction/
 *    transaction_participant.cpp: "closeConnection (bool, default = true): Closes the connection on
 *    which the write was executed"; without failBeforeCommitExceptionCode "the write will be allowed
 *    to commit"), armed as the retryable-writes spec tests arm it
 *    (source/retryable-writes/tests/unified/findOneAndUpdate.json, "FindOneAndUpdate is committed on
 *    first attempt": `{ configureFailPoint: 'onPrimaryTransactionalWrite', mode: { times: 1 } }`).
 *  - The driver retries a retryable write once after a network error, with the same lsid and
 *    txnNumber (retryable-writes specification, "Executing Retryable Write Commands").
 *  - The retry's reply: parseOplogEntryForFindAndModify
 *    (src/mongo/db/query/write_ops/write_ops_retryability.cpp) returns the stored post-image
 *    (`returnDocument: 'after'`), `lastErrorObject` `{ n: 1, updatedExisting: ... }` or the upserted
 *    `_id`, and never applies the request's projection (SERVER-31242, SERVER-48368).
 *  - The plugin recognises its own grant in such a reply by its token (LockStore.acquire,
 *    src/lock-store.ts).
 * Retryable writes need a replica set (a standalone refuses txnNumber), so this runs on a private
 * replica-set server; the fail point is server-wide, so no other file shares that server.
 */
import { MongoClient, type CommandSucceededEvent, type Document } from 'mongodb';
import { LockedError } from '../../src';
import { startPrivateBackend } from '../../test-backend/test-env';
import { connectTo, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('retried_acquire');
let server: { uri: string; stop(): Promise<void> } | undefined;
let conn: MonitoredConnection | undefined;
/** Verification reads go through a client of their own, not through the plugin's connection. */
let raw: MongoClient | undefined;
/** Replies to the plugin's findAndModify commands, in order. */
const replies: Document[] = [];
let WorkItem: WorkItemModel;
let skip: string | undefined;

beforeAll(async () => {
  const started = await startPrivateBackend('replset');
  if ('unsupported' in started) {
    skip = started.unsupported;
    return;
  }
  server = started;
  conn = await connectTo(started.uri, db.name, { retryWrites: true });
  conn.connection.getClient().on('commandSucceeded', (event: CommandSucceededEvent) => {
    if (event.commandName === 'findAndModify') replies.push(event.reply as Document);
  });
  raw = new MongoClient(started.uri);
  await raw.connect();
  WorkItem = await workItemModel(conn.connection, { ttl: 30_000 }, 'RetriedAcquireItem');
}, 60_000);

afterAll(async () => {
  if (conn) {
    await conn.connection.getClient().db('admin').command({ configureFailPoint: 'onPrimaryTransactionalWrite', mode: 'off' }).catch(() => undefined);
    await db.drop(conn.connection).catch(() => undefined);
    await conn.close();
  }
  await raw?.close();
  await server?.stop();
});

async function lockRecords(id: unknown): Promise<Array<Record<string, unknown>>> {
  const name = WorkItem.lockModel().collection.collectionName;
  return (await raw!.db(db.name).collection(name).find({ _id: id } as never).toArray()) as Array<Record<string, unknown>>;
}

async function armCloseAfterWrite(): Promise<void> {
  await raw!.db('admin').command({ configureFailPoint: 'onPrimaryTransactionalWrite', mode: { times: 1 } });
}

for (const situation of ['the first acquire (an upsert)', 'an acquire over a released lock (an update)'] as const) {
  test(`${situation}: the connection closes after the write, the retried findAndModify grants the lock once`, async () => {
    if (skip) {
      console.log(`retried-acquire: skipped (${skip})`);
      return;
    }
    const { _id: id } = await WorkItem.create({ title: 'x' });
    if (situation !== 'the first acquire (an upsert)') {
      const earlier = await WorkItem.lock(id, 'carol');
      await earlier.unlock();
    }
    const fenceBefore = Number((await lockRecords(id))[0]?.fence ?? 0);

    await armCloseAfterWrite();
    conn!.resetCommands();
    replies.length = 0;
    const item = await WorkItem.lock(id, 'alice');
    // The first attempt wrote and lost its reply; the driver sent it again, and the retry was
    // answered from the stored post-image: the whole record, not the requested projection.
    expect(conn!.commands.filter((c) => c === 'findAndModify')).toHaveLength(2);
    expect(replies).toHaveLength(1);
    const value = replies[0].value as Document;
    expect(value).not.toHaveProperty('acquired');
    expect(value).not.toHaveProperty('now');
    expect(value._id).toEqual(id);
    expect(value.token).toBe(item.heldLock()!.token);
    expect(replies[0].lastErrorObject).toEqual(
      situation === 'the first acquire (an upsert)' ? { n: 1, updatedExisting: false, upserted: id } : { n: 1, updatedExisting: true },
    );
    expect(item.heldLock()).not.toBeNull();

    // Held exactly once, by this acquisition.
    const records = await lockRecords(id);
    expect(records).toHaveLength(1);
    expect(records[0].token).toBe(item.heldLock()!.token);
    expect(Number(records[0].fence)).toBeGreaterThan(fenceBefore);
    const info = await WorkItem.getLock(id);
    expect(info).not.toBeNull();
    expect(info!.expiresAt.getTime()).toBe(item.heldLock()!.expiresAt.getTime());
    await expect(WorkItem.lock(id, 'bob')).rejects.toBeInstanceOf(LockedError);

    // And it is a working lock: the holder saves and releases it.
    item.set('title', 'y');
    await item.saveAndUnlock();
    expect(await WorkItem.getLock(id)).toBeNull();
  });
}
