/**
 * A file's connection, a work-item model and a LockStore on its lock collection, for tests that
 * drive the store's commands directly (reserve, acquire, clearReservation): opened in beforeAll,
 * the database dropped and the connection closed in afterAll.
 */
import type { mongo } from 'mongoose';
import { LockStore } from '../../src/lock-store';
import { connect, testDatabase, type MonitoredConnection } from './db';
import { workItemModel, type WorkItemModel } from './work-item';

export interface LockStoreFixture {
  conn: MonitoredConnection;
  M: WorkItemModel;
  store: LockStore;
}

/** Registers the hooks; the returned object's fields are set once beforeAll has run. */
export function lockStoreFixture(name: string, ttl = 30_000): LockStoreFixture {
  const db = testDatabase(name);
  const fixture = {} as LockStoreFixture;
  beforeAll(async () => {
    fixture.conn = await connect(db.name);
    fixture.M = await workItemModel(fixture.conn.connection, { ttl });
    fixture.store = new LockStore(fixture.M.lockModel().collection as unknown as mongo.Collection<mongo.Document>);
  });
  afterAll(async () => {
    await db.drop(fixture.conn.connection);
    await fixture.conn.close();
  });
  return fixture;
}
