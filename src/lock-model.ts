/**
 * The sibling lock model: one per locked collection, on the same connection as the model it
 * serves, in its own collection. Mongoose creates the collection and its indexes with the
 * model (`Model.init()`, honouring `autoCreate` / `autoIndex`: the application model's schema
 * options, else the connection's, else Mongoose's); lock-collection-setup.ts retries and repairs.
 * No global plugin ever reaches the lock schema (see isolateFromGlobalPlugins).
 */
import { Schema, type Connection, type Model } from 'mongoose';
import type { LockRecord } from './lock-store';

/** Prefix of the sibling models' names, so they never collide with an application's models. */
export const LOCK_MODEL_PREFIX = 'mongoose-pessimistic-lock:';

/** Name of the TTL index on `expiresAt` that reclaims released and expired lock records. */
export const TTL_INDEX_NAME = 'expiresAt_ttl';

/**
 * Schema option that marks a lock schema, so `lockPlugin` never applies to it when registered
 * globally (`mongoose.plugin(lockPlugin)` reaches every schema compiled, this one included).
 * An option rather than a WeakSet entry because Mongoose copies options when it clones a schema
 * (`cloneSchemas`).
 */
const LOCK_SCHEMA_OPTION = 'mongoosePessimisticLockRecords';

function markLockSchema(schema: Schema): void {
  (schema.options as Record<string, unknown>)[LOCK_SCHEMA_OPTION] = true;
}

/** Whether `schema` is one of the plugin's own lock schemas. */
export function isLockSchema(schema: { options?: unknown }): boolean {
  return (schema.options as Record<string, unknown> | undefined)?.[LOCK_SCHEMA_OPTION] === true;
}

/** The name of the `{ owner: 1, _id: 1 }` index. */
export const OWNER_INDEX_NAME = 'owner_1__id_1';

/** One index of the lock collection, as `createIndexes` takes it. */
export interface LockIndexSpec {
  key: Record<string, 1>;
  name: string;
  expireAfterSeconds?: number;
}

/** The lock collection's indexes: declared on the schema (for Mongoose) and sent by the setup. */
export function lockIndexSpecs(purgeAfterSeconds: number): LockIndexSpec[] {
  return [
    // Reclaims the storage of released and expired locks; correctness never waits for it.
    { key: { expiresAt: 1 }, name: TTL_INDEX_NAME, expireAfterSeconds: purgeAfterSeconds },
    // Serves releaseAllFor(owner) (equality on owner) and listLocks({ owner }) (equality on owner,
    // then range and sort on _id, so a page is read in index order without a sort stage).
    { key: { owner: 1, _id: 1 }, name: OWNER_INDEX_NAME },
  ];
}

/**
 * Keeps every global plugin (`mongoose.plugin(fn)`, `connection.plugin(fn)`) off a lock schema.
 * Mongoose applies them when it compiles a model, through `applyPlugins(schema, plugins, options,
 * cacheKey)`, which returns at once for a schema whose `cacheKey` flag is already set:
 * `$connectionPluginsApplied` for the connection's plugins (Connection.prototype.model) and
 * `$globalPluginsApplied` for Mongoose's (Mongoose.prototype._applyPlugins, the flag that
 * Schema.prototype._clone copies when `cloneSchemas` is on, and that Model.discriminator sets for
 * the same purpose): lib/helpers/schema/applyPlugins.js, lib/connection.js, lib/mongoose.js,
 * lib/schema.js, the same in Mongoose 8.0 to 8.24 and 9. Without it, a global plugin adding a
 * unique index (a `tenant` field, say) put that index on the lock collection, where no record has
 * the field: the second lock record was a duplicate key. Fields, hooks, timestamps and option
 * changes are kept out the same way. Mongoose's built-in plugins (saveSubdocs, sharding,
 * trackTransaction, and validateBeforeSave in 8) are in the same list and are skipped too: they act
 * on document saves and deletes, which the plugin never makes (it writes lock records with its
 * own commands, lock-store.ts).
 */
function isolateFromGlobalPlugins(schema: Schema): void {
  const flags = schema as unknown as Record<string, unknown>;
  flags.$globalPluginsApplied = true;
  flags.$connectionPluginsApplied = true;
}

/** Mongoose's automatic setup options, as an application schema may set them for its own model. */
export interface SetupOptions {
  autoIndex?: unknown;
  autoCreate?: unknown;
}

/**
 * The application model's own `autoIndex` / `autoCreate` (schema options), which its lock
 * collection follows; unset, Mongoose falls back to the connection's and then its own, as for
 * any model (Model.init, lib/model.js).
 */
function inheritedSetupOptions(options: SetupOptions | undefined): { autoIndex?: boolean; autoCreate?: boolean } {
  const out: { autoIndex?: boolean; autoCreate?: boolean } = {};
  if (typeof options?.autoIndex === 'boolean') out.autoIndex = options.autoIndex;
  if (typeof options?.autoCreate === 'boolean') out.autoCreate = options.autoCreate;
  return out;
}

/**
 * The lock schema, made with the Schema class of the connection's own Mongoose instance: a schema
 * of another instance's class would be cloned by Connection.prototype.model
 * (`schema._clone(this.base.Schema)`), and the clone would lose the flags that keep the
 * connection's plugins off (isolateFromGlobalPlugins).
 */
function lockSchema(SchemaClass: typeof Schema, collection: string, purgeAfterMs: number, setupOptions: SetupOptions | undefined): Schema<LockRecord> {
  const schema = new SchemaClass<LockRecord>(
    {
      // The locked document's _id, whatever its type; the unique _id index is the lock itself.
      _id: { type: Schema.Types.Mixed, required: true },
      owner: { type: String, default: null },
      token: { type: String, default: null },
      fence: { type: Number, required: true },
      acquiredAt: { type: Date, required: true },
      expiresAt: { type: Date, required: true },
      // Opt-in display label of the holder ("being edited by Alice"), in clear; null once released.
      label: { type: String, default: null },
      // The ttl the acquisition asked for (ms): what a resume without its own ttl extends by.
      ttl: { type: Number },
      lastWriteAt: { type: Date },
      claim: { type: String },
      // A waiter's reservation of a free document (lock-store.ts reserve); no lock.
      reservedBy: { type: String },
      reservedUntil: { type: Date },
      reservedSince: { type: Date },
    },
    { collection, versionKey: false, strict: 'throw', ...inheritedSetupOptions(setupOptions) },
  );
  for (const { key, ...options } of lockIndexSpecs(Math.ceil(purgeAfterMs / 1000))) schema.index(key, options);
  markLockSchema(schema);
  isolateFromGlobalPlugins(schema);
  return schema;
}

/**
 * The lock model of `collection` on `connection` (compiled once; later callers share it).
 * `setupOptions`: the schema options of the first application model served, whose `autoIndex`
 * and `autoCreate` the lock collection follows.
 */
export function lockModelFor(connection: Connection, collection: string, purgeAfterMs: number, setupOptions?: SetupOptions): Model<LockRecord> {
  const name = `${LOCK_MODEL_PREFIX}${collection}`;
  const existing = connection.models[name] as Model<LockRecord> | undefined;
  const SchemaClass = (connection.base as { Schema?: typeof Schema } | undefined)?.Schema ?? Schema;
  return existing ?? connection.model<LockRecord>(name, lockSchema(SchemaClass, collection, purgeAfterMs, setupOptions), collection);
}
