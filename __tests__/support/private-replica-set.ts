/**
 * A replica set of a test file's own (test-backend's startPrivateBackend), for fail points that a
 * shared server must not see (onPrimaryTransactionalWrite closes every client's connection), with
 * a monitored Mongoose connection (retryable writes on), a raw client of the same driver for the
 * fail points and raw reads, and one work-item model. Registers its own beforeAll/afterAll; where
 * no private server can be started, `skipped` says why and the tests return early.
 */
import { mongo } from 'mongoose';
import { startPrivateBackend } from '../../test-backend/test-env';
import { connectTo, type MonitoredConnection, type testDatabase } from './db';
import { workItemModel, type WorkItemModel } from './work-item';

export interface PrivateReplicaSet {
  conn: MonitoredConnection;
  /** The driver Mongoose uses (driver 6 with Mongoose 8): ids built by Mongoose serialize with its BSON. */
  raw: mongo.MongoClient;
  model: WorkItemModel;
  /** Why no private server could be started (the tests then return early), if so. */
  skipped?: string;
}

export function privateReplicaSet(db: ReturnType<typeof testDatabase>, modelName: string): PrivateReplicaSet {
  const fixture = {} as PrivateReplicaSet;
  let server: { uri: string; stop(): Promise<void> } | undefined;
  beforeAll(async () => {
    const started = await startPrivateBackend('replset');
    if ('unsupported' in started) {
      fixture.skipped = started.unsupported;
      return;
    }
    server = started;
    fixture.conn = await connectTo(started.uri, db.name, { retryWrites: true });
    fixture.raw = new mongo.MongoClient(started.uri);
    await fixture.raw.connect();
    fixture.model = await workItemModel(fixture.conn.connection, { ttl: 30_000 }, modelName);
  }, 60_000);
  afterAll(async () => {
    const admin = fixture.raw?.db('admin');
    await admin?.command({ configureFailPoint: 'failCommand', mode: 'off' }).catch(() => undefined);
    await admin?.command({ configureFailPoint: 'onPrimaryTransactionalWrite', mode: 'off' }).catch(() => undefined);
    if (fixture.conn) {
      await db.drop(fixture.conn.connection).catch(() => undefined);
      await fixture.conn.close();
    }
    await fixture.raw?.close();
    await server?.stop();
  });
  return fixture;
}
