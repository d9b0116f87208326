/**
 * The `_id` an upsert of an ordered bulk will insert, known before the bulk is sent, so that the
 * bulk's later operations (narrowed to the `_id`s the guard checked) still reach the document it
 * inserts, as they would without the plugin.
 *
 * Without an `_id` from the query or the update, mongod generates an ObjectId when the upsert
 * inserts (UpsertStage::_produceNewDocumentForInsert, _ensureIdFieldIsFirst; src/mongo/db/exec/
 * upsert_stage.cpp). The guard gives it one first, the way the driver gives one to an insertOne:
 * `$setOnInsert: { _id: new ObjectId() }`, which mongod accepts when the query seeds no `_id`
 * (modifier_node.cpp, applyToNonexistentElement; jstests/core/upsert_and.js) and which does nothing
 * when the upsert matches a document instead. Only modifier updates are given one: a replacement's
 * `_id` would have to equal the matched document's, and a pipeline has no `$setOnInsert`.
 */
import { mongo } from 'mongoose';
import { isEqualityValue } from './targets';

type Document = mongo.Document;

/**
 * What the guard sends, and the `_id` the upsert inserts when that is known before it runs:
 * `generated` when the guard gave it (a fresh ObjectId, which no document and no lock can have),
 * otherwise named by the caller's update (which, should the upsert match a document instead, may
 * be any existing document's `_id`: the guard checks it like a target).
 */
export interface UpsertWithId {
  update: unknown;
  insertedId?: { value: unknown; generated: boolean };
}

/**
 * Whether the query may seed the document's `_id`: a top-level condition on `_id` or a path under
 * it, also inside `$and` / `$or` / `$nor` (canonicalization turns single-child `$or`s and `$in` /
 * `$all` of one value into equalities, R21). Conditions inside a field's value (`{ items: {
 * $elemMatch: { _id } } }`, an embedded document with an `_id`) are on other paths and seed none.
 */
function mentionsId(filter: unknown): boolean {
  if (filter === null || typeof filter !== 'object' || !isPlain(filter)) return true; // not a plain filter: do not touch
  for (const [k, v] of Object.entries(filter)) {
    if (k === '_id' || k.startsWith('_id.')) return true;
    if ((k === '$and' || k === '$or' || k === '$nor') && (!Array.isArray(v) || v.some(mentionsId))) return true;
  }
  return false;
}

function isPlain(v: object): v is Document {
  const proto = Object.getPrototypeOf(v) as unknown;
  return proto === Object.prototype || proto === null;
}

/**
 * For an upsert with `filter` and `update` (kind updateOne or updateMany): the update to send, and
 * the `_id` it inserts when that is known, either named by the update itself (`$set` /
 * `$setOnInsert` of `_id`) or given by the guard.
 */
export function upsertWithId(filter: Document, update: unknown): UpsertWithId {
  if (update === null || typeof update !== 'object' || Array.isArray(update) || !isPlain(update)) return { update };
  const operators = Object.keys(update);
  if (operators.length === 0 || !operators.every((op) => op.startsWith('$'))) return { update };
  let named: { value: unknown; generated: boolean } | undefined;
  for (const op of operators) {
    const spec = (update as Document)[op] as unknown;
    // An operator given in another form (a Map the driver serializes, a document with toBSON) is
    // left as written: the guard cannot read or extend it exactly as the driver would send it.
    if (spec === null || typeof spec !== 'object' || !isPlain(spec)) return { update };
    for (const [path, value] of Object.entries(spec)) {
      const onId = (p: unknown) => p === '_id' || (typeof p === 'string' && p.startsWith('_id.'));
      // `$rename` writes its target path too (UpdateObjectNode::parseAndMerge): one onto `_id`
      // would conflict with an added `$setOnInsert._id` (ConflictingUpdateOperators).
      if (op === '$rename' && onId(value)) return { update };
      if (!onId(path)) continue;
      // Another operator on `_id`, or a path under it: left as written (the server decides).
      if (path !== '_id' || (op !== '$set' && op !== '$setOnInsert')) return { update };
      // Only an `_id` the guard would accept in a filter (no regex, array, null or operators):
      // it is checked against the lock collection like a target (R22).
      if (!isEqualityValue(value)) return { update };
      named = { value, generated: false };
    }
  }
  // Named by the update: whatever the filter says, the inserted document has this `_id` (a
  // filter that seeds another one makes the upsert fail with ImmutableField).
  if (named) return { update, insertedId: named };
  if (mentionsId(filter)) return { update };
  const id = new mongo.ObjectId();
  const setOnInsert = (update as Document).$setOnInsert as Document | undefined;
  return { update: { ...(update as Document), $setOnInsert: { ...setOnInsert, _id: id } }, insertedId: { value: id, generated: true } };
}
