/**
 * PRODUCT.md property 13 for `lockAll` across models whose documents share an `_id` (an order and
 * its invoice keyed by the same ObjectId, a 1:1 pattern): one group token covers every lock of the
 * group, in every lock collection (lock-group.ts), so the order's lock and the invoice's lock are
 * two acquisitions with the same `_id` and the same token, in two lock collections.
 *
 * This process's map of leases (src/held-lock.ts) found an acquisition by `_id` and token. Since
 * f0c6a94 a member enters that map when its ticket is read; reading the invoice's ticket after the
 * order's puts the invoice's lease under the key the order's lease was under, and a resume of the
 * ORDER's acquisition then joins the INVOICE's lease: the order instance that took the lock never
 * hears that its lock was shortened or released through the resumed instance, and keeps counting
 * on a lease the server no longer grants. Before f0c6a94 the two members joined one lease when
 * they were created, which is no better: a resume of the order with a longer ttl lengthened the
 * invoice's lease past its own lock's expiry. Now the map is keyed by lock collection too
 * (LockStore.namespace).
 *
 * Independent check: the emulator runs on this machine, so a lock record's `expiresAt` (server
 * clock) and `Date.now()` read one clock.
 */
import { Schema, Types } from 'mongoose';
import { lockAll, lockPlugin, type LockableDocument, type LockableModel } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';

interface Titled {
  title: string;
}
type TitledModel = LockableModel<Titled>;

const db = testDatabase('lockallsameid');
let conn: MonitoredConnection;
let Order: TitledModel;
let Invoice: TitledModel;

function titledModel(name: string): TitledModel {
  const schema = new Schema<Titled, TitledModel>({ title: { type: String, required: true } });
  schema.plugin(lockPlugin, { ttl: 30_000 });
  return conn.connection.model<Titled, TitledModel>(name, schema);
}

beforeAll(async () => {
  conn = await connect(db.name);
  Order = titledModel('SameIdOrder');
  Invoice = titledModel('SameIdInvoice');
  for (const model of [Order, Invoice]) {
    await model.init();
    await model.lockModel().init();
  }
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

/** An order and its invoice with one `_id`, locked together; both tickets read (the order's first, or the invoice's first). */
async function lockedPair(invoiceTicketFirst: boolean): Promise<{ id: Types.ObjectId; order: LockableDocument<Titled>; invoice: LockableDocument<Titled>; orderTicket: string; invoiceTicket: string }> {
  const id = new Types.ObjectId();
  await Order.create({ _id: id, title: 'order' });
  await Invoice.create({ _id: id, title: 'invoice' });
  const [order, invoice] = await lockAll([[Order, id], [Invoice, id]], 'alice', { ttl: 30_000 });
  expect(order.heldLock()!.token).toBe(invoice.heldLock()!.token); // one group token (the premise)
  let orderTicket: string;
  let invoiceTicket: string;
  if (invoiceTicketFirst) {
    invoiceTicket = invoice.heldLock()!.ticket;
    orderTicket = order.heldLock()!.ticket;
  } else {
    orderTicket = order.heldLock()!.ticket;
    invoiceTicket = invoice.heldLock()!.ticket;
  }
  return { id, order, invoice, orderTicket, invoiceTicket };
}

/** Milliseconds past the server's expiry that `doc` counts on (≤ 0: within the grant); what it counts on at all once its lock is free. */
async function beliefPastServer(model: TitledModel, doc: LockableDocument<Titled>, id: Types.ObjectId): Promise<number> {
  const info = await model.getLock(id);
  const left = doc.heldLock()?.msLeft() ?? 0;
  return info ? Date.now() + left - info.expiresAt.getTime() : left;
}

describe.each([false, true])("an order and its invoice with one _id, locked by lockAll (invoice's ticket read first: %s)", (invoiceTicketFirst) => {
  test("a resume of the order's acquisition with a 500 ms ttl: the order instance does not count on more than the server grants", async () => {
    const { id, order, invoice, orderTicket } = await lockedPair(invoiceTicketFirst);
    const resumed = await Order.lock(id, 'alice', { resume: orderTicket, ttl: 500 });
    expect(await beliefPastServer(Order, order, id)).toBeLessThanOrEqual(1);
    expect(await beliefPastServer(Order, resumed, id)).toBeLessThanOrEqual(1);
    expect(await beliefPastServer(Invoice, invoice, id)).toBeLessThanOrEqual(1);
  });

  test("a resume of the order's acquisition with a 60 s ttl: the invoice instance does not count on the order's longer lease", async () => {
    const { id, invoice, orderTicket } = await lockedPair(invoiceTicketFirst);
    await Order.lock(id, 'alice', { resume: orderTicket, ttl: 60_000 });
    expect(await beliefPastServer(Invoice, invoice, id)).toBeLessThanOrEqual(1);
  });

  test("the resumed order unlocks: the order instance no longer counts on its lock; the invoice's lock is untouched", async () => {
    const { id, order, invoice, orderTicket } = await lockedPair(invoiceTicketFirst);
    const resumed = await Order.lock(id, 'alice', { resume: orderTicket });
    await resumed.unlock();
    expect(await Order.isLocked(id)).toBe(false);
    expect(order.heldLock()?.msLeft() ?? 0).toBe(0);
    expect(await Invoice.isLocked(id)).toBe(true);
    expect(await beliefPastServer(Invoice, invoice, id)).toBeLessThanOrEqual(1);
  });

  test("Model.unlock of the invoice with its ticket: the invoice instance no longer counts on its lock", async () => {
    const { id, order, invoice, invoiceTicket } = await lockedPair(invoiceTicketFirst);
    await expect(Invoice.unlock(id, 'alice', { ticket: invoiceTicket })).resolves.toBe(true);
    expect(invoice.heldLock()?.msLeft() ?? 0).toBe(0);
    expect(await beliefPastServer(Order, order, id)).toBeLessThanOrEqual(1);
  });
});
