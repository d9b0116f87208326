/**
 * The write guard on writes that bypass save(): query middleware for updateOne, updateMany,
 * findOneAndUpdate, findOneAndReplace, replaceOne, deleteOne, deleteMany and findOneAndDelete,
 * a wrapper around Model.bulkWrite, and document middleware for doc.deleteOne().
 *
 * The writer names itself with the query option `lockOwner` or the owner context
 * (`runWithLockOwner`); `skipLockCheck: true` opts one query out. The guard finds the `_id`s
 * the write would touch (one query), then refuses the write if any is locked by someone else.
 * On deployments with transactions it runs the check and the write in one transaction in
 * which the targets' lock records are written too (see LockStore.claimForWrite), committed in
 * post middleware; inside the caller's own transaction it joins that one.
 */
import type { HydratedDocument, Query, mongo } from 'mongoose';
import { validateOwner } from './arguments';
import { supportsTransactions } from './deployment';
import { InvalidLockOptionError } from './errors';
import { typedErrors } from './failures';
import { currentLockOwner } from './owner-context';
import type { OwnerKey } from './owner-key';
import type { AnyModel, AnySchema, RuntimeOf } from './runtime';
import { assertWritable } from './write-targets';

type ClientSession = mongo.ClientSession;

/** Options a guarded query accepts through `.setOptions()` or the query's options argument. */
export interface LockQueryOptions {
  /** The owner this write acts as; its own locks do not stop it. */
  lockOwner?: string;
  /** Skip the lock check for this one write (the write is not guarded). */
  skipLockCheck?: boolean;
}

const SINGLE_DOCUMENT_OPS = ['updateOne', 'findOneAndUpdate', 'findOneAndReplace', 'replaceOne', 'deleteOne', 'findOneAndDelete'] as const;
const MULTI_DOCUMENT_OPS = ['updateMany', 'deleteMany'] as const;

interface GuardContext {
  runtimeOf: RuntimeOf;
  ownerKey: OwnerKey;
  transactions: 'auto' | 'never';
}

/** Transactions the guard started, to be committed or aborted by its post middleware. */
const ownTransactions = new WeakMap<object, ClientSession>();

/** Reads and removes the plugin's own options, so they never reach the driver. */
function takeLockOptions(options: Record<string, unknown>): { owner: string | undefined; skip: boolean } {
  const { lockOwner, skipLockCheck } = options;
  delete options.lockOwner;
  delete options.skipLockCheck;
  if (skipLockCheck !== undefined && typeof skipLockCheck !== 'boolean') {
    throw new InvalidLockOptionError('skipLockCheck', 'expected true or false.');
  }
  const owner = lockOwner !== undefined ? validateOwner(lockOwner) : currentLockOwner();
  return { owner, skip: skipLockCheck === true };
}

/**
 * Runs the lock check for a write on `model`; returns the session of a transaction the guard
 * started (the caller attaches it to the write), or undefined.
 */
async function guardWrite(
  context: GuardContext,
  model: AnyModel,
  owner: string | undefined,
  callerSession: ClientSession | undefined,
  targetIds: (session: ClientSession | undefined) => Promise<unknown[]>,
): Promise<ClientSession | undefined> {
  const { store, ready } = context.runtimeOf(model);
  await ready;
  const key = owner === undefined ? undefined : context.ownerKey(owner);
  if (callerSession?.inTransaction()) {
    await assertWritable(store, await targetIds(callerSession), key, callerSession);
    return undefined;
  }
  if (context.transactions === 'auto' && !callerSession && (await supportsTransactions(model.db))) {
    const session = await model.db.startSession();
    try {
      session.startTransaction();
      await assertWritable(store, await targetIds(session), key, session);
      return session;
    } catch (error) {
      await endOwnTransaction(session, false);
      throw error;
    }
  }
  await assertWritable(store, await targetIds(callerSession), key, callerSession);
  return undefined;
}

async function endOwnTransaction(session: ClientSession, commit: boolean): Promise<void> {
  try {
    if (session.inTransaction()) {
      if (commit) await session.commitTransaction();
      else await session.abortTransaction();
    }
  } finally {
    await session.endSession();
  }
}

