/**
 * Which collection a command's name resolves to, for commands inside and outside transactions.
 *
 * Since 4.4 a transaction may create collections (explicitly with `create`, implicitly with the
 * first insert or upsert) and indexes on collections it created; they are invisible outside until
 * the transaction commits (manual, "Transactions" › "Create Collections and Indexes in a
 * Transaction"; transactions spec tests create-collection.json / create-index.json). Here such a
 * collection lives on the transaction (`txn.pendingCollections`) and is registered with the storage
 * at commit (TransactionManager.commit).
 */
import type { Document } from 'bson';
import { Collection } from './storage/collection';
import { validateNamespace, type Storage } from './storage/engine';
import type { Transaction } from './transactions';

export interface NamespaceCtx {
  storage: Storage;
  txn?: Transaction;
}

/** The collection `db.name` as this command sees it (a transaction's own new collections included). */
export function getColl(ctx: NamespaceCtx, db: string, name: string): Collection | undefined {
  const pending = ctx.txn?.pendingCollections.get(`${db}.${name}`);
  return pending ?? ctx.storage.getCollection(db, name);
}

/** The collection, created if missing: committed at once outside transactions, pending inside. */
export function ensureColl(ctx: NamespaceCtx, db: string, name: string, options: Document = {}): Collection {
  const existing = getColl(ctx, db, name);
  if (existing) return existing;
  if (!ctx.txn) return ctx.storage.ensureCollection(db, name, options);
  validateNamespace(db, name);
  const coll = new Collection(db, name, options);
  ctx.txn.pendingCollections.set(coll.ns, coll);
  return coll;
}
