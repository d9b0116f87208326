/**
 * Locking documents of several models as one acquisition, all or nothing (an order and its
 * invoice): `lockAll([[Order, orderId], [Invoice, invoiceId]], owner)`, its handle forms
 * `acquireAllLocks` / `withAllLocks`, and `unlockAll(docs)`. The same algorithm as
 * `Model.lockMany` (lock-group.ts): one token for the whole group, one `update` and one `find` per
 * distinct lock collection, one load per model.
 */
import { readArgumentArray, validateLockCallOptions, validateOwner, type ResolvedCallOptions } from './arguments';
import type { Connection } from 'mongoose';
import { deploymentKeys } from './deployment-key';
import { InvalidLockArgumentError } from './errors';
import { typedErrors } from './failures';
import { castIdList, validateIdList, type LockGroupOptions, type LockManyOptions } from './group-arguments';
import { groupContextOf, openGroupHandle, runWithGroup, validateDocumentList, type GroupContext } from './group-statics';
import type { LockGroupHandle } from './lock-group-handle';
import { lockGroup, unlockDocuments, type GroupMember } from './lock-group';
import { describeValue } from './options';
import type { AnyModel } from './runtime';
import type { LockTargetId } from './types';

/** A model compiled from a schema that uses lockPlugin (it has `lockMany`). */
export interface LockableModelLike {
  /** The model's name (Mongoose's `Model.modelName`). */
  readonly modelName: string;
  /** The plugin's `Model.lockMany`, which `lockAll` calls once per model. */
  lockMany(ids: readonly LockTargetId[], owner: string, options?: LockManyOptions): Promise<unknown[]>;
}

/** One document to lock: its model and its id. */
export type LockAllTarget = readonly [model: LockableModelLike, id: LockTargetId];

/** The document type a model's `lockMany` resolves to. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type DocumentOf<M> = M extends { lockMany(...args: any[]): Promise<(infer D)[]> } ? D : never;

/** The documents `lockAll(targets)` resolves to: one per target, typed by its model. */
export type LockedDocuments<T extends readonly LockAllTarget[]> = { -readonly [K in keyof T]: T[K] extends readonly [infer M, unknown] ? DocumentOf<M> : never };


/** Validates the targets and the options, and builds the members: nothing is sent before this succeeds. */
function resolveTargets(targets: unknown, owner: unknown, rawOptions: unknown, handle: boolean): { members: GroupMember[]; owner: string; call: ResolvedCallOptions } {
  const list = validateIdList(targets, 'targets');
  const resolved = list.map((target, i) => {
    // Each pair read once too: a fresh copy of its two elements (readArgumentArray).
    const pair = readArgumentArray(target, `targets[${i}]`, { expected: 'a pair [Model, id]', max: 2, tooMany: () => `expected a pair [Model, id], got ${describeValue(target)}.` });
    if (pair.length !== 2) throw new InvalidLockArgumentError(`targets[${i}]`, `expected a pair [Model, id], got ${describeValue(target)}.`);
    const [model, rawId] = pair as [AnyModel, unknown];
    const context = groupContextOf(model);
    if (!context) {
      throw new InvalidLockArgumentError(`targets[${i}]`, `expected a model whose schema uses lockPlugin as the first element, got ${describeValue(model)}.`);
    }
    return { model, context, rawId, runtime: context.runtimeOf(model) };
  });
  // Two targets are one document twice when they are the same `_id` in one collection of one
  // database (through one model, or through two models or connections bound to it), or one lock
  // (the same `_id` in one lock collection, which models may share: plugin option `collection`).
  // By deployment, database name and collection name, not by connection or model: two connections
  // to one database reach the same documents, and two deployments that share those names do not
  // (deployment-key.ts).
  const deployment = deploymentKeys(resolved.flatMap((r) => [r.model.db, r.runtime.lockModel.db]));
  const where = (connection: Connection, collection: string) => `${deployment(connection)}\u0000${String(connection.name)}\u0000${collection}`;
  const cast = castIdList(
    resolved.map((r) => r.rawId),
    (id, i) => resolved[i].context.castId(resolved[i].model, id),
    'targets',
    (i) => {
      const { model, runtime } = resolved[i];
      return [`document\u0000${where(model.db, model.collection.collectionName)}`, `lock\u0000${where(runtime.lockModel.db, runtime.lockModel.collection.collectionName)}`];
    },
  );
  const who = validateOwner(owner);
  const defaultTtl = Math.min(...resolved.map((r) => r.context.defaultTtl));
  const call = validateLockCallOptions(rawOptions, defaultTtl, handle ? ['ttl', 'wait', 'signal', 'label', 'autoExtend'] : ['ttl', 'wait', 'signal', 'label']);
  const keys = new Map<GroupContext, string>();
  const members = resolved.map((r, i) => {
    let ownerKey = keys.get(r.context);
    if (ownerKey === undefined) keys.set(r.context, (ownerKey = r.context.ownerKey(who)));
    return { model: r.model, rawId: cast[i].loadId, documentId: cast[i].documentId, ownerKey, runtime: r.runtime };
  });
  return { members, owner: who, call };
}

