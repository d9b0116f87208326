/**
 * Persistence across a restart: a server of the active kind started on a data directory, written
 * to, stopped and started again on the same directory still has its data and its indexes
 * (unique and TTL definitions included, and still enforced).
 *
 * Source ((*): recalled, not re-read for this audit): the durability of acknowledged writes and of the index catalog across a clean restart is
 * the storage engine's contract (manual, "Journaling") (*); the emulator implements it with its journal.
 */
import { MongoClient } from 'mongodb';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startRestartableBackend } from '../../test-backend/test-env';
import { describeIf, expectServerError, testBackendKind, type Loose } from './support/server';

const restartable = testBackendKind() !== 'uri';

describeIf(restartable, 'the deployment behind MONGODB_URI cannot be stopped and restarted by the tests')('restart with persistence', () => {
  let dbpath: string;

  beforeAll(() => {
    dbpath = mkdtempSync(join(tmpdir(), 'mpl-conf-restart-'));
  });

  afterAll(() => {
    rmSync(dbpath, { recursive: true, force: true });
  });

  async function start(): Promise<{ uri: string; stop(): Promise<void> }> {
    const server = await startRestartableBackend(dbpath);
    if ('unsupported' in server) throw new Error(`the ${testBackendKind()} backend reported it cannot restart: ${server.unsupported}`);
    return server;
  }

  test('data, unique and TTL indexes survive a stop and a start on the same directory', async () => {
    const dbName = 'mpl_conf_restart';
    const first = await start();
    let client = new MongoClient(first.uri, { serverSelectionTimeoutMS: 10_000 });
    try {
      await client.connect();
      const coll = client.db(dbName).collection<Loose>('things');
      await coll.createIndex({ email: 1 }, { unique: true, name: 'email_unique' });
      await coll.createIndex({ expiresAt: 1 }, { expireAfterSeconds: 3600, name: 'expiry_ttl' });
      await coll.insertMany([
        { _id: 1, email: 'a@x.io', expiresAt: new Date(Date.now() + 3600_000) },
        { _id: 2, email: 'b@x.io', nested: { list: [1, 2, 3] } },
      ]);
      await coll.updateOne({ _id: 2 }, { $set: { updated: true } });
      await coll.deleteOne({ _id: 1 });
      await coll.insertOne({ _id: 3, email: 'c@x.io' });
    } finally {
      await client.close();
      await first.stop();
    }

    const second = await start();
    client = new MongoClient(second.uri, { serverSelectionTimeoutMS: 10_000 });
    try {
      await client.connect();
      const coll = client.db(dbName).collection<Loose>('things');
      expect(await coll.find().sort({ _id: 1 }).toArray()).toEqual([
        { _id: 2, email: 'b@x.io', nested: { list: [1, 2, 3] }, updated: true },
        { _id: 3, email: 'c@x.io' },
      ]);
      const indexes = await coll.listIndexes().toArray();
      expect(indexes.map((ix) => ix.name).sort()).toEqual(['_id_', 'email_unique', 'expiry_ttl']);
      expect(indexes.find((ix) => ix.name === 'email_unique')).toMatchObject({ key: { email: 1 }, unique: true });
      expect(indexes.find((ix) => ix.name === 'expiry_ttl')).toMatchObject({ key: { expiresAt: 1 }, expireAfterSeconds: 3600 });

      const dup = await expectServerError(coll.insertOne({ _id: 4, email: 'b@x.io' }), 11000);
      expect(dup.keyValue).toEqual({ email: 'b@x.io' });
      await expectServerError(coll.insertOne({ _id: 2 }), 11000);
      const names = (await client.db(dbName).listCollections().toArray()).map((c) => c.name);
      expect(names).toContain('things');
    } finally {
      await client.close();
      await second.stop();
    }
  }, 120_000);

  // Views (views.ts) and validators (validation.ts) are catalog entries: journaled and compacted
  // like collections and indexes (persistence.ts), so both survive the restart.
  test('views, a modified view and a collMod validator survive a stop and a start', async () => {
    const dbName = 'mpl_conf_restart_views';
    const first = await start();
    let client = new MongoClient(first.uri, { serverSelectionTimeoutMS: 10_000 });
    try {
      await client.connect();
      const db = client.db(dbName);
      await db.collection<Loose>('src').insertMany([{ _id: 1, n: 1 }, { _id: 2, n: 2 }]);
      await db.command({ create: 'v', viewOn: 'src', pipeline: [] });
      await db.command({ collMod: 'v', viewOn: 'src', pipeline: [{ $match: { n: 2 } }] });
      await db.command({ create: 'gone', viewOn: 'src', pipeline: [] });
      await db.command({ drop: 'gone' });
      await db.command({ collMod: 'src', validator: { n: { $gte: 0 } } });
    } finally {
      await client.close();
      await first.stop();
    }
    const second = await start();
    client = new MongoClient(second.uri, { serverSelectionTimeoutMS: 10_000 });
    try {
      await client.connect();
      const db = client.db(dbName);
      expect(await db.collection('v').find().toArray()).toEqual([{ _id: 2, n: 2 }]);
      const names = (await db.listCollections({}, { nameOnly: true }).toArray()).map((c) => `${c.name}:${c.type}`).sort();
      expect(names).toEqual(['src:collection', 'system.views:collection', 'v:view']);
      const err = await expectServerError(db.collection<Loose>('src').insertOne({ _id: 3, n: -1 }), 121);
      expect(err.errInfo?.failingDocumentId).toBe(3);
    } finally {
      await client.close();
      await second.stop();
    }
  }, 120_000);
});
