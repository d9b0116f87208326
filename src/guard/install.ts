/**
 * Puts the write guard in place for a schema:
 *  - on the Mongoose collection of every model compiled from it (models on other connections
 *    included; a discriminator shares its base model's collection), each write method is
 *    replaced by a guarded one (write-guard.ts);
 *  - `save()`, `$save()`, `deleteOne()`, `updateOne()` and `replaceOne()` of documents carry the
 *    document's own lock to the guard (document-context.ts), installed on each model's prototype;
 *  - `Model.useConnection()` guards the collection on the new connection;
 *  - `connection.bulkWrite()` (the driver's client-level bulkWrite, which no collection method
 *    sees) refuses operations on guarded models loudly, on every connection, and so do the collection's
 *    `initializeOrderedBulkOp()` / `initializeUnorderedBulkOp()` (the driver's fluent bulk API).
 * Everything is installed on objects, never as middleware, so Mongoose's `middleware: false` /
 * `{ pre: false }` / `{ post: false }` options cannot skip or half-run the guard.
 */
import { createHash } from 'node:crypto';
import type { Connection, HydratedDocument, mongo } from 'mongoose';
import { InvalidLockArgumentError, InvalidLockOptionError, LockNotHeldError, describeId } from '../errors';
import { observed, traceCall } from '../diagnostics';
import { toLockError } from '../failures';
import { heldLockState } from '../held-lock';
import { currentLockOwner } from '../owner-context';
import type { OwnerKey } from '../owner-key';
import type { ResolvedLockOptions } from '../options';
import type { AnyModel, AnySchema, ModelRuntime, RuntimeOf } from '../runtime';
import { noteSaveFilter, runAsBulkSave, runAsDocumentWrite, type DocumentWrite } from './document-context';
import { refuseSaveLockOptions } from './options';
import { idKey } from '../id-key';
import { GUARDED_METHODS, WriteGuard } from './write-guard';

type AnyDoc = HydratedDocument<unknown>;
type Method = (this: unknown, ...args: unknown[]) => unknown;

export interface GuardContext {
  runtimeOf: RuntimeOf;
  ownerKey: OwnerKey;
  options: ResolvedLockOptions;
}

/** Marks the plugin's own replacements, so the next implementation up a prototype chain is found. */
const PLUGIN_WRAPPER = Symbol.for('mongoose-pessimistic-lock:wrapper');
function marked<T extends (this: never, ...args: never[]) => unknown>(fn: T): T {
  (fn as unknown as Record<symbol, boolean>)[PLUGIN_WRAPPER] = true;
  return fn;
}

/** The implementation of `name` that the plugin's replacement on `target` stands in front of. */
function inherited(target: object, name: string): Method {
  let proto = Object.getPrototypeOf(target) as Record<string, unknown> | null;
  while (proto) {
    const own = Object.getOwnPropertyDescriptor(proto, name);
    if (own && typeof own.value === 'function' && !(own.value as Record<symbol, unknown>)[PLUGIN_WRAPPER]) return own.value as Method;
    proto = Object.getPrototypeOf(proto) as Record<string, unknown> | null;
  }
  throw new Error(`mongoose-pessimistic-lock: no ${name} to wrap`);
}

interface Installed {
  signature: string;
}
const installed = new WeakMap<object, Installed>();

/** What decides how a collection is guarded; two plugin configurations on one collection must agree. */
function signatureOf(options: ResolvedLockOptions, lockCollection: string): string {
  const secret = options.ownerSecret ? createHash('sha256').update(options.ownerSecret).digest('hex') : '';
  return JSON.stringify([lockCollection, options.ownerStorage, secret, options.transactions, options.requireLock]);
}