/**
 * Locks documents of one or several models for `owner`, all or nothing, and resolves to them in the
 * order of `targets`, each carrying its lock (save, `saveAndUnlock`, `unlock` each on its own;
 * `unlockAll` releases them together). Throws LockedError naming a blocking document (with its
 * holder's label) after releasing everything it took, LockTargetNotFoundError for a missing
 * document; waits up to `wait` ms for all of them to be free. Without `ttl`, the shortest `ttl`
 * option of the models' plugins applies to the whole group.
 *
 * @example
 * ```ts
 * const [order, invoice] = await lockAll([[Order, orderId], [Invoice, invoiceId]], 'billing-job', { wait: 5_000 });
 * order.status = 'billed';
 * invoice.total = order.total;
 * await Promise.all([order.saveAndUnlock(), invoice.saveAndUnlock()]);
 * ```
 */
export function lockAll<const T extends readonly LockAllTarget[]>(targets: T, owner: string, options?: LockManyOptions): Promise<LockedDocuments<T>> {
  return typedErrors('lockAll', async () => {
    const { members, owner: who, call } = resolveTargets(targets, owner, options, false);
    const { documents } = await lockGroup({ members, owner: who, ttl: call.ttl, label: call.label, wait: call.wait, signal: call.signal });
    return documents as unknown as LockedDocuments<T>;
  });
}

/** `lockAll` with a handle: the locks are renewed together while held, and released together. */
export function acquireAllLocks<const T extends readonly LockAllTarget[]>(targets: T, owner: string, options?: LockGroupOptions): Promise<LockGroupHandle<LockedDocuments<T>>> {
  return typedErrors('acquireAllLocks', async () => {
    const { members, owner: who, call } = resolveTargets(targets, owner, options, true);
    return (await openGroupHandle(members, who, call)) as unknown as LockGroupHandle<LockedDocuments<T>>;
  });
}

/** Runs `fn(docs, signal)` while holding every lock of `targets`; renews them, always releases them at the end. */
export function withAllLocks<const T extends readonly LockAllTarget[], R>(
  targets: T,
  owner: string,
  fn: (docs: LockedDocuments<T>, signal: AbortSignal) => Promise<R> | R,
  options?: LockGroupOptions,
): Promise<R> {
  return runWithGroup(
    'withAllLocks',
    async () => {
      const { members, owner: who, call } = resolveTargets(targets, owner, options, true);
      return openGroupHandle(members, who, call);
    },
    fn,
  ) as Promise<R>;
}

/**
 * Releases the locks the documents carry (from `lockAll`, `lockMany` or `lock`, of any models): one
 * command per lock collection and acquisition. Throws LockNotHeldError before sending anything if a
 * document carries no lock, and after releasing the others if one was already released or lost.
 */
export function unlockAll(docs: readonly object[]): Promise<void> {
  return typedErrors('unlockAll', async () => {
    const list = validateDocumentList(docs, (doc) => groupContextOf((doc as { constructor?: unknown } | null)?.constructor) !== undefined, 'a document of a model whose schema uses lockPlugin');
    await unlockDocuments(list, (doc) => groupContextOf(doc.constructor)!.runtimeOf(doc.constructor as AnyModel));
  });
}

