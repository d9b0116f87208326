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

type Document = mongo.Document;

/** What the guard sends and which `_id` the upsert inserts (undefined: unknown before it runs). */
export interface UpsertWithId {
  update: unknown;
  insertedId?: { value: unknown };
}

/** Whether `filter` names `_id` (or a path under it) anywhere, so the query may seed the `_id`. */
function mentionsId(filter: unknown): boolean {
  if (Array.isArray(filter)) return filter.some(mentionsId);
  if (filter === null || typeof filter !== 'object' || !isPlain(filter)) return false;
  return Object.entries(filter).some(([k, v]) => k === '_id' || k.startsWith('_id.') || mentionsId(v));
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
  if (mentionsId(filter) || update === null || typeof update !== 'object' || Array.isArray(update) || !isPlain(update)) return { update };
  const operators = Object.keys(update);
  if (operators.length === 0 || !operators.every((op) => op.startsWith('$'))) return { update };
  let named: { value: unknown } | undefined;
  for (const op of operators) {
    const spec = (update as Document)[op] as unknown;
    if (spec === null || typeof spec !== 'object' || !isPlain(spec)) continue;
    for (const path of Object.keys(spec)) {
      if (path !== '_id' && !path.startsWith('_id.')) continue;
      // Another operator on `_id`, or a path under it: left as written (the server decides).
      if (path !== '_id' || (op !== '$set' && op !== '$setOnInsert')) return { update };
      named = { value: (spec as Document)[path] };
    }
  }
  if (named) return { update, insertedId: named };
  const id = new mongo.ObjectId();
  const setOnInsert = (update as Document).$setOnInsert as Document | undefined;
  return { update: { ...(update as Document), $setOnInsert: { ...setOnInsert, _id: id } }, insertedId: { value: id } };
}
