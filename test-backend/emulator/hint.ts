/**
 * `hint` on find, count, distinct, aggregate, update, delete and findAndModify.
 *
 * mongod plans the query with the hinted index only; a hint naming no index of the collection fails
 * with BadValue and a message containing "hint provided does not correspond to an existing index"
 * (QueryPlanner::plan, src/mongo/db/query/query_planner.cpp, re-read; the full errmsg also carries the
 * planner's description of the query, which the emulator does not reproduce). Hints on a missing
 * collection are not checked (there is nothing to plan). `{ $natural: 1 | -1 }` is a collection scan.
 * A hinted sparse index can return an incomplete result: only documents that have an entry in the
 * index (manual, "Sparse Indexes": MongoDB uses a sparse index that would give incomplete results
 * only when hint() names it). Hinting a partial index is refused (NotImplemented): the emulator has no
 * source for how mongod answers a query its filter does not cover.
 */
import type { Document } from 'bson';
import { Codes, MongoCommandError, unsupported } from './errors';
import type { Collection } from './storage/collection';
import { isPlainObject, keyOf } from './values';

export type HintRestriction = ((doc: Document) => boolean) | undefined;

export function resolveHint(coll: Collection | undefined, hint: unknown): HintRestriction {
  if (hint === undefined || hint === null || !coll) return undefined;
  if (typeof hint === 'string' ? hint === '' : isPlainObject(hint) && Object.keys(hint).length === 0) return undefined;
  // QueryPlanner::plan: a hint with a $natural field is a collection scan (hintObj[kNaturalSortField]).
  if (isPlainObject(hint) && '$natural' in hint) return undefined;
  if (typeof hint !== 'string' && !isPlainObject(hint)) throw new MongoCommandError(Codes.FailedToParse, 'hint must be either a string or nested object');
  const idIndex = typeof hint === 'string' ? hint === '_id_' : keyOf(hint) === keyOf({ _id: 1 });
  if (idIndex) return undefined;
  const matches = coll.indexes.filter((i) => (typeof hint === 'string' ? i.name === hint : keyOf(i.spec.key) === keyOf(hint)));
  const index = matches[0];
  if (!index) throw new MongoCommandError(Codes.BadValue, 'hint provided does not correspond to an existing index');
  // QueryPlanner::plan answers IndexNotFound "Hint matched multiple indexes, must hint by index name.
  // Matched: <IndexEntry::toString> and <...>"; IndexEntry::toString is not reproduced.
  if (matches.length > 1) throw unsupported('a hint by key pattern that matches several indexes');
  if (index.spec.partialFilterExpression) throw unsupported(`hint of the partial index '${index.name}'`);
  if (index.spec.sparse) return (doc) => index.entries(doc).length > 0;
  return undefined;
}

/**
 * The order documents come out of a hinted index scan: the index's key order (an index scan returns
 * documents in index order; the _id index in _id order). undefined for $natural or no hint.
 */
export function hintOrder(coll: Collection | undefined, hint: unknown): Document | undefined {
  if (hint === undefined || hint === null || !coll) return undefined;
  if (isPlainObject(hint) && '$natural' in hint) return undefined;
  if (typeof hint === 'string' ? hint === '_id_' : isPlainObject(hint) && keyOf(hint) === keyOf({ _id: 1 })) return { _id: 1 };
  const index = coll.indexes.find((i) => (typeof hint === 'string' ? i.name === hint : keyOf(i.spec.key) === keyOf(hint)));
  return index ? { ...index.spec.key } : undefined;
}

export function restrict<T>(entries: T[], docOf: (e: T) => Document, r: HintRestriction): T[] {
  return r ? entries.filter((e) => r(docOf(e))) : entries;
}
