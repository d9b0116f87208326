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

/**
 * What an upsert may insert as its `_id`, before it is sent, so the guard can check those ids like
 * targets (PRODUCT.md property 6: a document someone else holds, deleted by its holder who keeps the
 * lock, must not be re-created by someone else's upsert). The inserted document's `_id` comes from
 * (R21 and R22 of docs/mongodb-compatibility.md; `UpsertStage::_produceNewDocumentForInsert`,
 * src/mongo/db/exec/upsert_stage.cpp):
 *  1. the equalities of the canonicalized query (`populateDocumentWithQueryFields`,
 *     src/mongo/db/update/update_driver.cpp; `_extractFullEqualityMatches`,
 *     src/mongo/db/update/path_support.cpp, collects EQ nodes under ANDs and descends into nothing
 *     else). Canonicalizing may turn other conditions into equalities (`$in` of one value, a
 *     one-child `$or` / `$and`, `$all`), and never invents a value, so every value the query
 *     compares `_id` with positively is a candidate (idsFilterMaySeed: by polarity). Paths under
 *     `_id` (`'_id.x'`) seed an embedded-document `_id`, which cannot be locked (src/arguments.ts
 *     takes scalar ids only);
 *  2. then the update, run over that seed: `$set` / `$setOnInsert` of `_id` (only when the query
 *     seeded none: "If the update operation modifies any of the immutable paths, this will
 *     throw"), a replacement's `_id`, a `$rename` whose source the seed holds;
 *  3. otherwise a new ObjectId (`_ensureIdFieldIsFirst`), which no lock can name.
 * The union of 1 and 2 is returned, without values no lock can name (mayBeLocked). `undefined` when the guard cannot tell
 * before the write: another update operator on `_id` (`$inc`, `$max`, `$currentDate`, ...), a
 * `$rename` onto `_id` whose source the query mentions, a pipeline stage that sets, projects or
 * replaces `_id` or the root, a top-level query operator it does not know, or an update or filter
 * in a form it cannot read. Such an upsert is refused before anything is sent.
 */
export function idsUpsertMayInsert(filter: unknown, update: unknown, kind: 'update' | 'replacement'): unknown[] | undefined {
  const fromFilter = idsFilterMaySeed(filter);
  if (fromFilter === undefined) return undefined;
  const fromUpdate = kind === 'replacement' ? idOfReplacement(update) : idsUpdateMayCreate(filter as Document, update);
  if (fromUpdate === undefined) return undefined;
  return [...fromFilter, ...fromUpdate].filter(mayBeLocked);
}

/**
 * A value a lock can name: a plain equality value that is not an embedded document (lock ids are
 * scalars, src/arguments.ts). `null`, arrays and regexes cannot be locked (nor stored as an `_id`).
 */
function mayBeLocked(value: unknown): boolean {
  return isEqualityValue(value) && !(typeof value === 'object' && value !== null && isPlain(value));
}

/** Query operators on `_id` that compare it with their operand (`$ne` / `$nin` negated: see idsFilterMaySeed). */
const COMPARED_WITH = new Set(['$eq', '$ne']);
const COMPARED_WITH_EACH = new Set(['$in', '$nin', '$all']);
/** The operators mongod parses as the negation of another: `$ne` as NOT(EQ), `$nin` as NOT(IN). */
const NEGATING = new Set(['$ne', '$nin']);
/** Query operators on `_id` that never become an equality: range and type tests (R21). */
const NEVER_EQUAL = new Set(['$gt', '$gte', '$lt', '$lte', '$exists', '$type', '$regex', '$options', '$mod', '$size', '$bitsAllSet', '$bitsAnySet', '$bitsAllClear', '$bitsAnyClear']);
/** Top-level query operators that hold no condition on `_id` (`$expr` is refused in an upsert, R1). */
const NO_FIELD_CONDITION = new Set(['$comment', '$text', '$where', '$expr', '$sampleRate', '$alwaysTrue', '$alwaysFalse']);

/**
 * The values a query compares `_id` with under an even number of negations (see
 * idsUpsertMayInsert, 1), or undefined when it cannot tell. Polarity: mongod parses `$ne` as
 * NOT(EQ) and `$nin` as NOT(IN) (parseSubField, src/mongo/db/matcher/expression_parser.cpp:
 * `NOT_EQUAL` / `NOT_IN` wrap the EqualityMatchExpression / InMatchExpression in a
 * NotMatchExpression), `$not` as NOT and `$nor` as NOR; the seed takes only EQ nodes reached
 * through ANDs (`_extractFullEqualityMatches`, src/mongo/db/update/path_support.cpp), and
 * canonicalizing (CanonicalQuery, MatchExpression::optimize; NotMatchExpression::getOptimizer
 * only optimizes its child) keeps what the query means. A value that occurs only under an odd
 * number of negations is one the query EXCLUDES for `_id` wherever it occurs: the query is
 * negative-unate in that condition, so no rewriting of it (the Boolean simplifier's prime
 * implicants included) has that condition unnegated, and no seeding equality can name the value
 * (the query could not match a document with that `_id` either). An even number
 * (`{ $not: { $ne: X } }`, `{ $nor: [{ _id: { $ne: X } }] }`) is a positive condition again and
 * stays a candidate.
 */