/** Guards the Mongoose collection of `model` (once per collection object). */
export function guardModel(model: AnyModel, context: GuardContext): void {
  const runtime: ModelRuntime = context.runtimeOf(model);
  const collection = model.collection as unknown as Record<string, unknown> & { collectionName: string; collection: mongo.Collection<mongo.Document> | null };
  const signature = signatureOf(context.options, runtime.lockModel.collection.collectionName);
  const existing = installed.get(collection);
  if (existing) {
    if (existing.signature !== signature) {
      throw new InvalidLockOptionError(
        '(plugin)',
        `the collection "${collection.collectionName}" is already guarded by lockPlugin with other options (lock collection, ownerStorage, ownerSecret, transactions or requireLock); every model on one collection must use the same ones.`,
      );
    }
    return;
  }
  const guard = new WriteGuard(
    collection,
    () => {
      if (!collection.collection) throw new Error('mongoose-pessimistic-lock: the collection is not connected');
      return collection.collection;
    },
    {
      connection: model.db,
      store: runtime.store,
      ready: runtime.ready,
      ownerKey: context.ownerKey,
      transactions: context.options.transactions,
      requireLock: context.options.requireLock,
    },
  );
  const originalBulkWrite = collection.bulkWrite as Method;
  const invokeBulk = (final: unknown[]) => originalBulkWrite.apply(collection, final) as Promise<unknown>;
  for (const method of GUARDED_METHODS) {
    const original = collection[method] as Method;
    Object.defineProperty(collection, method, {
      configurable: true,
      writable: true,
      value: marked(function guardedWrite(...args: unknown[]) {
        // On the diagnostics channel `write` (diagnostics.ts); unobserved, just the guard.
        if (!observed('write')) return guard.run(method, args, (final) => original.apply(collection, final) as Promise<unknown>, invokeBulk);
        return traceCall(
          'write',
          () => ({ operation: method, model: model.modelName, collection: collection.collectionName }),
          () => guard.run(method, args, (final) => original.apply(collection, final) as Promise<unknown>, invokeBulk),
        );
      }),
    });
  }
  // The driver's fluent bulk API builds its commands inside the driver, past every method above.
  for (const method of ['initializeOrderedBulkOp', 'initializeUnorderedBulkOp'] as const) {
    Object.defineProperty(collection, method, {
      configurable: true,
      writable: true,
      value: marked(function refusedBulkApi() {
        throw new InvalidLockArgumentError(
          `collection.${method}`,
          `the collection "${collection.collectionName}" is guarded by lockPlugin, and the driver's fluent bulk API bypasses the guard. Use ${model.modelName}.bulkWrite() instead.`,
        );
      }),
    });
  }
  installed.set(collection, { signature });
  refuseConnectionBulkWrite(model.db);
}

const refusing = new WeakSet<object>();

/** The model a `connection.bulkWrite()` operation names, resolved as Mongoose resolves it (a Model, or a name on that connection). */
function operationModel(connection: Connection, model: unknown): AnyModel | undefined {
  if (typeof model !== 'string') return typeof model === 'function' ? (model as AnyModel) : undefined;
  const known = connection.models[model] as AnyModel | undefined;
  if (known) return known;
  try {
    return connection.model(model) as AnyModel; // what Connection.prototype.bulkWrite calls itself
  } catch {
    return undefined; // Mongoose reports the unknown name itself
  }
}

/**
 * `connection.bulkWrite()` sends the driver's client-level `bulkWrite` command (MongoDB 8.0+),
 * past every collection method, so the guard cannot see its targets: operations on guarded
 * models are refused before anything is sent; operations on other models run as they would.
 * Mongoose takes a Model object from anywhere as an operation's `model` and sends it through the
 * connection it is called on, so the refusal is installed where `bulkWrite` is defined
 * (Connection.prototype, shared by every connection of that Mongoose: `useDb()` connections and
 * other connections to any deployment included), not only on the guarded model's connection.
 */
