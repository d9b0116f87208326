/**
 * Compile-time contract of the public types (ts-jest type-checks this file: a wrong type or an
 * unused @ts-expect-error fails the run). Runtime asserts only that the file ran.
 */
import { Schema, model, type HydratedDocument } from 'mongoose';
import mongoose from 'mongoose';
import {
  lockAll,
  lockErrorHandler,
  lockPlugin,
  withAllLocks,
  type LockGroupHandle,
  type HeldLock,
  type LockHandle,
  type LockInfo,
  type LockMethods,
  type LockPage,
  type LockStatus,
  type LockableDocument,
  type LockableModel,
} from '../../src';
import * as api from '../../src';

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

  // The web story (issue 11).
  const ticket: string = held!.ticket;
  const label: string | null = held!.label;
  const resumed: LockableDocument<Ticket> = await Ticket.lock(item._id, 'session', { resume: ticket, ttl: 60_000 });
  const cancelled: boolean = await Ticket.unlock(item._id, 'session', { ticket });
  const page: (LockStatus | null)[] = await Ticket.lockStatus([item._id, 'x'], { owner: 'session' });
  const mine: boolean | undefined = page[0]?.mine;
  const listing: LockPage = await Ticket.listLocks({ owner: 'session', limit: 20, after: listing0(Ticket) });
  const labelled = await Ticket.lock(item._id, 'session', { label: 'Alice' });
  // @ts-expect-error resume takes a ticket string
  await Ticket.lock(item._id, 'session', { resume: 42 });
  // @ts-expect-error tryLock cannot resume
  await Ticket.tryLock(item._id, 'session', { resume: ticket });
  // Global registration type-checks, and so do Mongoose's own registration options.
  mongoose.plugin(lockPlugin);
  mongoose.plugin(lockPlugin, { ttl: 30_000, deduplicate: true, tags: ['locked'] });
  // The Express error handler is a four-argument error middleware.
  const handler: (error: unknown, req: unknown, res: { headersSent: boolean; status(code: number): unknown; setHeader(n: string, v: string): unknown; json(b: unknown): unknown }, next: () => void) => void = lockErrorHandler();
  return [title, held, same, released, info, locked, resumed, cancelled, mine, listing, labelled, label, handler];
}

/** Several documents at once (issue 17). */
interface Invoice {
  total: number;
}

async function groups(Ticket: LockableModel<Ticket>, Invoice: LockableModel<Invoice>) {
  const docs: LockableDocument<Ticket>[] = await Ticket.lockMany(['656f1f77bcf86cd799439011', '656f1f77bcf86cd799439012'], 'session', { label: 'Alice', wait: 1_000 });
  await Ticket.unlockMany(docs);
  const handle: LockGroupHandle<LockableDocument<Ticket>[]> = await Ticket.acquireLocks(docs.map((d) => d._id), 'session', { autoExtend: true });
  const fences: number[] = handle.fences;
  await handle.release();
  const count: number = await Ticket.withLocks([docs[0]._id], 'session', (locked, signal) => (signal.aborted ? 0 : locked.length));
  // lockAll types each document by its model, in order.
  const [ticket, invoice] = await lockAll([[Ticket, docs[0]._id], [Invoice, 'x']], 'session');
  const title: string = ticket.title;
  const total: number = invoice.total;
  // @ts-expect-error the second document is an Invoice
  const wrong: string = invoice.title;
  const sum: number = await withAllLocks([[Invoice, 'a'], [Invoice, 'b']], 'session', ([a, b]) => a.total + b.total);
  // @ts-expect-error lockMany takes an array of ids
  await Ticket.lockMany(docs[0]._id, 'session');
  // @ts-expect-error no resume for a group
  await Ticket.lockMany([docs[0]._id], 'session', { resume: 'ticket' });
  return [fences, count, title, total, wrong, sum];
}

function listing0(Ticket: LockableModel<Ticket>): string | undefined {
  return Ticket.modelName === '' ? 'c1.x' : undefined;
}

/** LockHandle is a type only: handles come from Model.acquireLock, never from `new`. */
function handles(handle: LockHandle<LockableDocument<Ticket>>) {
  // @ts-expect-error LockHandle is exported as a type, not a constructible value
  const made = new api.LockHandle(handle.document);
  return made;
}

test('the typed API compiles', () => {
  expect(typeof declareModel).toBe('function');
  expect(typeof usage).toBe('function');
  expect(typeof handles).toBe('function');
  expect(typeof groups).toBe('function');
  expect((api as Record<string, unknown>).LockHandle).toBeUndefined();
});