function idsFilterMaySeed(filter: unknown, negated = false): unknown[] | undefined {
  if (filter === undefined || filter === null) return [];
  if (typeof filter !== 'object' || !isPlain(filter)) return undefined;
  const out: unknown[] = [];
  for (const [key, value] of Object.entries(filter)) {
    if (key === '_id') {
      if (!idCondition(value, negated, out)) return undefined;
    } else if (key === '$and' || key === '$or' || key === '$nor') {
      if (!Array.isArray(value)) continue; // mongod refuses it (BadValue)
      for (const clause of value) {
        const inner = idsFilterMaySeed(clause, key === '$nor' ? !negated : negated);
        if (inner === undefined) return undefined;
        out.push(...inner);
      }
    } else if (key.startsWith('$') && !NO_FIELD_CONDITION.has(key)) {
      return undefined;
    }
  }
  return out;
}

/** Adds the candidates of one condition on `_id` (under `negated` negations, see idsFilterMaySeed) to `out`; false when it cannot tell. */
function idCondition(value: unknown, negated: boolean, out: unknown[]): boolean {
  if (value === null || typeof value !== 'object' || value instanceof RegExp || (value as { _bsontype?: unknown })._bsontype !== undefined || !isPlain(value)) {
    if (!negated) out.push(value);
    return true;
  }
  const keys = Object.keys(value);
  if (keys.length === 0 || !keys.some((key) => key.startsWith('$'))) {
    if (!negated) out.push(value); // an embedded document, compared as a whole
    return true;
  }
  for (const [op, operand] of Object.entries(value)) {
    const positive = NEGATING.has(op) ? negated : !negated;
    if (COMPARED_WITH.has(op)) {
      if (positive) out.push(operand);
    } else if (COMPARED_WITH_EACH.has(op)) {
      if (positive && Array.isArray(operand)) out.push(...(operand as unknown[]));
    } else if (op === '$not') {
      if (operand !== null && typeof operand === 'object' && !(operand instanceof RegExp) && !idCondition(operand, !negated, out)) return false;
    } else if (!NEVER_EQUAL.has(op)) return false;
  }
  return true;
}

/** A replacement's `_id` (read as the driver serializes it: through the getter of a document). */
function idOfReplacement(replacement: unknown): unknown[] | undefined {
  if (replacement === null || typeof replacement !== 'object') return [];
  if (typeof (replacement as { toBSON?: unknown }).toBSON === 'function') return undefined;
  const id = (replacement as { _id?: unknown })._id;
  return id === undefined ? [] : [id];
}

/** The entries of an update operator's argument as the driver serializes them (a Map too), or undefined. */
function entriesOf(spec: unknown): [string, unknown][] | undefined {
  if (spec instanceof Map) return [...(spec as Map<unknown, unknown>).entries()].map(([k, v]) => [String(k), v]);
  if (spec === null || typeof spec !== 'object' || !isPlain(spec)) return undefined;
  return Object.entries(spec);
}

const onId = (path: unknown): boolean => path === '_id';

/** The `_id`s a modifier or pipeline update may create on an upsert (see idsUpsertMayInsert, 2), or undefined. */
function idsUpdateMayCreate(filter: Document | undefined, update: unknown): unknown[] | undefined {
  if (Array.isArray(update)) return pipelineKeepsId(update) ? [] : undefined;
  const operators = entriesOf(update);
  if (operators === undefined) return undefined;
  // Not a modifier update: the driver refuses it (MongoInvalidArgumentError, "Update document
  // requires atomic operators") or mongod does (FailedToParse), before anything is inserted.
  if (operators.length === 0 || !operators[0][0].startsWith('$')) return [];
  const out: unknown[] = [];
  for (const [op, spec] of operators) {
    const fields = entriesOf(spec);
    if (fields === undefined) return undefined;
    for (const [path, value] of fields) {
      if (op === '$rename') {
        // The value moved onto `_id` is the seed's (the only document an upsert's update starts
        // from); a source the query does not mention does not exist there: a no-op
        // (RenameNode::apply, src/mongo/db/update/rename_node.cpp).
        if (onId(value) && mentionsPath(filter, path)) return undefined;
        continue;
      }
      if (!onId(path)) continue;
      if (op !== '$set' && op !== '$setOnInsert') return undefined;
      out.push(value);
    }
  }
  return out;
}

/** Whether a query has a condition on `path`, a prefix of it or a path under it (at the top level or in `$and` / `$or` / `$nor`). */
function mentionsPath(filter: unknown, path: string): boolean {
  if (filter === null || typeof filter !== 'object' || !isPlain(filter)) return true;
  for (const [key, value] of Object.entries(filter)) {
    if (key === '$and' || key === '$or' || key === '$nor') {
      if (!Array.isArray(value) || value.some((clause) => mentionsPath(clause, path))) return true;
    } else if (key === path || path.startsWith(`${key}.`) || key.startsWith(`${path}.`)) return true;
  }
  return false;
}

/**
 * Whether every stage of a pipeline update leaves the seeded (or missing) `_id` as it is: `$set` /
 * `$addFields` of other fields, `$unset`, and `$project` that keeps or removes `_id` (a removed one
 * is generated anew, or refused when the query seeded it). A stage that sets `_id` or replaces the
 * root may insert any `_id`.
 */
function pipelineKeepsId(pipeline: unknown[]): boolean {
  return pipeline.every((stage) => {
    const entries = entriesOf(stage);
    if (entries === undefined || entries.length !== 1) return false;
    const [name, spec] = entries[0];
    if (name === '$unset') return true;
    const fields = entriesOf(spec);
    if (fields === undefined) return false;
    if (name === '$set' || name === '$addFields') return fields.every(([path]) => path !== '_id');
    if (name === '$project') return fields.every(([path, value]) => path !== '_id' || value === 0 || value === 1 || value === true || value === false);
    return false;
  });
}