function refuseConnectionBulkWrite(connection: Connection): void {
  let owner = connection as unknown as Record<string, unknown> | null;
  while (owner && !Object.prototype.hasOwnProperty.call(owner, 'bulkWrite')) owner = Object.getPrototypeOf(owner) as Record<string, unknown> | null;
  if (!owner || typeof owner.bulkWrite !== 'function' || refusing.has(owner)) return; // Mongoose versions without it; or done
  if ((owner.bulkWrite as unknown as Record<symbol, unknown>)[PLUGIN_WRAPPER]) return;
  refusing.add(owner);
  const original = owner.bulkWrite as Method;
  Object.defineProperty(owner, 'bulkWrite', {
    configurable: true,
    writable: true,
    value: marked(function bulkWrite(this: Connection, ...args: unknown[]) {
      const operations = args[0];
      if (Array.isArray(operations)) {
        for (const [index, operation] of operations.entries()) {
          const resolved = operationModel(this, (operation as { model?: unknown } | null)?.model);
          if (resolved?.collection && installed.has(resolved.collection)) {
            // Rejected like the method's own errors (it returns a promise), before anything is sent.
            return Promise.reject(
              new InvalidLockArgumentError(
                `connection.bulkWrite operation ${index}`,
                `model ${resolved.modelName} is guarded by lockPlugin, and connection.bulkWrite() bypasses the guard (it sends MongoDB's client-level bulkWrite). Use ${resolved.modelName}.bulkWrite() instead.`,
              ),
            );
          }
        }
      }
      return original.apply(this, args);
    }),
  });
}

/** The `_id` a document's write is sent with: Mongoose builds the filter from `_doc._id` (Model.prototype.$__where), without getters. */
function storedId(doc: AnyDoc): unknown {
  const raw = (doc as unknown as { _doc?: { _id?: unknown } })._doc;
  return raw ? raw._id : doc._id;
}

/**
 * The document methods that write one existing document and can carry its lock. A locked
 * instance is the holder of its lock on the document it was locked as, and of nothing else: its
 * write is recognised by the LOCKED `_id` (state.lock.documentId), and an instance whose `_id` was
 * changed since is refused before anything is sent (Mongoose would send the write to the new
 * `_id`, another document, which the lock does not cover; and mongod never changes an `_id`).
 */
function documentWrite(doc: AnyDoc, kind: 'save' | 'delete', release = false): DocumentWrite {
  const state = heldLockState(doc);
  const current = storedId(doc);
  if (state && idKey(current) !== idKey(state.lock.documentId)) {
    throw new InvalidLockArgumentError(
      '_id',
      `this instance holds the lock on document ${describeId(state.lock.documentId)}, and its _id was changed to ${describeId(current)}; nothing was written. The _id of a locked document cannot change: the write would go to another document, which this lock does not cover.`,
    );
  }
  return {
    collection: (doc.constructor as AnyModel).collection,
    idKey: idKey(state ? state.lock.documentId : current),
    state,
    kind,
    instance: doc,
    release,
    saveFilter: undefined,
    released: false,
    written: false,
  };
}

/**
 * Runs `save()` with the document's lock context; returns the context so saveAndUnlock can tell
 * whether the lock was released together with the write.
 */
export async function saveWithContext(doc: AnyDoc, options: unknown, release: boolean): Promise<DocumentWrite> {
  const context = documentWrite(doc, 'save', release);
  const save = inherited(doc, 'save');
  try {
    await runAsDocumentWrite(context, () => save.call(doc, options));
  } catch (error) {
    throw context.state ? toLockError('save', error) : error;
  }
  return context;
}

/** Wraps a document method that returns a Query, so the query runs with the document's context. */
function queryWithContext(doc: AnyDoc, query: unknown, kind: 'save' | 'delete'): unknown {
  const q = query as { exec?: Method } | null;
  if (!q || typeof q.exec !== 'function') return query;
  const exec = q.exec;
  Object.defineProperty(q, 'exec', {
    configurable: true,
    writable: true,
    value: function execWithDocument(this: unknown, ...args: unknown[]) {
      let context: DocumentWrite;
      try {
        context = documentWrite(doc, kind);
      } catch (error) {
        return Promise.reject(error); // exec() reports its errors through its promise
      }
      return runAsDocumentWrite(context, () => exec.apply(this, args));
    },
  });
  return query;
}

/**
 * Puts the document methods on the model's prototype (not in `schema.methods`: Mongoose drops its
 * built-in document middleware, such as timestamps and subdocument saving, for a method a schema
 * overrides; see Schema.prototype._getDocumentMiddleware). A discriminator's prototype inherits
 * from its base model's, so it gets them too.
 */
