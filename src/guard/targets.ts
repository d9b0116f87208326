/**
 * Which documents a write touches, worked out from the write itself: the filter exactly as
 * Mongoose hands it to the driver (cast, aliases translated, `strictQuery` applied), with the
 * write's own sort, collation, hint and `let` variables. Nothing here re-casts a filter, so the
 * guard can never disagree with the write about its targets.
 */
import { mongo } from 'mongoose';

type Document = mongo.Document;

/** Read options of a write that decide which documents its filter selects. */
export interface SelectionOptions {
  sort?: unknown;
  collation?: unknown;
  hint?: unknown;
  let?: unknown;
}

/** A plain object whose keys are query operators (`{ $in: [...] }`), as opposed to a value. */
function isOperatorObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  if ((value as { _bsontype?: unknown })._bsontype !== undefined) return false; // ObjectId, Decimal128, ...
  const keys = Object.keys(value);
  return keys.length > 0 && keys.every((key) => key.startsWith('$'));
}

/**
 * A value that `{ _id: value }` compares by equality (a regex would match by pattern instead).
 * Judged on values as they will be sent (sent-values.ts replaced the write's `_id` conditions by
 * the values decoded from their BSON): anything whose serialization is not its own shape (a Map,
 * an object with `toBSON`, a function) is no equality value here.
 */
export function isEqualityValue(value: unknown): boolean {
  if (value === undefined || value === null || value instanceof RegExp || Array.isArray(value)) return false;
  if (typeof value === 'function' || typeof value === 'symbol' || value instanceof Map) return false;
  if (typeof value === 'object' && typeof (value as { toBSON?: unknown }).toBSON === 'function') return false;
  if (typeof value === 'object' && (value as { _bsontype?: unknown })._bsontype === 'BSONRegExp') return false;
  if (typeof value === 'object' && !isOperatorObject(value) && (value as { _bsontype?: unknown })._bsontype === undefined) {
    // An embedded-document _id is compared by equality too, unless it hides operators.
    return Object.keys(value).every((key) => !key.startsWith('$'));
  }
  return !isOperatorObject(value);
}

/**
 * The `_id`s a filter names by equality at its top level (`{ _id: v }`, `{ _id: { $eq: v } }`,
 * `{ _id: { $in: [...] } }`, alone or beside other conditions): the write can only touch these,
 * so no target search is needed. Undefined when the filter does not name its `_id`s. The filter
 * is the one the guard sends (sentFilter): its `_id` condition is what the server receives, so a
 * value that serializes to an operator (`{ $ne: null }`) reads as the operator and names nothing.
 */
export function idsNamedBy(filter: Document | undefined): unknown[] | undefined {
  if (!filter || typeof filter !== 'object' || !Object.prototype.hasOwnProperty.call(filter, '_id')) return undefined;
  const value: unknown = filter._id;
  if (isOperatorObject(value)) {
    const keys = Object.keys(value);
    if (keys.length !== 1) return undefined;
    if (keys[0] === '$eq') return isEqualityValue(value.$eq) ? [value.$eq] : undefined;
    if (keys[0] === '$in' && Array.isArray(value.$in) && value.$in.every(isEqualityValue)) return value.$in as unknown[];
    return undefined;
  }
  return isEqualityValue(value) ? [value] : undefined;
}

/**
 * Whether a write's collation compares strings otherwise than byte by byte (anything but none or
 * `{ locale: 'simple' }`). Under such a collation `{ _id: 'abc' }` also matches `'ABC'` (string
 * comparisons in a match follow the operation's collation, whatever the field:
 * jstests/core/collation.js; and such a query does not use the `_id` index's IDHACK, which needs
 * the collection's collator: isIdHackEligibleQuery, src/mongo/db/query/query_utils.h).
 */
export function isCollated(collation: unknown): boolean {
  if (collation === undefined || collation === null) return false;
  return (collation as { locale?: unknown }).locale !== 'simple';
}

/** Whether an `_id` holds a string anywhere (the only values a collation compares differently). */
export function containsString(id: unknown): boolean {
  if (typeof id === 'string') return true;
  if (Array.isArray(id)) return id.some(containsString);
  if (id !== null && typeof id === 'object' && (id as { _bsontype?: unknown })._bsontype === undefined && !Buffer.isBuffer(id) && !(id instanceof Date)) {
    return Object.values(id).some(containsString);
  }
  return false;
}

