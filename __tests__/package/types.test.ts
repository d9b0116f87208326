/**
 * Compile-time contract of the public types (ts-jest type-checks this file: a wrong type or an
 * unused @ts-expect-error fails the run). Runtime asserts only that the file ran.
 */
import { Schema, model, type HydratedDocument } from 'mongoose';
import { lockPlugin, type HeldLock, type LockInfo, type LockMethods, type LockableDocument, type LockableModel } from '../../src';

interface Ticket {
  title: string;
}

function declareModel() {
  const schema = new Schema<Ticket, LockableModel<Ticket>, LockMethods>({ title: String });
  schema.plugin(lockPlugin, { ttl: 10_000 });
  return model<Ticket, LockableModel<Ticket>>('TypedTicket', schema);
}

async function usage(Ticket: LockableModel<Ticket>) {
  const item: LockableDocument<Ticket> = await Ticket.lock('656f1f77bcf86cd799439011', 'session');
  const title: string = item.title;
  const held: HeldLock | null = item.heldLock();
  await item.saveAndUnlock();
  const same: HydratedDocument<Ticket, LockMethods> = item;
  await item.unlock();
  const released: number = await Ticket.releaseAllFor('session');
  const info: LockInfo | null = await Ticket.getLock(item._id);
  const locked: boolean = await Ticket.isLocked(item._id);
  // @ts-expect-error the owner is required
  await Ticket.lock(item._id);
  // @ts-expect-error owners are strings
  await Ticket.releaseAllFor({ $ne: null });
  // @ts-expect-error an unknown plugin option
  new Schema<Ticket>({ title: String }).plugin(lockPlugin, { tll: 5 });
  return [title, held, same, released, info, locked];
}

test('the typed API compiles', () => {
  expect(typeof declareModel).toBe('function');
  expect(typeof usage).toBe('function');
});