async function finish(owner: object, commit: boolean, result?: unknown): Promise<void> {
  const session = ownTransactions.get(owner);
  if (!session) return;
  ownTransactions.delete(owner);
  // Documents returned by findOneAnd* must not keep a session that is about to end.
  const doc = result as { $session?: (s: null) => void } | null | undefined;
  if (doc && typeof doc.$session === 'function') doc.$session(null);
  await endOwnTransaction(session, commit);
}

export function installQueryGuard(schema: AnySchema, context: GuardContext): void {
  const ops = [...SINGLE_DOCUMENT_OPS, ...MULTI_DOCUMENT_OPS];

  schema.pre(ops, async function guardQuery(this: Query<unknown, unknown>) {
    const options = this.getOptions() as Record<string, unknown>;
    const { owner, skip } = takeLockOptions(options);
    if (skip) return;
    const model = this.model as AnyModel;
    const single = (SINGLE_DOCUMENT_OPS as readonly string[]).includes((this as unknown as { op: string }).op);
    const filter = this.getFilter();
    const sort = options.sort as Record<string, 1 | -1> | undefined;
    const targetIds = async (session: ClientSession | undefined) => {
      const found = model.find(filter, { _id: 1 }, { session, lean: true });
      if (single) {
        if (sort) found.sort(sort);
        found.limit(1);
      }
      return ((await found.exec()) as { _id: unknown }[]).map((doc) => doc._id);
    };
    const session = await typedErrors((this as unknown as { op: string }).op, () => guardWrite(context, model, owner, options.session as ClientSession | undefined, targetIds));
    if (session) {
      this.session(session);
      ownTransactions.set(this, session);
    }
  });
  schema.post(ops, async function commitGuard(this: Query<unknown, unknown>, result: unknown) {
    await finish(this, true, result);
  });
  schema.post(ops, { errorHandler: true } as never, async function abortGuard(this: Query<unknown, unknown>, error: unknown) {
    await finish(this, false);
    throw error;
  });

  schema.pre('deleteOne', { document: true, query: false }, async function guardDocumentDelete(this: HydratedDocument<unknown>) {
    // An embedded document (reached by a global registration) is removed through its parent's save.
    if ((this as { $isSubdocument?: unknown }).$isSubdocument === true) return;
    const model = this.constructor as AnyModel;
    const session = (this.$session() ?? undefined) as ClientSession | undefined;
    await typedErrors('deleteOne', () => guardWrite({ ...context, transactions: 'never' }, model, currentLockOwner(), session, async () => [this._id]));
  });
}

const wrapped = new WeakSet<object>();

/**
 * Guards `Model.bulkWrite`. Its post middleware cannot tell concurrent calls apart, so instead
 * of hooks the model's bulkWrite is wrapped: check (and transaction) around the original call.
 */
export function guardBulkWrite(model: AnyModel, context: GuardContext): void {
  if (wrapped.has(model)) return;
  wrapped.add(model);
  const original = model.bulkWrite;
  const guarded = async function bulkWrite(this: AnyModel, ops: Parameters<AnyModel['bulkWrite']>[0], options?: Record<string, unknown>) {
    const opts: Record<string, unknown> = { ...(options ?? {}) };
    const { owner, skip } = takeLockOptions(opts);
    const filters = skip || !Array.isArray(ops) ? [] : ops.flatMap((op) => {
      const write = op as Record<string, { filter?: mongo.Document } | undefined>;
      const body = write.updateOne ?? write.updateMany ?? write.replaceOne ?? write.deleteOne ?? write.deleteMany;
      return body?.filter ? [body.filter] : [];
    });
    if (filters.length === 0) return original.call(this, ops, opts);
    const targetIds = async (session: ClientSession | undefined) => {
      const docs = await this.find({ $or: filters }, { _id: 1 }, { session, lean: true }).exec();
      return (docs as { _id: unknown }[]).map((doc) => doc._id);
    };
    const session = await typedErrors('bulkWrite', () => guardWrite(context, this, owner, opts.session as ClientSession | undefined, targetIds));
    if (!session) return original.call(this, ops, opts);
    try {
      const result = await original.call(this, ops, { ...opts, session });
      await endOwnTransaction(session, true);
      return result;
    } catch (error) {
      await endOwnTransaction(session, false).catch(() => undefined);
      throw error;
    }
  };
  Object.defineProperty(model, 'bulkWrite', { value: guarded, writable: true, configurable: true });
}
