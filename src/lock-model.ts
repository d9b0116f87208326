/**
 * The sibling lock model: one per locked collection, on the same connection as the model it
 * serves, in its own collection. Mongoose creates the collection and its indexes with the
 * model (`Model.init()`, honouring `autoCreate` / `autoIndex`).
 */
import { Schema, type Connection, type Model } from 'mongoose';
import type { LockRecord } from './lock-store';

/** Prefix of the sibling models' names, so they never collide with an application's models. */
export const LOCK_MODEL_PREFIX = 'mongoose-pessimistic-lock:';

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

function lockSchema(collection: string, purgeAfterMs: number): Schema<LockRecord> {
  const schema = new Schema<LockRecord>(
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
      lastWriteAt: { type: Date },
      claim: { type: String },
    },
    { collection, versionKey: false, strict: 'throw', autoCreate: true },
  );
  // Reclaims the storage of released and expired locks; correctness never waits for it.
  schema.index({ expiresAt: 1 }, { expireAfterSeconds: Math.ceil(purgeAfterMs / 1000), name: 'expiresAt_ttl' });
  // Serves releaseAllFor(owner) (equality on owner) and listLocks({ owner }) (equality on owner,
  // then range and sort on _id, so a page is read in index order without a sort stage).
  schema.index({ owner: 1, _id: 1 }, { name: 'owner_1__id_1' });
  markLockSchema(schema);
  return schema;
}

export function lockModelFor(connection: Connection, collection: string, purgeAfterMs: number): Model<LockRecord> {
  const name = `${LOCK_MODEL_PREFIX}${collection}`;
  const existing = connection.models[name] as Model<LockRecord> | undefined;
  return existing ?? connection.model<LockRecord>(name, lockSchema(collection, purgeAfterMs), collection);
}