/**
 * The `_id`s a write's filter names (idsNamedBy), when they are exactly the documents it can
 * touch: not under a collation that compares strings otherwise than byte by byte, if any of them
 * holds a string (`{ _id: 'ABC' }` with strength 2 also writes `'abc'`). Undefined otherwise: the
 * targets must then be searched with the write's collation.
 */
export function trustedIds(filter: Document | undefined, collation: unknown): unknown[] | undefined {
  const named = idsNamedBy(filter);
  if (named && isCollated(collation) && named.some(containsString)) return undefined;
  return named;
}

/**
 * `filter` narrowed to exactly `ids` (none: nothing matches), the form the guard sends every write
 * whose targets it searched: a filter the server evaluates again at the write (`$$NOW`, `$rand`,
 * `$sampleRate`, a document changed meanwhile) can then only select documents that were checked.
 * Exact only where the `_id` comparison is: for ids holding strings under a collation
 * (isCollated) the caller first adds every `_id` the collation makes equal to one of them, and
 * checks them all.
 *
 * For an upsert the `_id` condition must not change what is inserted when nothing matches. The
 * server builds the inserted document from the query's equality conditions after canonicalizing
 * it (`UpdateDriver::populateDocumentWithQueryFields`, `pathsupport::extractEqualityMatches`,
 * src/mongo/db/update/update_driver.cpp), and canonicalizing turns `{ _id: { $in: [K] } }` into the
 * equality `_id: K` (which would insert K's `_id`: a duplicate key, or a re-created K) and an empty
 * `$in` into `$alwaysFalse`, which makes the whole `$and` `$alwaysFalse` and drops every equality
 * of the filter (InMatchExpression::getOptimizer, src/mongo/db/matcher/expression_leaf.cpp;
 * ListOfMatchExpression::getOptimizer, expression_tree.cpp). So an upsert is narrowed with
 * conditions that are no equalities: `{ _id: { $gte: K, $lte: K } }` per id (a range bounded by one
 * value matches exactly what `_id: K` matches, also under a collation, and uses the `_id` index),
 * or, with no id, `{ _id: { $exists: false } }` (every stored document has an `_id`).
 */
export function narrowedTo(filter: Document, ids: unknown[], upsert: boolean): Document {
  let condition: Document;
  if (!upsert) condition = { _id: ids.length === 1 ? ids[0] : { $in: ids } };
  else if (ids.length === 0) condition = { _id: { $exists: false } };
  else if (ids.length === 1) condition = { _id: { $gte: ids[0], $lte: ids[0] } };
  else condition = { $or: ids.map((id) => ({ _id: { $gte: id, $lte: id } })) };
  const key = Object.keys(condition)[0];
  if (!Object.prototype.hasOwnProperty.call(filter, key)) return { ...filter, ...condition };
  return { $and: [filter, condition] };
}

/** The read options of a find that selects what `options`' write selects. */
function findOptions(options: SelectionOptions, session: mongo.ClientSession | undefined, limit: number | undefined, projection: Document = { _id: 1 }): mongo.FindOptions {
  // From the primary whatever the connection's read preference: a lagging secondary would miss
  // documents the write then reaches unchecked. (Inside a transaction it must be primary anyway.)
  const out: mongo.FindOptions = { projection, session, readPreference: 'primary' };
  if (options.sort !== undefined) out.sort = options.sort as mongo.Sort;
  if (options.collation !== undefined) out.collation = options.collation as mongo.CollationOptions;
  if (options.hint !== undefined) out.hint = options.hint as mongo.Hint;
  if (options.let !== undefined) out.let = options.let as Document;
  if (limit !== undefined) out.limit = limit;
  return out;
}

/**
 * The `_id`s of the documents `filter` selects, read through the write's own collection with the
 * write's selection options (one `find`; `limit` for single-document writes).
 */
export async function findTargets(
  collection: mongo.Collection<Document>,
  filter: Document,
  options: SelectionOptions,
  session: mongo.ClientSession | undefined,
  limit?: number,
): Promise<unknown[]> {
  const docs = await collection.find(filter, findOptions(options, session, limit)).toArray();
  return docs.map((doc) => doc._id);
}

/**
 * The documents `filter` selects, each with `_id` and the fields `projection` names (check mode's
 * sorted single-document writes read their sort keys this way: sort-key.ts), read like
 * findTargets.
 */
export async function findTargetDocuments(
  collection: mongo.Collection<Document>,
  filter: Document,
  options: SelectionOptions,
  session: mongo.ClientSession | undefined,
  limit: number | undefined,
  projection: Document,
): Promise<Document[]> {
  return collection.find(filter, findOptions(options, session, limit, projection)).toArray();
}
