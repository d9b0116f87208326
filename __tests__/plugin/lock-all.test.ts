/**
 * lockAll / acquireAllLocks / withAllLocks / unlockAll (issue 17 item 3): documents of several
 * models as one acquisition, all or nothing, one update per distinct lock collection.
 */
import { Schema, Types, type mongo } from 'mongoose';
import { InvalidLockArgumentError, LockedError, acquireAllLocks, lockAll, lockPlugin, unlockAll, withAllLocks, type LockableModel, type LockMethods } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

interface Invoice {
  number: string;
  total: number;
}
type InvoiceModel = LockableModel<Invoice>;

const db = testDatabase('lockall');
let conn: MonitoredConnection;
let Order: WorkItemModel;
let Invoice: InvoiceModel;
/** A model that shares Order's lock collection (plugin option `collection`). */
let Shipment: InvoiceModel;

beforeAll(async () => {
  conn = await connect(db.name);
  Order = await workItemModel(conn.connection, { ttl: 20_000 }, 'AllOrder');
  const invoiceSchema = new Schema<Invoice, InvoiceModel, LockMethods>({ number: String, total: Number });
  invoiceSchema.plugin(lockPlugin, { ttl: 10_000 });
  Invoice = conn.connection.model<Invoice, InvoiceModel>('AllInvoice', invoiceSchema);
  await Invoice.init();
  await Invoice.lockModel().init();
  const shipmentSchema = new Schema<Invoice, InvoiceModel, LockMethods>({ number: String, total: Number });
  shipmentSchema.plugin(lockPlugin, { collection: Order.lockModel().collection.collectionName });
  Shipment = conn.connection.model<Invoice, InvoiceModel>('AllShipment', shipmentSchema);
  await Shipment.init();
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

/** Command names sent while `fn` runs. */
async function commandsDuring(fn: () => Promise<unknown>): Promise<mongo.Document[]> {
  const seen: mongo.Document[] = [];
  const listener = (event: { commandName: string; command: mongo.Document }) => {
    if (!['hello', 'isMaster', 'ismaster', 'ping', 'endSessions'].includes(event.commandName)) seen.push(event.command);
  };
  conn.connection.getClient().on('commandStarted', listener);
  try {
    await fn();
  } finally {
    conn.connection.getClient().off('commandStarted', listener);
  }
  return seen;
}

test('an order and its invoice: typed documents in order, one update and one find per lock collection, one load per model', async () => {
  const order = await Order.create({ title: 'order 1' });
  const invoice = await Invoice.create({ number: 'INV-1', total: 10 });
  const locking = lockAll([[Order, order._id], [Invoice, invoice._id]], 'session-a', { label: 'Alice' });
  const commands = await commandsDuring(() => locking);
  const [lockedOrder, lockedInvoice] = await locking;
  expect(lockedOrder.title).toBe('order 1');
  expect(lockedInvoice.number).toBe('INV-1');
  expect(lockedOrder.heldLock()!.token).toBe(lockedInvoice.heldLock()!.token);
  // Without a ttl option: the shortest of the models' ttl options.
  expect(lockedOrder.heldLock()!.ttl).toBe(10_000);
  const names = commands.map((c) => `${Object.keys(c)[0]}:${String(Object.values(c)[0])}`).sort();
  expect(names).toEqual(
    [
      `find:${Invoice.collection.collectionName}`,
      `find:${Invoice.lockModel().collection.collectionName}`,
      `find:${Order.collection.collectionName}`,
      `find:${Order.lockModel().collection.collectionName}`,
      `update:${Invoice.lockModel().collection.collectionName}`,
      `update:${Order.lockModel().collection.collectionName}`,
    ].sort(),
  );
  lockedInvoice.total = 12;
  await lockedInvoice.saveAndUnlock();
  await unlockAll([lockedOrder]);
  expect(await Order.isLocked(order._id)).toBe(false);
  expect(await Invoice.isLocked(invoice._id)).toBe(false);
  expect((await Invoice.findById(invoice._id).orFail()).total).toBe(12);
});

test('all or nothing across models: the invoice held by someone else leaves the order unlocked', async () => {
  const order = await Order.create({ title: 'order 2' });
  const invoice = await Invoice.create({ number: 'INV-2', total: 20 });
  const holder = await Invoice.lock(invoice._id, 'session-b', { label: 'Bob' });
  const error = await lockAll([[Order, order._id], [Invoice, invoice._id]], 'session-a').catch((e: unknown) => e);
  expect(error).toBeInstanceOf(LockedError);
  expect((error as LockedError).label).toBe('Bob');
  expect(((error as LockedError).documentId as Types.ObjectId).equals(invoice._id)).toBe(true);
  expect(await Order.isLocked(order._id)).toBe(false);
  await holder.unlock();
});

test('two models sharing one lock collection: one update for both; the same _id in both is one lock (refused as a duplicate)', async () => {
  const order = await Order.create({ title: 'order 3' });
  const shipment = await Shipment.create({ number: 'S-3', total: 0 });
  const commands = await commandsDuring(async () => {
    const docs = await lockAll([[Order, order._id], [Shipment, shipment._id]], 'session-a');
    await unlockAll(docs);
  });
  expect(commands.filter((c) => 'update' in c).map((c) => c.update)).toEqual([Order.lockModel().collection.collectionName, Order.lockModel().collection.collectionName]);
  const same = new Types.ObjectId();
  conn.resetCommands();
  const error = await lockAll([[Order, same], [Shipment, same]], 'session-a').catch((e: unknown) => e);
  expect(error).toBeInstanceOf(InvalidLockArgumentError);
  expect((error as Error).message).toContain('targets[0] and targets[1] are the same document');
  // Different lock collections: the same _id is two documents.
  const other = await lockAll([[Order, order._id], [Invoice, order._id]], 'session-a').catch((e: unknown) => e);
  expect(other).not.toBeInstanceOf(InvalidLockArgumentError);
});

test('acquireAllLocks and withAllLocks hold the group and release it together', async () => {
  const order = await Order.create({ title: 'order 4' });
  const invoice = await Invoice.create({ number: 'INV-4', total: 40 });
  const handle = await acquireAllLocks([[Order, order._id], [Invoice, invoice._id]], 'session-a', { autoExtend: false });
  expect(handle.documents[1].number).toBe('INV-4');
  await handle.release();
  const total = await withAllLocks([[Order, order._id], [Invoice, invoice._id]], 'session-a', async ([o, i]) => {
    expect(await Order.isLocked(o._id)).toBe(true);
    return i.total;
  });
  expect(total).toBe(40);
  expect(await Invoice.isLocked(invoice._id)).toBe(false);
});

test('bad targets are refused before anything is sent', async () => {
  const Plain = conn.connection.model('AllPlain', new Schema({ name: String }));
  await Plain.init();
  conn.resetCommands();
  const cases: [unknown, RegExp][] = [
    [[], /at least one/],
    ['x', /expected an array/],
    [[[Order]], /targets\[0\]: expected a pair/],
    [[[Plain, new Types.ObjectId()]], /targets\[0\]: expected a model whose schema uses lockPlugin/],
    [[[Order, { $gt: '' }]], /targets\[0\]/],
  ];
  for (const [targets, message] of cases) {
    const error = await lockAll(targets as never, 'session-a').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidLockArgumentError);
    expect((error as Error).message).toMatch(message);
  }
  await expect(unlockAll([{}] as never)).rejects.toBeInstanceOf(InvalidLockArgumentError);
  expect(conn.commands).toEqual([]);
});