function guardDocuments(model: AnyModel): void {
  const proto = model.prototype as Record<string, unknown>;
  if (Object.prototype.hasOwnProperty.call(proto, 'save') && (proto.save as Record<symbol, unknown>)[PLUGIN_WRAPPER]) return;
  const save = marked(function save(this: AnyDoc, options?: unknown) {
    try {
      refuseSaveLockOptions(options, 'save');
    } catch (error) {
      return Promise.reject(error);
    }
    if (this.isNew) return inherited(this, 'save').call(this, options);
    return saveWithContext(this, options, false).then(() => this);
  });
  // Marks the save's own write: Model.prototype.$__save builds its filter with `this.$__where()`
  // after the pre('save') hooks ran and passes that object to the collection's updateOne, so the
  // guard tells it from any other write of the `_id` during the save (document-context.ts).
  const where = marked(function $__where(this: AnyDoc, ...args: unknown[]) {
    const result = inherited(this, '$__where').apply(this, args);
    noteSaveFilter(this, result);
    return result;
  });
  const methods: Record<string, unknown> = { save, $save: save, $__where: where };
  for (const name of ['deleteOne', 'updateOne', 'replaceOne'] as const) {
    methods[name] = marked(function documentQuery(this: AnyDoc, ...args: unknown[]) {
      const query = inherited(this, name).apply(this, args);
      return queryWithContext(this, query, name === 'deleteOne' ? 'delete' : 'save');
    });
  }
  for (const [name, value] of Object.entries(methods)) {
    Object.defineProperty(proto, name, { configurable: true, writable: true, enumerable: false, value });
  }
}

export function installWriteGuard(schema: AnySchema, context: GuardContext): void {
  // Every model compiled from this schema, on any connection. (Model.init() emits 'init'
  // synchronously when the model is created, so this runs before the model can write.)
  schema.on('init', (model: AnyModel) => {
    guardModel(model, context);
    guardDocuments(model);
  });
  // Model.bulkSave builds one bulkWrite from the documents, so no document's own lock can travel
  // with its write: a bulk write cannot check each document's acquisition (its token), and running
  // it as the documents' owner would let a stale instance (renewed elsewhere, taken over) write.
  // So documents that carry a lock from Model.lock are refused: save them one by one. Other
  // documents are written as any bulkWrite is (as `lockOwner` or the owner context, if any); with
  // requireLock, every existing one must be locked by that owner, as save() requires.
  schema.static(
    'bulkSave',
    marked(function bulkSave(this: AnyModel, documents: unknown, ...rest: unknown[]) {
      const original = inherited(this, 'bulkSave');
      if (!Array.isArray(documents)) return original.call(this, documents, ...rest);
      let existing: AnyDoc | undefined;
      for (const [index, doc] of documents.entries()) {
        if (doc === null || typeof doc !== 'object') continue;
        if (heldLockState(doc)) {
          return Promise.reject(
            new InvalidLockArgumentError(
              `${this.modelName}.bulkSave document ${index}`,
              'it carries a lock from Model.lock, which a bulk write cannot check. Save it with doc.save() or doc.saveAndUnlock().',
            ),
          );
        }
        if ((doc as AnyDoc).isNew === false) existing ??= doc as AnyDoc;
      }
      if (!context.options.requireLock || !existing) return original.call(this, documents, ...rest);
      const named = (rest[0] as { lockOwner?: unknown } | null | undefined)?.lockOwner !== undefined || currentLockOwner() !== undefined;
      // Without a writer nobody holds the lock: refused before anything is sent.
      if (!named) return Promise.reject(new LockNotHeldError(existing._id, 'not_locked'));
      const collection = this.collection;
      return runAsBulkSave(collection, () => original.call(this, documents, ...rest));
    }),
  );
  schema.static(
    'useConnection',
    marked(function useConnection(this: AnyModel, ...args: unknown[]) {
      const result = inherited(this, 'useConnection').apply(this, args);
      guardModel(this, context);
      return result;
    }),
  );
}
