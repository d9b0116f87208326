/**
 * Defect 3 of issue 10: ids are cast exactly as the queries that load and write the document cast
 * them, setters included. Otherwise `lock('DOC1')` and `lock('doc1')` take two different lock
 * records for the one document whose `_id` is `'doc1'`, and mutual exclusion (PRODUCT.md property
 * 1) is gone. Runs on both guard paths.
 */
import { Schema, type Connection } from 'mongoose';
import { LockedError, lockPlugin, type LockPluginOptions } from '../../../src';
import type { LockableModel, LockMethods } from '../../../src';
import { connect, testDatabase, type MonitoredConnection } from '../../support/db';

interface Keyed {
  _id: string;
  title: string;
}
type KeyedModel = LockableModel<Keyed>;

const db = testDatabase('idcast');
let conn: MonitoredConnection;
let counter = 0;

beforeAll(async () => {
  conn = await connect(db.name);
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

async function keyedModel(connection: Connection, idType: Record<string, unknown>, options: LockPluginOptions): Promise<KeyedModel> {
  const schema = new Schema<Keyed, KeyedModel, LockMethods>({ _id: { type: String, ...idType }, title: String });
  schema.plugin(lockPlugin, options);
  const model = connection.model<Keyed, KeyedModel>(`Keyed${++counter}`, schema);
  await model.init();
  await model.lockModel().init();
  return model;
}

const setters: [string, Record<string, unknown>, string, string][] = [
  ['lowercase: true', { lowercase: true }, 'DOC1', 'doc1'],
  ['trim: true', { trim: true }, '  doc2  ', 'doc2'],
  ['a custom set', { set: (v: string) => v.replace(/-/g, '') }, 'd-o-c-3', 'doc3'],
];

describe.each([
  ["transactions: 'auto'", { ttl: 10_000 }],
  ["transactions: 'never'", { ttl: 10_000, transactions: 'never' }],
] as [string, LockPluginOptions][])('%s', (_label, options) => {
  test.each(setters)('_id with %s: two spellings of one id are one lock', async (_name, idType, spelled, stored) => {
    const M = await keyedModel(conn.connection, idType, options);
    await M.create({ _id: spelled, title: 'original' });
    expect(await M.db.getClient().db(M.db.name).collection<{ _id: string }>(M.collection.collectionName).countDocuments({ _id: stored })).toBe(1);

    const first = await M.lock(spelled, 'owner-0');
    expect(first._id).toBe(stored);
    expect(first.heldLock()!.documentId).toBe(stored);
    const second = await M.lock(stored, 'owner-1').catch((e: unknown) => e);
    expect(second).toBeInstanceOf(LockedError);
    expect((second as LockedError).documentId).toBe(stored);
    expect(await M.isLocked(spelled)).toBe(true);
    expect(await M.isLocked(stored)).toBe(true);

    // The holder's save lands; nobody else's does.
    first.title = 'by owner-0';
    await first.saveAndUnlock();
    expect((await M.findById(stored).orFail()).title).toBe('by owner-0');
    expect(await M.isLocked(stored)).toBe(false);
  });
});
