/**
 * A lock call's load never joins the caller's transaction: Model.lock (tryLock, acquireLock,
 * withLock, a resume) loads the document as it is after the lock was taken, from the latest data,
 * as lockMany's and lockNext's loads do (`session(null)`, src/lock-group.ts loadMembers and
 * src/lock-next.ts load; __tests__/regressions/next-and-group-loads-in-caller-transaction.test.ts).
 * No lock call takes a `session` option, so none joins a transaction.
 *
 * src/document-load.ts loaded through `findById(id).read('primary')` whenever Mongoose's
 * `transactionAsyncLocalStorage` carried a session, and that query takes the async-local session
 * (Query._optionsForExec, Mongoose 8 and 9): inside `connection.transaction()` the load read the
 * transaction's snapshot (taken at its first operation, R12), while the lock was taken outside it
 * on the latest data. A document changed since the snapshot was handed out, locked, with its older
 * content (saving it would overwrite the change with the old fields); one inserted since was
 * reported missing (LockTargetNotFoundError) although it existed.
 * Both load paths are checked: the direct one (a plain schema) and findById (a schema with a
 * `pre('findOne')` hook), and that no `find` of the load carries the transaction's txnNumber.
 * Replica sets only (transactions).
 */
import mongoose, { Schema, type mongo } from 'mongoose';
import { lockPlugin, type LockableModel, type LockMethods } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { replicaSetOnly } from '../support/topology';

jest.setTimeout(60_000);
const db = testDatabase('lock_load_caller_txn');
let conn: MonitoredConnection;
let other: MonitoredConnection;

interface Item {
  title: string;
}
type ItemModel = LockableModel<Item>;

beforeAll(async () => {
  conn = await connect(db.name);
  other = await connect(db.name);
  mongoose.set('transactionAsyncLocalStorage', true);
});
afterAll(async () => {
  mongoose.set('transactionAsyncLocalStorage', false);
  await db.drop(conn.connection);
  await other.close();
  await conn.close();
});

let counter = 0;
/** A model on `conn`; with `hooked`, a `pre('findOne')` hook sends the load through findById. */
async function itemModel(hooked: boolean): Promise<ItemModel> {
  const schema = new Schema<Item, ItemModel, LockMethods>({ title: String });
  if (hooked) schema.pre('findOne', function noop() {});
  schema.plugin(lockPlugin, { ttl: 30_000 });
  const model = conn.connection.model<Item, ItemModel>(`TxnLoad${++counter}`, schema);
  await model.init();
  await model.lockModel().init();
  return model;
}

/** The driver's collection on the other connection (outside the transaction: another process's writes). */
const rawOf = (model: ItemModel): mongo.Collection => other.connection.getClient().db(db.name).collection(model.collection.collectionName);

/** Whether each `find` of `model`'s documents sent while `fn` runs carried a txnNumber. */
async function loadsDuring(model: ItemModel, fn: () => Promise<unknown>): Promise<boolean[]> {
  const seen: boolean[] = [];
  const listener = (event: { commandName: string; command: mongo.Document }) => {
    if (event.commandName === 'find' && event.command.find === model.collection.collectionName) seen.push(event.command.txnNumber !== undefined);
  };
  conn.connection.getClient().on('commandStarted', listener);
  try {
    await fn();
  } finally {
    conn.connection.getClient().off('commandStarted', listener);
  }
  return seen;
}

const txnTest = replicaSetOnly('caller transactions need a replica set');

describe.each([
  ['the direct load', false],
  ['the findById load', true],
])('%s', (_path, hooked) => {
  txnTest('Model.lock inside connection.transaction() loads the document as it is after the lock was taken', async () => {
    const Item = await itemModel(hooked);
    const { _id: id } = await Item.create({ title: 'before' });
    let loads: boolean[] = [];
    const title = await conn.connection.transaction(async () => {
      await Item.findOne({ title: 'nothing' }); // the transaction's first read: its snapshot
      await rawOf(Item).updateOne({ _id: id }, { $set: { title: 'after' } });
      let locked: { title: string } | undefined;
      loads = await loadsDuring(Item, async () => {
        locked = await Item.lock(id, 'owner');
      });
      return locked!.title;
    });
    expect({ title, loads }).toEqual({ title: 'after', loads: [false] });
    await Item.forceUnlock(id);
  });

  txnTest('Model.lock inside connection.transaction() finds a document inserted after the transaction began', async () => {
    const Item = await itemModel(hooked);
    await Item.create({ title: 'first' });
    const outcome = await conn.connection.transaction(async () => {
      await Item.findOne({}); // snapshot
      const fresh = new mongoose.Types.ObjectId();
      await rawOf(Item).insertOne({ _id: fresh, title: 'inserted later' });
      return Item.lock(fresh, 'owner').then(
        (doc) => doc.title,
        (error: Error) => `${error.name}: ${error.message}`,
      );
    });
    expect(outcome).toBe('inserted later');
  });

  txnTest('a resume (lock with a ticket) inside connection.transaction() loads the latest document', async () => {
    const Item = await itemModel(hooked);
    const { _id: id } = await Item.create({ title: 'before' });
    const ticket = (await Item.lock(id, 'owner')).heldLock()!.ticket;
    const title = await conn.connection.transaction(async () => {
      await Item.findOne({}); // snapshot
      await rawOf(Item).updateOne({ _id: id }, { $set: { title: 'after' } });
      return (await Item.lock(id, 'owner', { resume: ticket })).title;
    });
    expect(title).toBe('after');
    await Item.forceUnlock(id);
  });
});
