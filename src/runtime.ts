/**
 * Run-time state per lock collection: the sibling lock model, the LockStore on its collection
 * and the change-stream fan-out for waiters. Shared by every model that uses the same lock
 * collection on the same connection (a model and its discriminators, for one), so one stream
 * serves all of their waiters.
 */
import type { Model, Schema, mongo } from 'mongoose';
import { supportsTransactions } from './deployment';
import { InvalidLockOptionError } from './errors';
import { lockCollectionSetup, type LockCollectionSetup } from './lock-collection-setup';
import { lockModelFor, type SetupOptions } from './lock-model';
import { LockWatch } from './lock-waiter';
import { LockStore, type LockRecord } from './lock-store';
import type { ResolvedLockOptions } from './options';

export interface ModelRuntime {
  lockModel: Model<LockRecord>;
  store: LockStore;
  /** Wakes waiters when locks of this collection change (one change stream, shared). */
  watch: LockWatch;
  /**
   * For every lock call: the first setup attempt of the lock collection (never rejects), resolved at
   * once after it; a due retry or index check starts in the background (lock-collection-setup.ts).
   */
  readonly ready: Promise<unknown>;
  /** The lock collection's setup (for `Model.createLockIndexes()`). */
  setup: LockCollectionSetup;
}

/** Any compiled model: the plugin works on models of every document type. */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnyModel = Model<any>;

/**
 * Any schema, on Mongoose 8 (9 type parameters) and 9 (11): every parameter the two share is
 * `any`, so a typed application schema is assignable to it in both.
 */
// eslint-disable-next-line @typescript-eslint/no-explicit-any
export type AnySchema = Schema<any, any, any, any, any, any, any, any, any>;

export type RuntimeOf = (model: AnyModel) => ModelRuntime;

export function runtimeFactory(options: ResolvedLockOptions): RuntimeOf {
  // Keyed by the model's Mongoose collection (one per connection and collection name), so a
  // model moved to another connection (Model.useConnection) gets that connection's lock model.
  const byCollection = new WeakMap<object, ModelRuntime>();
  const byLockModel = new WeakMap<object, ModelRuntime>();
  return (model) => {
    let runtime = byCollection.get(model.collection);
    if (!runtime) {
      const own = model.collection.collectionName;
      if (options.collection === own) {
        throw new InvalidLockOptionError(
          'collection',
          `"${own}" is the collection of model ${model.modelName} itself: locking would write lock records over its documents and put a TTL index on them. Name another collection, or leave the option out for "${own}.locks".`,
        );
      }
      const name = options.collection ?? `${own}.locks`;
      const lockModel = lockModelFor(model.db, name, options.purgeAfter, model.schema.options as SetupOptions);
      runtime = byLockModel.get(lockModel);
      if (!runtime) {
        const setup = lockCollectionSetup(lockModel, Math.ceil(options.purgeAfter / 1000));
        void setup.ready(); // start now, as Mongoose would; lock calls wait for it below
        const collection = lockModel.collection as unknown as mongo.Collection<mongo.Document>;
        // The TTL index keeps whole seconds (lock-collection-setup.ts); the store words lost locks by it.
        const store = new LockStore(collection, Math.ceil(options.purgeAfter / 1000) * 1000);
        // Listed under the store's scope, so this process's releases wake its waiters (local-wake.ts).
        const watch = new LockWatch(
          collection,
          async () => options.changeStreams === 'auto' && (await supportsTransactions(model.db)),
          () => store.scope,
        );
        runtime = {
          lockModel,
          store,
          watch,
          setup,
          // A getter: each lock call waits for the first setup attempt, and may start a due retry
          // or index check in the background (see lock-collection-setup.ts); it never rejects.
          get ready() {
            return setup.ready();
          },
        };
        byLockModel.set(lockModel, runtime);
      }
      byCollection.set(model.collection, runtime);
    }
    return runtime;
  };
}
