/**
 * Defect 8 of issue 10: guarded multi-document writes keep storage proportional to locks (the
 * records the guard writes only to detect conflicts are deleted in the same transaction), run in
 * bounded batches, and say what happened when a target was locked half-way. Speed is measured in
 * `npm run bench`, not here.
 */
import { LockedDuringWriteError, LockedError, type LockPluginOptions } from '../../../src';
import { GUARD_BATCH_SIZE } from '../../../src/guard/write-guard';
import { deploymentFacts, describeIf } from '../../conformance/support/server';
import { connect, testDatabase, type MonitoredConnection } from '../../support/db';
import { workItemModel, type WorkItemModel } from '../../support/work-item';
import { blockCommands, failPointOff, outcome, rawCollection, rawLocks } from './support';
import { usesPrivateServer } from '../../support/private-server';

// This file configures failCommand: on a server of its own where it can (support/private-server.ts).
usesPrivateServer();

const db = testDatabase('multidoc');
let conn: MonitoredConnection;

beforeAll(async () => {
  conn = await connect(db.name);
});

afterAll(async () => {
  await failPointOff(conn.connection).catch(() => undefined);
  await db.drop(conn.connection);
  await conn.close();
});

async function seed(M: WorkItemModel, count: number, title: string) {
  const docs = await M.insertMany(Array.from({ length: count }, (_, i) => ({ title, status: 'open' as const, edits: i })));
  return docs.map((d) => d._id);
}

describe.each([
  ["transactions: 'auto'", { ttl: 10_000 }],
  ["transactions: 'never'", { ttl: 10_000, transactions: 'never' }],
] as [string, LockPluginOptions][])('%s', (_label, options) => {
  let M: WorkItemModel;
  beforeAll(async () => {
    M = await workItemModel(conn.connection, options);
  });

  test('no lock record is left behind by guarded writes to documents nobody locked', async () => {
    const ids = await seed(M, 120, 'clean');
    await M.updateMany({ title: 'clean' }, { $inc: { edits: 1 } });
    await M.updateMany({ _id: { $in: ids } }, { $inc: { edits: 1 } });
    await M.updateOne({ _id: ids[0] }, { $inc: { edits: 1 } });
    await M.findOneAndUpdate({ title: 'clean' }, { $inc: { edits: 1 } }, { sort: { edits: -1 } });
    await M.bulkWrite(ids.slice(0, 10).map((id) => ({ updateOne: { filter: { _id: id }, update: { $inc: { edits: 1 } } } })));
    await M.deleteMany({ _id: { $in: ids.slice(100) } });
    expect(await rawLocks(M).countDocuments({})).toBe(0);
  });

  test(`updateMany over more than one batch (${GUARD_BATCH_SIZE}) writes every document once`, async () => {
    const count = GUARD_BATCH_SIZE * 2 + 37;
    await seed(M, count, 'batched');
    const result = await M.updateMany({ title: 'batched' }, { $inc: { edits: 1000 } });
    expect(result.matchedCount).toBe(count);
    expect(result.modifiedCount).toBe(count);
    const edits = (await M.find({ title: 'batched' }).sort({ edits: 1 }).lean()).map((d) => d.edits);
    expect(edits).toEqual(Array.from({ length: count }, (_, i) => i + 1000));
    expect(await rawLocks(M).countDocuments({})).toBe(0);
  }, 120_000);

  test('a target locked before the write starts: the whole updateMany is refused, nothing written', async () => {
    const count = GUARD_BATCH_SIZE + 10;
    const ids = await seed(M, count, 'refused-whole');
    await M.lock(ids[count - 1], 'holder');
    const error = await M.updateMany({ title: 'refused-whole' }, { $inc: { edits: 1_000_000 } }).exec().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockedError);
    expect(error).not.toBeInstanceOf(LockedDuringWriteError);
    expect((error as LockedError).documentId).toEqual(ids[count - 1]);
    expect(await M.countDocuments({ title: 'refused-whole', edits: { $gte: 1_000_000 } })).toBe(0);
  }, 120_000);
});

describeIf(deploymentFacts().setName !== undefined && deploymentFacts().failPoints, 'needs a replica set (batches are transactions) and fail points')('a target locked half-way', () => {
  test('earlier batches stay written, the rest is refused, and LockedDuringWriteError says how much was written', async () => {
    const APP = `mpl-multidoc-${process.pid}`;
    const writer = await connect(db.name, { appName: APP, retryWrites: false });
    try {
      const M = await workItemModel(writer.connection, { ttl: 10_000 }, 'HalfWay');
      const L = await workItemModel(conn.connection, { ttl: 10_000 }, 'HalfWay');
      const count = GUARD_BATCH_SIZE * 2 + 5;
      const ids = await seed(M, count, 'half-way');
      // Hold the second batch's write on the server, lock a document of the last batch meanwhile.
      await blockCommands(conn.connection, { appName: APP, namespace: `${db.name}.${M.collection.collectionName}`, commands: ['update'], blockTimeMS: 1_500, times: 2 });
      const firstWrite = new Promise<void>((resolve) => {
        const listener = (event: { commandName: string; command: Record<string, unknown> }) => {
          if (event.commandName === 'update' && event.command.update === M.collection.collectionName) {
            writer.connection.getClient().off('commandStarted', listener);
            resolve();
          }
        };
        writer.connection.getClient().on('commandStarted', listener);
      });
      const pending = outcome(M.updateMany({ title: 'half-way' }, { $inc: { edits: 1_000_000 } }).exec());
      await firstWrite; // the first batch is being written: the scan and its lock check are over
      const lastId = ids[count - 1];
      await L.lock(lastId, 'holder', { ttl: 120_000 });
      const settled = await pending;
      expect(settled.ok).toBe(false);
      const error = (settled as { error: unknown }).error;
      expect(error).toBeInstanceOf(LockedDuringWriteError);
      expect(error).toBeInstanceOf(LockedError);
      expect((error as LockedDuringWriteError).documentId).toEqual(lastId);
      expect((error as LockedDuringWriteError).committed).toEqual({ matchedCount: GUARD_BATCH_SIZE * 2, modifiedCount: GUARD_BATCH_SIZE * 2, deletedCount: 0 });
      expect(await M.countDocuments({ title: 'half-way', edits: { $gte: 1_000_000 } })).toBe(GUARD_BATCH_SIZE * 2);
      expect((await rawCollection(M).findOne({ _id: lastId }))?.edits).toBe(count - 1);
      expect(await rawLocks(M).countDocuments({ _id: { $ne: lastId } })).toBe(0);
    } finally {
      await failPointOff(conn.connection);
      await writer.close();
    }
  }, 60_000);
});
