/**
 * README "Guarded query writes": "A record the guard inserts only to detect conflicts is deleted in
 * the same transaction, so the lock collection holds records of locks only" (storage stays
 * proportional to locks).
 *
 * In the caller's transaction the guard inserts claim records, sends the write, and deletes them.
 * A write that fails in the driver, before anything is sent (a `Model.collection.updateOne` whose
 * update has no operators: "Update document requires atomic operators"), does not abort the
 * transaction on the server; the caller may catch it, carry on and commit. The guard deletes its
 * claim records before passing such an error on, so none is committed. And the claim records of a
 * multi-document claim carry an `expiresAt` (the epoch), so that one that ever outlived its
 * transaction would be deleted by the TTL index instead of kept forever.
 *
 * Found by the attack on the guard: the claim record was committed with the caller's transaction.
 */
import type { mongo } from 'mongoose';
import { replicaSetOnly } from '../../support/topology';
import { connect, testDatabase, type MonitoredConnection } from '../../support/db';
import { workItemModel, type WorkItemModel } from '../../support/work-item';
import { outcome, rawLocks } from './support';

const db = testDatabase('guard_joinedleftover');
let conn: MonitoredConnection;
let M: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  M = await workItemModel(conn.connection, { ttl: 30_000 });
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

const needsTransactions = replicaSetOnly('caller transactions need a replica set');

type RawWrite = (...args: unknown[]) => Promise<unknown>;
const raw = (name: string): RawWrite => {
  const collection = M.collection as unknown as Record<string, RawWrite>;
  return (...args) => collection[name].call(collection, ...args);
};

needsTransactions.each([
  ['updateOne by _id (one claim)', (id: unknown, _other: unknown, session: mongo.ClientSession) => raw('updateOne')({ _id: id }, { title: 'no operators' }, { session })],
  ['updateMany by _ids (a claim batch)', (id: unknown, other: unknown, session: mongo.ClientSession) =>
    raw('updateMany')({ _id: { $in: [id, other] } }, { title: 'no operators' }, { session })],
  ['bulkWrite (a claim batch)', (id: unknown, other: unknown, session: mongo.ClientSession) =>
    raw('bulkWrite')(
      [
        { updateOne: { filter: { _id: id }, update: { title: 'no operators' } } },
        { updateOne: { filter: { _id: other }, update: { title: 'no operators' } } },
      ],
      { session },
    )],
] as [string, (id: unknown, other: unknown, session: mongo.ClientSession) => Promise<unknown>][])(
  '%s that fails in the driver inside a caller transaction leaves no lock record after the commit',
  async (_name, failing) => {
    const [{ _id: id }, { _id: other }] = await M.create([{ title: 'original' }, { title: 'other' }]);
    const session = await conn.connection.startSession();
    try {
      session.startTransaction();
      const failed = await outcome(failing(id, other, session));
      expect(failed.ok).toBe(false);
      await M.updateOne({ _id: id }, { $set: { status: 'done' } }, { session });
      await session.commitTransaction();
    } finally {
      await session.endSession();
    }
    expect(await rawLocks(M).find({}).toArray()).toEqual([]);
    expect((await M.findById(id).lean())?.status).toBe('done');
  },
);

needsTransactions('the claim records a claim batch inserts carry an expiry in the past, which the TTL index can delete', async () => {
  const [{ _id: id }, { _id: other }] = await M.create([{ title: 'a' }, { title: 'b' }]);
  const lockCollection = M.lockModel().collection.collectionName;
  const inserted: unknown[] = [];
  const listener = (event: mongo.CommandStartedEvent) => {
    if (event.commandName === 'insert' && event.command.insert === lockCollection) inserted.push(...(event.command.documents as unknown[]));
  };
  const client = conn.connection.getClient();
  client.on('commandStarted', listener);
  try {
    await M.updateMany({ _id: { $in: [id, other] } }, { $set: { status: 'done' } });
  } finally {
    client.off('commandStarted', listener);
  }
  expect(inserted).toHaveLength(2);
  for (const record of inserted as { expiresAt?: unknown }[]) {
    expect(record.expiresAt).toEqual(new Date(0));
  }
  expect(await rawLocks(M).countDocuments({})).toBe(0);
});
