/**
 * What the guard knows about the document a `save()` or `doc.deleteOne()` writes: the lock the
 * instance carries (checked by its token, so a stale instance stays refused even after its owner
 * locked the document again) and whether the write should also release it (`saveAndUnlock`).
 * Mongoose builds the write itself and calls the collection; this context travels with that
 * call through AsyncLocalStorage, and the guard uses it only for a write of this very document
 * on its model's collection.
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import type { HeldLockState } from '../held-lock';
import { idKey } from '../id-key';

export interface DocumentWrite {
  /** The Mongoose collection the document belongs to. */
  collection: object;
  /** Key (see id-key.ts) of the `_id` the write must carry: the locked `_id` for a locked instance. */
  idKey: string;
  /** The lock the instance carries, if any (released or lost ones included: they refuse). */
  state: HeldLockState | undefined;
  /** `save()` (requireLock applies) or `doc.deleteOne()`. */
  kind: 'save' | 'delete';
  /** The document instance whose `save()` or `deleteOne()` this is. */
  instance: object;
  /** saveAndUnlock: release the lock in the same transaction as the save's own write. */
  release: boolean;
  /**
   * The filter of the save's own write: the object Mongoose's `$__where()` returned for this
   * instance during its save (Model.prototype.$__save passes that very object to the
   * collection's `updateOne`). Only the write carrying it releases the lock (saveAndUnlock);
   * other writes of the `_id` during the save (a `pre('save')` hook's, say) are the holder's
   * plain writes: verified, never releasing.
   */
  saveFilter: object | undefined;
  /** Set by the guard once the lock was released with the write. */
  released: boolean;
  /** Set by the guard once the write of this document, checked against its lock, was sent. */
  written: boolean;
}

const storage = new AsyncLocalStorage<DocumentWrite>();

export function runAsDocumentWrite<T>(context: DocumentWrite, fn: () => T): T {
  return storage.run(context, fn);
}

/**
 * The document context for a write of `filterId` on `collection`, if there is one. Once the lock
 * was released with the save's write, later writes in the save (a `post('save')` hook's) no
 * longer carry it: they are checked as any write without a document's lock is.
 */
export function documentWriteFor(collection: object, filterId: unknown): DocumentWrite | undefined {
  const context = storage.getStore();
  if (!context || context.released || context.collection !== collection || filterId === undefined) return undefined;
  return context.idKey === idKey(filterId) ? context : undefined;
}

/** Notes `where`, returned by `doc.$__where()`, as the filter of the save's own write if `doc` is being saved here. */
export function noteSaveFilter(doc: object, where: unknown): void {
  const context = storage.getStore();
  if (context?.kind === 'save' && context.instance === doc && where !== null && typeof where === 'object') context.saveFilter = where;
}

/** Whether a write with `filter` is the save's own write of `context`. */
export function isSaveWrite(context: DocumentWrite, filter: unknown): boolean {
  return context.saveFilter !== undefined && context.saveFilter === filter;
}

/**
 * `Model.bulkSave` under `requireLock`: the bulk write Mongoose builds from the documents reaches
 * the guard without any document's context, so this marks it: every existing document it writes
 * must be locked by the writer (the `lockOwner` option or the owner context), as `save()` requires.
 */
const bulkSaves = new AsyncLocalStorage<object>();

export function runAsBulkSave<T>(collection: object, fn: () => T): T {
  return bulkSaves.run(collection, fn);
}

/** Whether the current write is the bulk write of a `Model.bulkSave` on `collection`. */
export function inBulkSave(collection: object): boolean {
  return bulkSaves.getStore() === collection;
}
