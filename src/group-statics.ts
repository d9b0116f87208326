/**
 * The statics that lock several documents of one model at once: `Model.lockMany`,
 * `Model.acquireLocks`, `Model.withLocks` and `Model.unlockMany` (the algorithm is in
 * lock-group.ts). Each plugin application registers what the cross-model calls (`lockAll`,
 * lock-all.ts) need to lock its models: keyed by its own `lockMany` function, which every model
 * compiled from the schema (and its discriminators) carries.
 */
import { callerError } from './diagnostics';
import { untraced } from './diagnostics-install';
import type { HydratedDocument } from 'mongoose';
import { readArgumentArray, validateLockCallOptions, validateOwner, type CastId, type ResolvedCallOptions } from './arguments';
import { InvalidLockArgumentError } from './errors';
import { typedErrors } from './failures';
import { MAX_LOCK_MANY_IDS, castIdList, validateIdList } from './group-arguments';
import { asyncDispose } from './lock-handle';
import { LockGroupHandle } from './lock-group-handle';
import { lockGroup, unlockDocuments, type GroupMember } from './lock-group';
import { describeValue } from './options';
import type { OwnerKey } from './owner-key';
import type { AnyModel, AnySchema, RuntimeOf } from './runtime';

type AnyDoc = HydratedDocument<unknown>;

/** What locking a model's documents needs, from the plugin application of its schema. */
export interface GroupContext {
  runtimeOf: RuntimeOf;
  /** The schema's `_id` caster: the id sent and the id the document is loaded by (arguments.ts). */
  castId: (model: AnyModel, id: unknown) => CastId;
  ownerKey: OwnerKey;
  /** The plugin's `ttl` option for this schema. */
  defaultTtl: number;
}

const contexts = new WeakMap<object, GroupContext>();

/** The context of the plugin application `model` was compiled with, or undefined for a model without the plugin. */
export function groupContextOf(model: unknown): GroupContext | undefined {
  if (typeof model !== 'function') return undefined;
  const lockMany = (model as { lockMany?: unknown }).lockMany;
  return typeof lockMany === 'function' ? contexts.get(untraced(lockMany) as typeof lockMany) : undefined;
}

/** The group's members for `ids` of one model, validated and cast (nothing is sent before this succeeds). */
export function membersOf(model: AnyModel, context: GroupContext, ids: unknown, owner: unknown): { members: GroupMember[]; owner: string } {
  const list = validateIdList(ids);
  const cast = castIdList(list, (id) => context.castId(model, id));
  const who = validateOwner(owner);
  const runtime = context.runtimeOf(model);
  const ownerKey = context.ownerKey(who);
  return { members: cast.map(({ documentId, loadId }) => ({ model, rawId: loadId, documentId, ownerKey, runtime })), owner: who };
}

/** Takes the group and wraps it in a handle (renewal, signal, release together). */
export async function openGroupHandle(members: GroupMember[], owner: string, call: ResolvedCallOptions): Promise<LockGroupHandle<AnyDoc[]>> {
  const { documents, group } = await lockGroup({ members, owner, ttl: call.ttl, label: call.label, wait: call.wait, signal: call.signal });
  return new LockGroupHandle(documents, group, call.autoExtend);
}

/** Runs `fn(documents, signal)` while the handle holds the group; always releases at the end. */
export async function runWithGroup(operation: string, open: () => Promise<LockGroupHandle<AnyDoc[]>>, fn: unknown): Promise<unknown> {
  if (typeof fn !== 'function') throw new InvalidLockArgumentError('fn', 'expected a function (docs, signal) => result to run while the locks are held.');
  const handle = await typedErrors(operation, open);
  try {
    // Errors thrown by fn are the caller's own and reach it unchanged (no named diagnostics event for them).
    try {
      return await (fn as (docs: AnyDoc[], signal: AbortSignal) => unknown)(handle.documents, handle.signal);
    } catch (error) {
      throw callerError(error);
    }
  } finally {
    await typedErrors(operation, () => handle[asyncDispose]());
  }
}

/** The documents of one `unlockMany` / `unlockAll` call: an array of 1..MAX_LOCK_MANY_IDS documents, read once (readArgumentArray). */
export function validateDocumentList(docs: unknown, accepts: (doc: unknown) => boolean, expected: string): object[] {
  const list = readArgumentArray(docs, 'docs', {
    expected: 'an array of locked documents',
    max: MAX_LOCK_MANY_IDS,
    tooMany: (length) => `expected at most ${MAX_LOCK_MANY_IDS} documents in one call, got ${length}.`,
  });
  if (list.length === 0) throw new InvalidLockArgumentError('docs', 'expected at least one document, got an empty array.');
  for (let i = 0; i < list.length; i++) {
    if (!accepts(list[i])) throw new InvalidLockArgumentError(`docs[${i}]`, `expected ${expected}, got ${describeValue(list[i])}.`);
  }
  return list as object[];
}

export function installGroupStatics(schema: AnySchema, context: GroupContext): void {
  const callOptions = (raw: unknown, handle: boolean) => validateLockCallOptions(raw, context.defaultTtl, handle ? ['ttl', 'wait', 'signal', 'label', 'autoExtend'] : ['ttl', 'wait', 'signal', 'label']);

  function lockMany(this: AnyModel, ids: unknown, owner: unknown, rawOptions?: unknown) {
    return typedErrors('lockMany', async () => {
      const call = callOptions(rawOptions, false);
      const { members, owner: who } = membersOf(this, context, ids, owner);
      return (await lockGroup({ members, owner: who, ttl: call.ttl, label: call.label, wait: call.wait, signal: call.signal })).documents;
    });
  }
  contexts.set(lockMany, context);
  schema.static('lockMany', lockMany);

  schema.static('acquireLocks', function acquireLocks(this: AnyModel, ids: unknown, owner: unknown, rawOptions?: unknown) {
    return typedErrors('acquireLocks', async () => {
      const call = callOptions(rawOptions, true);
      const { members, owner: who } = membersOf(this, context, ids, owner);
      return openGroupHandle(members, who, call);
    });
  });

  schema.static('withLocks', function withLocks(this: AnyModel, ids: unknown, owner: unknown, fn: unknown, rawOptions?: unknown) {
    return runWithGroup(
      'withLocks',
      async () => {
        const call = callOptions(rawOptions, true);
        const { members, owner: who } = membersOf(this, context, ids, owner);
        return openGroupHandle(members, who, call);
      },
      fn,
    );
  });

  schema.static('unlockMany', function unlockMany(this: AnyModel, docs: unknown) {
    return typedErrors('unlockMany', async () => {
      const list = validateDocumentList(docs, (doc) => doc instanceof this, `a document of model ${this.modelName} (from lockMany or lock)`);
      await unlockDocuments(list, (doc) => context.runtimeOf(doc.constructor as AnyModel));
    });
  });
}
