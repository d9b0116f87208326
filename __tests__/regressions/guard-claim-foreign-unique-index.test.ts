/**
 * A unique index made by hand over every record of a lock collection (a unique `{ owner: 1 }`)
 * also breaks the write guard's claims: in atomic mode a guarded write of several unlocked
 * documents inserts one claim record per document in its transaction (LockStore.claimForWrite,
 * one `insert` of `{ _id, claim, expiresAt }`), and the second record without an owner collides
 * with the first on that index. The single-lock path and groups report it as the configuration
 * fault it is (LockConfigurationError naming the index: foreign-unique-index-typed-error,
 * group-foreign-unique-index); so must the guard, at once: a duplicate key taken for a lost
 * insert race (ClaimRaceError, labelled TransientTransactionError) would run the transaction
 * again and again until the driver's withTransaction gives up after 120 s. (This pins what
 * claimForWrite's foreignUniqueIndex already does; it was written to check a suspicion, and passed.)
 * Needs transactions (atomic mode): skipped on a standalone server.
 */
import type { Connection } from 'mongoose';
import { LockConfigurationError } from '../../src';
import { connect, operatorConnection, testDatabase, type MonitoredConnection } from '../support/db';
import { replicaSetOnly } from '../support/topology';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('guardforeignunique');
let conn: MonitoredConnection;
let operator: Connection;
let M: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  operator = await operatorConnection(db.name);
  M = await workItemModel(conn.connection, { ttl: 30_000, transactions: 'auto' }, 'GuardUniqueOwner');
  await operator.db!.collection(M.lockModel().collection.collectionName).createIndex({ owner: 1 }, { unique: true, name: 'owner_every_record' });
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
  await operator.close();
});

replicaSetOnly('atomic mode needs transactions')(
  'a guarded write of two unlocked documents: LockConfigurationError naming the index, at once, and nothing written',
  async () => {
    await M.create([{ title: 'one', edits: 0 }, { title: 'two', edits: 0 }]);
    const started = Date.now();
    const error = await M.updateMany({}, { $inc: { edits: 1 } }).then(
      () => 'resolved',
      (e: unknown) => e,
    );
    expect(error).toBeInstanceOf(LockConfigurationError);
    expect((error as Error).message).toMatch(/owner_every_record/);
    // Not retried as a lost insert race (each run of the transaction collides the same way).
    expect(Date.now() - started).toBeLessThan(20_000);
    expect((await M.find().lean()).map((doc) => doc.edits)).toEqual([0, 0]);
    expect(await operator.db!.collection(M.lockModel().collection.collectionName).countDocuments()).toBe(0);
  },
  60_000,
);
