/**
 * Compile-time contract of the public types (ts-jest type-checks this file: a wrong type or an
 * unused @ts-expect-error fails the run), then the packed package's declarations as an
 * application compiles them with TypeScript 5.9, 6 and 7 (issue 18, item 2).
 */
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
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
import { compiler, installPackedApp, type PackedApp } from '../support/packed-app';

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

/**
 * An application's code over the packed package, the same for ESM (.mts), CommonJS (.cts) and a
 * bundler (.ts). It uses what needs Node's types (Buffer ids and secrets, AbortSignal,
 * `await using` on a handle), and the @ts-expect-error fails the compile if LockTargetId
 * degrades to `any` (as it does when `Buffer` cannot be resolved under skipLibCheck). It passes
 * `lockOwner` / `skipLockCheck` to Mongoose's writes, which compiles only while the package's
 * declarations reach Mongoose's option types.
 */
const APP_SOURCE = `
import { Schema, Types, model } from 'mongoose';
import { LockedError, lockErrorHandler, lockPlugin, type LockableModel, type LockMethods, type LockTargetId } from 'mongoose-pessimistic-lock';

interface Item { title: string }
const schema = new Schema<Item, LockableModel<Item>, LockMethods>({ title: String });
schema.plugin(lockPlugin, { ttl: 10_000, ownerSecret: Buffer.from('a secret of at least 16 bytes') });
export const Items = model<Item, LockableModel<Item>>('Item', schema);

export const ids: LockTargetId[] = [new Types.ObjectId(), 'a1', 1, 2n, new Date(0), Buffer.from('ab'), new Types.UUID()];
// @ts-expect-error a query is not a document id
export const notAnId: LockTargetId = { $ne: null };

export async function rename(id: LockTargetId, owner: string, title: string, signal: AbortSignal): Promise<string> {
  await using handle = await Items.acquireLock(id, owner, { signal, ttl: 60_000 });
  handle.document.title = title;
  await handle.document.save();
  return handle.document.title;
}

export async function tryWaiting(id: LockTargetId): Promise<boolean> {
  try {
    await Items.lock(id, 'worker', { wait: 1_000 });
    return true;
  } catch (error) {
    if (error instanceof LockedError) return false;
    throw error;
  }
}

export const handler = lockErrorHandler();

// The guard's options, typed on every write's options (declared on the driver's option types,
// which reach Mongoose's when the app has one mongodb, as here) and on setOptions.
export async function asOwner(title: string, owner: string): Promise<void> {
  await Items.updateOne({ title }, { $set: { title: 'done' } }, { lockOwner: owner });
  await Items.deleteMany({ title }, { skipLockCheck: true });
  await Items.findOneAndUpdate({ title }, { title: 'done' }, { lockOwner: owner });
  await Items.replaceOne({ title }, { title: 'done' }, { lockOwner: owner });
  await Items.updateMany({ title }, { $set: { title: 'done' } }).setOptions({ lockOwner: owner });
  await Items.bulkWrite([{ deleteOne: { filter: { title } } }], { lockOwner: owner });
  // @ts-expect-error an owner is a string
  await Items.updateOne({ title }, { $set: { title: 'done' } }).setOptions({ lockOwner: 1 });
}
`;

/** A strict application's settings. */
const STRICT = { strict: true, exactOptionalPropertyTypes: true, noUncheckedIndexedAccess: true, noEmit: true };

/**
 * The package's declaration files are type-checked (no skipLibCheck) once per major, at that
 * major's default `types`, `lib` and `target` (from TypeScript 6, `types` is empty and the target
 * ES2025); Node's, Mongoose's and the driver's are read, not checked themselves
 * (check-declarations.ts; TypeScript 7, without a JavaScript API, checks them all). The two
 * configurations with `"types": ["node"]` then set skipLibCheck, as `tsc --init` does: they check
 * the application against the declarations, and the @ts-expect-error in the application catches a
 * declaration that degraded to `any`.
 */
const PROJECTS = {
  'tsconfig.defaults.json': { compilerOptions: { ...STRICT, module: 'nodenext' }, files: ['app.mts', 'app.cts'] },
  'tsconfig.nodenext.json': { compilerOptions: { ...STRICT, types: ['node'], skipLibCheck: true, module: 'nodenext' }, files: ['app.mts', 'app.cts'] },
  'tsconfig.bundler.json': { compilerOptions: { ...STRICT, types: ['node'], skipLibCheck: true, target: 'es2022', module: 'esnext', moduleResolution: 'bundler' }, files: ['app.ts'] },
};

const MAJORS: [major: string, pkg: string][] = [
  ['5', 'typescript'],
  ['6', 'typescript6'],
  ['7', 'typescript7'],
];

const PACKAGE = 'mongoose-pessimistic-lock';
/** Diagnostics reported inside this package's own declarations. */
const packageErrors = (output: string) => output.split('\n').filter((line) => line.includes(`node_modules/${PACKAGE}/`));

describe('the packed declarations, as an application compiles them', () => {
  // One build, one pack and one install shared by every major and configuration.
  let app: PackedApp;
  beforeAll(() => {
    app = installPackedApp();
    for (const file of ['app.mts', 'app.cts', 'app.ts']) writeFileSync(join(app.dir, file), APP_SOURCE);
    for (const [file, config] of Object.entries(PROJECTS)) writeFileSync(join(app.dir, file), JSON.stringify(config, null, 2));
  }, 240_000);
  afterAll(() => app?.remove());

  describe.each(MAJORS)('TypeScript %s', (major, pkg) => {
    const tsc = compiler(pkg);

    test(`is TypeScript ${major} (${pkg})`, () => {
      expect(tsc.version().split('.')[0]).toBe(major);
    });

    test("at the compiler's default types, lib and target, no error comes from the package's declarations (module nodenext, ESM and CommonJS)", () => {
      // Only the app's files and the package's declarations are type-checked (the errors looked
      // at): Node's and Mongoose's declarations are not checked themselves (most of the time).
      const { output } = tsc.checkOnly(app.dir, 'tsconfig.defaults.json', `node_modules/${PACKAGE}/`);
      expect(packageErrors(output)).toEqual([]);
    }, 120_000);

    test('a strict app with "types": ["node"] compiles: module nodenext, ESM and CommonJS', () => {
      expect(tsc.check(app.dir, 'tsconfig.nodenext.json')).toEqual({ status: 0, output: '' });
    }, 120_000);

    test('a strict app with "types": ["node"] compiles: moduleResolution bundler', () => {
      expect(tsc.check(app.dir, 'tsconfig.bundler.json')).toEqual({ status: 0, output: '' });
    }, 120_000);
  });
});
