/**
 * The job-worker statics: `Model.lockNext`, `Model.acquireNext` and `Model.withNext` (claiming the
 * next free document, lock-next.ts). Installed by plugin.ts.
 */
import { callerError } from './diagnostics';
import type { HydratedDocument, mongo } from 'mongoose';
import { validateOwner } from './arguments';
import { deploymentKind } from './deployment';
import { InvalidLockArgumentError } from './errors';
import { typedErrors } from './failures';
import { LockHandle, asyncDispose } from './lock-handle';
import { claimNext, type Claimed } from './lock-next';
import { castNextFilter, validateNextOptions } from './next-arguments';
import { nextFeed, type NextFeed } from './next-feed';
import type { ResolvedLockOptions } from './options';
import type { AnyModel, AnySchema, RuntimeOf } from './runtime';

type AnyDoc = HydratedDocument<unknown>;
type Document = mongo.Document;

export interface NextStaticsDeps {
  runtimeOf: RuntimeOf;
  ownerKey: (owner: string) => string;
  options: ResolvedLockOptions;
  /** Releases the lock a document carries (the plugin's `doc.unlock()`). */
  unlockDocument(doc: AnyDoc): Promise<void>;
}

export function installNextStatics(schema: AnySchema, deps: NextStaticsDeps): void {
  const { runtimeOf, ownerKey, options } = deps;
  const feeds = new WeakMap<object, NextFeed>();

  /** The model's collection, through the driver interface (Mongoose's collection proxies it). */
  const documentsOf = (model: AnyModel) => model.collection as unknown as mongo.Collection<Document>;

  async function claim(model: AnyModel, filter: unknown, owner: unknown, rawOptions: unknown, handle: boolean): Promise<{ claimed: Claimed; autoExtend: boolean } | null> {
    // Everything is checked before anything is sent.
    const match = castNextFilter(model, filter);
    const who = validateOwner(owner);
    const { sort, call } = validateNextOptions(rawOptions, options.ttl, handle);
    const runtime = runtimeOf(model);
    await runtime.ready;
    const documents = documentsOf(model);
    const locks = runtime.lockModel.collection as unknown as mongo.Collection<Document>;
    let feed = feeds.get(documents);
    if (!feed) {
      feed = nextFeed(documents, locks, async () => options.changeStreams === 'auto' && (await deploymentKind(model.db)) !== 'standalone', () => runtime.store.scope);
      feeds.set(documents, feed);
    }
    // Snapshot candidate reads on replica sets only (docs/mongodb-compatibility.md R31, R34).
    const snapshot = (await deploymentKind(model.db)) === 'replicaSet';
    const claimed = await claimNext({
      model,
      store: runtime.store,
      documents,
      filter: filter as Document,
      match,
      sort,
      owner: who,
      ownerKey: ownerKey(who),
      call,
      snapshot,
      feed,
    });
    return claimed && { claimed, autoExtend: call.autoExtend };
  }

  async function openHandle(model: AnyModel, filter: unknown, owner: unknown, rawOptions: unknown): Promise<LockHandle<AnyDoc> | null> {
    const result = await claim(model, filter, owner, rawOptions, true);
    if (!result) return null;
    const doc = result.claimed.doc as AnyDoc;
    return new LockHandle(doc, result.claimed.state, runtimeOf(model).store, () => deps.unlockDocument(doc), result.autoExtend);
  }

  schema.static('lockNext', function lockNext(this: AnyModel, filter: unknown, owner: unknown, nextOptions?: unknown) {
    return typedErrors('lockNext', async () => (await claim(this, filter, owner, nextOptions, false))?.claimed.doc ?? null);
  });

  schema.static('acquireNext', function acquireNext(this: AnyModel, filter: unknown, owner: unknown, nextOptions?: unknown) {
    return typedErrors('acquireNext', () => openHandle(this, filter, owner, nextOptions));
  });

  schema.static('withNext', async function withNext(this: AnyModel, filter: unknown, owner: unknown, fn: unknown, nextOptions?: unknown) {
    if (typeof fn !== 'function') throw new InvalidLockArgumentError('fn', 'expected a function (doc, signal) => result to run while the lock is held.');
    const handle = await typedErrors('withNext', () => openHandle(this, filter, owner, nextOptions));
    if (!handle) return null;
    try {
      // Errors thrown by fn are the caller's own and reach it unchanged (no named diagnostics event for them).
      try {
        return await (fn as (doc: AnyDoc, signal: AbortSignal) => unknown)(handle.document, handle.signal);
      } catch (error) {
        throw callerError(error);
      }
    } finally {
      await typedErrors('withNext', () => handle[asyncDispose]());
    }
  });
}
