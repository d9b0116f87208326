/**
 * The write path shared by insert/update/delete/findAndModify: computing the
 * new version of a document (mingo's updater), upsert seeding, `_id` rules,
 * unique checks, and routing each document write either to the committed path
 * or to the running transaction.
 */
import { calculateObjectSize, ObjectId, type Document } from 'bson';
import { evaluate, makeAggregator, runUpdateOne } from './mingo-context';
import { Codes, MongoCommandError, toCommandError, unsupported } from './errors';
import { duplicateKeyError } from './indexes';
import { checkUpsertPredicate } from './rules/upsert';
import { ensureColl, getColl } from './namespaces';
import { prepareModifier } from './update-rules';
import { checkSortPattern, sortDocs } from './sort';
import { checkFilterSyntax } from './query-parse';
export { sortDocs } from './sort';
import { assignPath, checkIntResults, planArithmetic } from './update-arithmetic';
import { rejectProtoKeys } from './unsupported-features';
import { compareBytes, modifierPaths, orderCreatedFields } from './update-order';
import { validateWrite } from './validation';
import { bindExpression, bindFilter, compileFilter, equalityValue, View, withRestriction, type SystemVars } from './query';
import { resolveHint } from './hint';
import type { Collection } from './storage/collection';
import { WaitForLock, type DocWrite, type Storage, type WriteKind } from './storage/engine';
import type { Transaction, TransactionManager } from './transactions';
import { clone, isPlainObject, keyOf, typedKeyOf, valuesEqual } from './values';
import type { UpdateSource } from './update-description';

export interface ExecCtx {
  storage: Storage;
  txns: TransactionManager;
  txn?: Transaction;
  vars: SystemVars;
  db: string;
  /** The command's `bypassDocumentValidation: true` (insert, update, findAndModify): validation.ts is skipped. */
  bypassDocumentValidation?: boolean;
}

const MODIFIERS = new Set(['$set', '$unset', '$inc', '$mul', '$min', '$max', '$rename', '$push', '$pull', '$pullAll', '$addToSet', '$pop', '$bit', '$currentDate', '$setOnInsert']);
const PIPELINE_STAGES = new Set(['$addFields', '$set', '$project', '$unset', '$replaceRoot', '$replaceWith']);

export type UpdateSpec = Document | Document[];

export function isModifier(u: UpdateSpec): boolean {
  return !Array.isArray(u) && Object.keys(u).some((k) => k.startsWith('$'));
}

/**
 * The interruption of a command whose `maxTimeMS` ran out: MaxTimeMSExpired (50), "operation exceeded
 * time limit" (OperationContext::checkForInterruptNoAssert, src/mongo/db/operation_context.cpp, with
 * the deadline the command's maxTimeMS set with MaxTimeMSExpired as its timeout error).
 */
export function maxTimeExpired(): MongoCommandError {
  return new MongoCommandError(Codes.MaxTimeMSExpired, 'operation exceeded time limit');
}

/**
 * Runs `fn` again after the transaction holding a document finishes (non-transactional writes wait,
 * like mongod). With `deadline` (the command's maxTimeMS, as a `performance.now()` instant) the wait
 * ends there with MaxTimeMSExpired: on mongod the write conflict is retried by the plan executor,
 * which yields and checks for interruption before each retry (PlanExecutorImpl, yieldOrInterrupt:
 * src/mongo/db/query/plan_executor_impl.cpp), so the operation's deadline interrupts the wait.
 */
export async function waitingForLocks<T>(fn: () => T, deadline?: number): Promise<T> {
  for (;;) {
    try {
      return fn();
    } catch (e) {
      if (e instanceof WaitForLock) {
        if (deadline === undefined) await e.holder.finished;
        else {
          const left = deadline - performance.now();
          if (left <= 0) throw maxTimeExpired();
          let timer: NodeJS.Timeout | undefined;
          const expired = await Promise.race([
            e.holder.finished.then(() => false),
            new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(true), left))),
          ]);
          clearTimeout(timer);
          if (expired) throw maxTimeExpired();
        }
        continue;
      }
      throw e;
    }
  }
}

function withIdFirst(doc: Document, id: unknown): Document {
  const out: Document = { _id: id };
  for (const k of Object.keys(doc)) if (k !== '_id') out[k] = doc[k];
  return out;
}

/** BSONObjMaxUserSize (src/mongo/bson/bsonobj.h): 16 MiB. */
export const MAX_USER_DOC_SIZE = 16 * 1024 * 1024;

/**
 * fixDocumentForInsert (src/mongo/db/ops/insert.cpp): "object to insert too large. size in bytes:
 * <n>, max size: 16777216", BadValue; a server jstest on document size limits asserts that a
 * document of exactly the maximum size already fails (file path not pinned down).
 */
function checkInsertSize(doc: Document): void {
  const size = calculateObjectSize(doc);
  if (size > MAX_USER_DOC_SIZE) throw new MongoCommandError(Codes.BadValue, `object to insert too large. size in bytes: ${size}, max size: ${MAX_USER_DOC_SIZE}`);
}

/**
 * The update stage (src/mongo/db/exec/update_stage.cpp) refuses a result over the limit:
 * BSONObjectTooLarge (10334) "Resulting document after update is larger than 16777216" (older
 * servers used code 17419 for the same message).
 */
function checkUpdatedSize(doc: Document): void {
  if (calculateObjectSize(doc) > MAX_USER_DOC_SIZE) throw new MongoCommandError(10334, `Resulting document after update is larger than ${MAX_USER_DOC_SIZE}`, {}, 'BSONObjectTooLarge');
}

export function prepareInsert(doc: Document): Document {
  if (!isPlainObject(doc)) throw new MongoCommandError(Codes.TypeMismatch, 'document to insert must be an object');
  checkInsertSize(doc);
  rejectProtoKeys(doc);
  if (Array.isArray(doc._id)) throw new MongoCommandError(Codes.InvalidIdField, "The '_id' value cannot be of type array");
  if (doc._id instanceof RegExp) throw new MongoCommandError(Codes.InvalidIdField, "The '_id' value cannot be of type regex");
  // mongod refuses '$'-prefixed field names inside _id (CRUD spec test insertOne-dots_and_dollars.json
  // expects a server error); its code and message are not sourced here, so NotImplemented.
  if (isPlainObject(doc._id) && Object.keys(doc._id).some((k) => k.startsWith('$'))) throw unsupported("an _id holding a '$'-prefixed field (mongod refuses it)");
  return withIdFirst(doc, doc._id === undefined ? new ObjectId() : doc._id);
}

/** Routes one document write: transaction overlay, or the committed path after lock and unique checks. */
export function applyWrite(ctx: ExecCtx, w: DocWrite): void {
  // Document validation costs nothing for collections without a validator (validation.ts).
  if (w.after && w.coll.options.validator !== undefined && !ctx.bypassDocumentValidation) validateWrite(w.coll, w.before, w.after);
  if (ctx.txn) {
    if (w.kind === 'insert') {
      const view = new View(w.coll, ctx.txn);
      if (view.get(w.key)) throw idDuplicate(w.coll, w.after!);
    }
    ctx.txns.write(ctx.txn, w);
    return;
  }
  ctx.storage.checkUnlocked(w.coll, w.key);
  if (w.kind === 'insert' && w.coll.docs.has(w.key)) throw idDuplicate(w.coll, w.after!);
  if (w.after) {
    ctx.storage.checkUnique(w.coll, w.key, w.after);
    // A running transaction's uncommitted document holding one of the unique keys: wait for it, then re-check.
    if (ctx.storage.locks.size > 0) {
      const holder = ctx.txns.uncommittedUniqueHolder(w.coll, w.key, w.after);
      if (holder) throw new WaitForLock(holder);
    }
  }
  ctx.storage.commit(w);
}

function idDuplicate(coll: Collection, doc: Document): MongoCommandError {
  return duplicateKeyError(coll.ns, '_id_', { _id: 1 }, { _id: doc._id });
}

export function insertOne(ctx: ExecCtx, coll: Collection, raw: Document): Document {
  const doc = prepareInsert(raw);
  applyWrite(ctx, { coll, key: keyOf(doc._id), before: null, after: doc, kind: 'insert' });
  return doc;
}

function validateUpdate(u: UpdateSpec): void {
  if (Array.isArray(u)) {
    for (const stage of u) {
      const name = isPlainObject(stage) ? Object.keys(stage)[0] : undefined;
      if (!name || !PIPELINE_STAGES.has(name)) {
        throw new MongoCommandError(Codes.InvalidOptions, `${name ?? 'stage'} is not allowed to be used within an update`);
      }
    }
    return;
  }
  if (!isPlainObject(u)) throw new MongoCommandError(Codes.FailedToParse, 'Update argument must be either an object or an array');
  const keys = Object.keys(u);
  const ops = keys.filter((k) => k.startsWith('$'));
  if (ops.length && ops.length !== keys.length) throw new MongoCommandError(Codes.FailedToParse, "Unknown modifier: mixed update operators and fields");
  for (const op of ops) {
    if (!MODIFIERS.has(op)) throw new MongoCommandError(Codes.FailedToParse, `Unknown modifier: ${op}. Expected a valid update modifier or pipeline-style update specified as an array`);
  }
}

/** Turns $currentDate into $set with the command's single `now`, and handles $setOnInsert. */
function normalizeModifier(u: Document, vars: SystemVars, inserting: boolean): Document {
  const out: Document = {};
  for (const [op, spec] of Object.entries(u)) {
    if (op === '$setOnInsert') {
      if (inserting) out.$set = { ...(out.$set as Document | undefined), ...(spec as Document) };
      continue;
    }
    if (op === '$currentDate') {
      const set: Document = {};
      for (const [f, how] of Object.entries(spec as Document)) {
        const type = isPlainObject(how) ? how.$type : 'date';
        set[f] = type === 'timestamp' ? vars.clusterTime : new Date(vars.now.getTime());
      }
      out.$set = { ...(out.$set as Document | undefined), ...set };
      continue;
    }
    out[op] = op === '$set' && out.$set ? { ...(out.$set as Document), ...(spec as Document) } : spec;
  }
  return out;
}

/**
 * The new version of `old` after `update` (modifier, replacement or pipeline).
 * `filter` resolves the positional `$` operator; `inserting` enables $setOnInsert.
 */
export function computeUpdate(old: Document, update: UpdateSpec, opts: { filter?: Document; arrayFilters?: Document[]; vars: SystemVars; inserting: boolean }): Document {
  validateUpdate(update);
  rejectProtoKeys(update);
  if (!Array.isArray(update) && isModifier(update)) checkPathConflicts(update);
  let next: Document;
  if (!Array.isArray(update) && !isModifier(update)) {
    if (update._id !== undefined && old._id !== undefined && !valuesEqual(update._id, old._id)) throw immutableId();
    next = withIdFirst(clone(update), update._id !== undefined ? update._id : old._id);
    if (next._id === undefined) delete next._id;
  } else {
    let normalized = Array.isArray(update) ? undefined : normalizeModifier(update, opts.vars, opts.inserting);
    let createdId: { value: unknown } | undefined;
    if (normalized && opts.inserting && old._id === undefined) [normalized, createdId] = takeCreatedId(normalized);
    if (createdId) return withIdFirst(Object.keys(normalized as Document).length ? computeUpdate(old, normalized as Document, opts) : clone(old), createdId.value);
    const prepared = Array.isArray(update) ? bindExpression(update, opts.vars) : prepareModifier(old, normalized as Document, opts.filter, opts.inserting);
    if (!Array.isArray(prepared) && Object.keys(prepared).length === 0) return old;
    if (Array.isArray(prepared)) return fastPipelineSet(old, prepared) ?? runPipelineUpdate(old, prepared, opts.vars);
    checkArithmeticTypes(old, prepared);
    // $inc/$mul/$min/$max with BSON numeric types (update-arithmetic.ts), the rest through mingo.
    const plan = planArithmetic(old, prepared);
    const modifier = plan.rest;
    let base: Document = old;
    if (Object.keys(modifier).length) base = fastSetInc(old, modifier) ?? applyModifier(old, modifier, opts);
    if (plan.checkIntPrefixes.length) checkIntResults(base, plan.checkIntPrefixes);
    if (!plan.assign.length && base === old) return old;
    for (const [path, v] of plan.assign) base = assignPath(base, path, v);
    // mongod applies the paths in field-name order across all operators (update-order.ts): the
    // updaters above ran in document order, so the fields they created are put in that order.
    next = orderCreatedFields(old, base, modifierPaths(prepared));
    if (old._id !== undefined && !valuesEqual(next._id, old._id)) throw immutableId();
    if (next._id !== undefined) next = withIdFirst(next, next._id);
  }
  return next;
}

/**
 * An upsert whose query seeds no `_id` may create it with `$set` / `$setOnInsert` (SERVER-9958):
 * UpsertStage::_produceNewDocumentForInsert (src/mongo/db/exec/upsert_stage.cpp) runs the update
 * over the query-seeded document with `_id` immutable, and ModifierNode::applyToNonexistentElement
 * (src/mongo/db/update/modifier_node.cpp) refuses a created path only when the immutable path is a
 * prefix of the path already taken, so creating an absent `_id` is allowed; _ensureIdFieldIsFirst
 * then puts it first. jstests/core/upsert_and.js: `update({$and: [{c: 1}, {d: 1}]},
 * {$setOnInsert: {_id: 1}}, upsert)` inserts `{_id: 1, c: 1, d: 1}`. Returns the modifier without
 * that `_id` and the value. Other ways of creating an `_id` there (`'_id.x'`, `$inc`, an array
 * value, checked by _assertPathsNotArray with a message not sourced here) are refused.
 */
function takeCreatedId(modifier: Document): [Document, { value: unknown } | undefined] {
  let created: { value: unknown } | undefined;
  const out: Document = {};
  for (const [op, spec] of Object.entries(modifier)) {
    if (!isPlainObject(spec)) {
      out[op] = spec;
      continue;
    }
    const rest: Document = {};
    for (const [path, v] of Object.entries(spec)) {
      if (path !== '_id' && !path.startsWith('_id.')) rest[path] = v;
      else if (op === '$set' && path === '_id' && !Array.isArray(v) && v !== undefined && !(v instanceof RegExp)) created = { value: v };
      else throw unsupported(`creating the _id of an upserted document with ${op} of '${path}'${Array.isArray(v) ? ' (an array)' : ''}; only $set or $setOnInsert of a whole non-array _id is implemented`);
    }
    if (Object.keys(rest).length) out[op] = rest;
  }
  return [out, created];
}

/** mingo's updater on a copy of `old`. */
function applyModifier(old: Document, modifier: Document, opts: { filter?: Document; arrayFilters?: Document[]; vars: SystemVars; inserting: boolean }): Document {
  const docs = [clone(old)];
  const boundFilter = opts.filter && !opts.inserting ? bindFilter(opts.filter, opts.vars) : {};
  try {
    runUpdateOne(docs, boundFilter, modifier, { arrayFilters: opts.arrayFilters }, { variables: opts.vars.let });
  } catch (e) {
    if (!/would create a conflict/.test((e as Error).message)) throw toCommandError(e);
    applyPathByPath(docs, boundFilter, modifier, opts);
  }
  return docs[0];
}

/**
 * The common pipeline update shape, `$set`/`$addFields` stages assigning expressions to plain
 * top-level fields, evaluated without building a mingo Aggregator (which costs more than the whole
 * rest of the command): each stage's expressions see the stage's input document, then the fields are
 * assigned in order; an expression that evaluates to missing ('$$REMOVE', a missing field) removes
 * the field, as $addFields does. Anything else returns undefined and runs as an aggregation.
 */
function setStagesOnly(old: Document, stages: Document[], vars: SystemVars): Document | undefined {
  for (const stage of stages) {
    const keys = isPlainObject(stage) ? Object.keys(stage) : [];
    if (keys.length !== 1 || (keys[0] !== '$set' && keys[0] !== '$addFields')) return undefined;
    const spec = stage[keys[0]] as unknown;
    if (!isPlainObject(spec) || !Object.keys(spec).every(plainField)) return undefined;
  }
  let cur = clone(old);
  try {
    for (const stage of stages) {
      const spec = stage[Object.keys(stage)[0]] as Document;
      const values = Object.keys(spec).map((f) => [f, evaluate(cur, spec[f], { variables: vars.let })] as const);
      const next: Document = { ...cur };
      for (const [f, v] of values) {
        if (v === undefined) delete next[f];
        else next[f] = v;
      }
      cur = next;
    }
  } catch (e) {
    throw toCommandError(e);
  }
  return cur;
}

/**
 * A pipeline update is the pipeline's stages run on the document (manual, "Updates with Aggregation
 * Pipeline"). A result without `_id` keeps the original `_id` (transactions/CRUD spec test
 * updateOne-pipeline.json: `[{ $replaceRoot: { newRoot: '$t' } }, ...]` leaves `_id: 1`); a
 * different `_id` is ImmutableField.
 */
function runPipelineUpdate(old: Document, stages: Document[], vars: SystemVars): Document {
  const quick = setStagesOnly(old, stages, vars);
  if (quick) return quick;
  let next: Document;
  try {
    next = (makeAggregator(stages, { variables: vars.let }).run([clone(old)]) as Document[])[0] ?? {};
  } catch (e) {
    throw toCommandError(e);
  }
  if (next._id === undefined) return old._id === undefined ? next : withIdFirst(next, old._id);
  if (old._id !== undefined && !valuesEqual(next._id, old._id)) throw immutableId();
  return withIdFirst(next, next._id);
}

/**
 * UpdateObjectNode::parseAndMerge (src/mongo/db/update/update_object_node.cpp, re-read): mongod
 * parses the whole update before applying any of it, adding the paths in order (operators, then
 * fields, as written; $setOnInsert too); the first path that meets an earlier one fails with
 * ConflictingUpdateOperators (40). Walking from the root, an earlier path ending at one of its
 * prefixes gives "Updating the path '<path>' would create a conflict at '<that prefix>'"; an earlier
 * path equal to it or below it gives "... would create a conflict at '<path>'".
 */
export function checkPathConflicts(modifier: Document): void {
  const paths: string[] = [];
  for (const [op, spec] of Object.entries(modifier)) {
    if (!isPlainObject(spec)) continue;
    // $rename adds a placeholder at its source path, then its RenameNode at the target path
    // (UpdateObjectNode::parseAndMerge, "Special case: For $rename modifiers, we add two nodes").
    if (op === '$rename') for (const [from, to] of Object.entries(spec)) paths.push(from, ...(typeof to === 'string' ? [to] : []));
    else paths.push(...Object.keys(spec));
  }
  for (let j = 0; j < paths.length; j++) {
    const cur = paths[j];
    const earlier = paths.slice(0, j);
    const prefixes = earlier.filter((p) => cur.startsWith(`${p}.`)).sort((x, y) => x.length - y.length);
    if (prefixes.length) throw new MongoCommandError(Codes.ConflictingUpdateOperators, `Updating the path '${cur}' would create a conflict at '${prefixes[0]}'`);
    if (earlier.some((p) => p === cur || p.startsWith(`${cur}.`))) throw new MongoCommandError(Codes.ConflictingUpdateOperators, `Updating the path '${cur}' would create a conflict at '${cur}'`);
  }
}

/**
 * mingo's updater reports a conflict for any two paths through the same array with positional or
 * filtered operators ('arr.$[c].a' and 'arr.$[c].b'); mongod only for paths that meet
 * (checkPathConflicts, which computeUpdate has already run). Two paths
 * through the same array with different positional tokens at one level are refused (NotImplemented:
 * mongod's node types decide those); the others are applied one path at a time, which gives
 * mongod's result since no path meets another.
 */
function applyPathByPath(docs: Document[], filter: Document, modifier: Document, opts: { arrayFilters?: Document[]; vars: SystemVars }): void {
  const entries: Array<[string, string, unknown]> = [];
  for (const [op, spec] of Object.entries(modifier)) for (const [path, v] of Object.entries(spec as Document)) entries.push([op, path, v]);
  for (let i = 0; i < entries.length; i++) {
    for (let j = 0; j < entries.length; j++) {
      if (i === j) continue;
      const pa = entries[i][1].split('.');
      const pb = entries[j][1].split('.');
      for (let k = 0; k < Math.min(pa.length, pb.length); k++) {
        if (pa[k] === pb[k]) continue;
        if (pa[k].startsWith('$') || pb[k].startsWith('$')) throw unsupported(`the update paths '${entries[i][1]}' and '${entries[j][1]}' (different positional operators over one array)`);
        break;
      }
    }
  }
  checkPathConflicts(modifier);
  for (const [op, path, v] of entries) {
    const used = (opts.arrayFilters ?? []).filter((f) => Object.keys(f).some((k) => path.includes(`$[${k.split('.')[0]}]`)));
    try {
      runUpdateOne(docs, filter, { [op]: { [path]: v } }, { arrayFilters: used }, { variables: opts.vars.let });
    } catch (e) {
      throw toCommandError(e);
    }
  }
}

function isNumeric(v: unknown): boolean {
  if (typeof v === 'number' || typeof v === 'bigint') return true;
  const t = (v as { _bsontype?: string } | null)?._bsontype;
  return t === 'Long' || t === 'Int32' || t === 'Double' || t === 'Decimal128';
}

/** mongod's TypeMismatch for `$inc`/`$mul` on a non-numeric top-level field or with a non-numeric argument (mingo accepts both). */
function checkArithmeticTypes(old: Document, modifier: Document): void {
  for (const op of ['$inc', '$mul']) {
    const spec = modifier[op] as unknown;
    if (!isPlainObject(spec)) continue;
    for (const f of Object.keys(spec)) {
      const verb = op === '$inc' ? 'increment' : 'multiply';
      if (!isNumeric(spec[f])) throw new MongoCommandError(Codes.TypeMismatch, `Cannot ${verb} with non-numeric argument: {${f}: ${JSON.stringify(spec[f])}}`);
      if (!plainField(f)) continue;
      const cur = old[f];
      if (cur !== undefined && !isNumeric(cur)) {
        throw new MongoCommandError(Codes.TypeMismatch, `Cannot apply ${op} to a value of non-numeric type. {_id: ${JSON.stringify(old._id)}} has the field '${f}' of non-numeric type ${cur === null ? 'null' : Array.isArray(cur) ? 'array' : typeof cur}`);
      }
    }
  }
}

/** A top-level field name that is neither `_id` nor dotted, positional or an operator. */
function plainField(f: string): boolean {
  return f !== '_id' && f.length > 0 && !f.includes('.') && !f.startsWith('$');
}

/**
 * Fast path for the most common modifier shape: only `$set` on plain top-level fields (no dots, no
 * positional operators, not `_id`). The result is what mingo's updater gives (existing fields keep
 * their position, new ones are appended in the modifier's order and then put in mongod's field-name
 * order by computeUpdate's orderCreatedFields, values are deep copies); anything
 * else returns undefined and goes through mingo. ($inc is computed in update-arithmetic.ts.)
 */
function fastSetInc(old: Document, modifier: Document): Document | undefined {
  const ops = Object.keys(modifier);
  if (ops.length !== 1 || ops[0] !== '$set') return undefined;
  const set = modifier.$set as Document | undefined;
  if (!isPlainObject(set) || !Object.keys(set).every(plainField)) return undefined;
  const next: Document = { ...old };
  for (const f of Object.keys(set)) next[f] = clone(set[f]);
  return next;
}

/** A pipeline-stage value that is a constant: `{$literal: v}` (how `$$NOW` is bound) or a Date/number. */
function constantOf(v: unknown): { ok: true; value: unknown } | { ok: false } {
  if (typeof v === 'number' || typeof v === 'boolean' || v === null || v instanceof Date) return { ok: true, value: v };
  // A string is a literal unless it is a field path or variable ('$...').
  if (typeof v === 'string') return v.startsWith('$') ? { ok: false } : { ok: true, value: v };
  if ((v as { _bsontype?: string } | undefined)?._bsontype) return { ok: true, value: v };
  if (isPlainObject(v) && Object.keys(v).length === 1 && '$literal' in v) return { ok: true, value: v.$literal };
  return { ok: false };
}

/**
 * Fast path for pipeline updates made only of `$set`/`$addFields` stages that
 * assign constants to plain top-level fields (e.g. `[{$set: {at: '$$NOW'}}]`
 * after binding). Same result as the aggregation stages; otherwise undefined.
 */
function fastPipelineSet(old: Document, pipeline: Document[]): Document | undefined {
  const assignments: Array<[string, unknown]> = [];
  for (const stage of pipeline) {
    if (!isPlainObject(stage)) return undefined;
    const keys = Object.keys(stage);
    if (keys.length !== 1 || (keys[0] !== '$set' && keys[0] !== '$addFields')) return undefined;
    const spec = stage[keys[0]] as unknown;
    if (!isPlainObject(spec)) return undefined;
    for (const f of Object.keys(spec)) {
      if (!plainField(f)) return undefined;
      const c = constantOf(spec[f]);
      if (!c.ok || c.value === undefined) return undefined;
      assignments.push([f, c.value]);
    }
  }
  const next: Document = { ...old };
  for (const [f, v] of assignments) next[f] = clone(v);
  return next;
}

function immutableId(): MongoCommandError {
  return new MongoCommandError(Codes.ImmutableField, "Performing an update on the path '_id' would modify the immutable field '_id'");
}

function assignSeedPath(doc: Document, path: string, value: unknown): void {
  const parts = path.split('.');
  let cur = doc;
  for (let i = 0; i < parts.length - 1; i++) {
    if (!isPlainObject(cur[parts[i]])) cur[parts[i]] = {};
    cur = cur[parts[i]] as Document;
  }
  cur[parts[parts.length - 1]] = clone(value);
}

/**
 * The value an `$in` seeds: InMatchExpression::setEqualities (src/mongo/db/matcher/expression_leaf.cpp)
 * sorts its equalities and keeps one of each (std::unique_copy into _equalitySet, by BSON
 * comparison: values.ts keyOf, numeric aliases equal), and InMatchExpression::getOptimizer turns an
 * `$in` with exactly one distinct value and no regex into an EqualityMatchExpression ("Simplify IN
 * of exactly one equality"), so `$in: [1, 1]` seeds like `$in: [1]`. Equal values of different
 * types (`[1, NumberLong(1)]`) are refused: which one the unstable std::sort leaves first, and so
 * which one is kept, is not pinned down here.
 */
function singleInValue(values: unknown[]): { ok: true; value: unknown } | { ok: false } {
  if (values.some((v) => v instanceof RegExp || (v as { _bsontype?: string } | null)?._bsontype === 'BSONRegExp')) return { ok: false };
  const first = keyOf(values[0]);
  if (!values.every((v) => keyOf(v) === first)) return { ok: false };
  const typed = typedKeyOf(values[0]);
  if (!values.every((v) => typedKeyOf(v) === typed)) throw unsupported('an upsert query whose $in holds equal values of different BSON types (which one mongod keeps is not pinned down)');
  return { ok: true, value: values[0] };
}

/**
 * The upsert seed: the equalities of the canonicalized query, as UpdateDriver::
 * populateDocumentWithQueryFields collects them (src/mongo/db/update/update_driver.cpp: the query
 * is canonicalized, then pathsupport's extractEqualityMatches for a modifier or pipeline update
 * (`_updateType != kReplacement`), or extractFullEqualityMatches of the immutable `_id` for a
 * replacement;
 * src/mongo/db/update/path_support.cpp). jstests/core/upsert_fields.js pins the forms:
 *  - extracted: `{x: v}` (arrays and embedded documents too), `{$eq: v}` (a regex too), `$in` of
 *    one distinct value (singleInValue), `$all` of one value, the children of `$and`, a `$or` with one child;
 *  - not extracted: `{x: /re/}`, `$gt`/`$ne`/`$exists`/`$elemMatch`/`$not`, `$in` of several
 *    distinct values or with a regex,
 *    `$or` of several, `$nor`;
 *  - the equalities are taken in the canonical query's order (CanonicalQuery sorts an $and's
 *    children by match type, then path: for equalities, by path bytes) and land in an
 *    EqualityMatches, a std::map keyed by path (path_support.h), so the seed's fields are created in
 *    path order whatever the query's order;
 *  - errors (modifier updates), checkEqualityConflicts (findParentEqualityElement looks for the path
 *    itself, then its prefixes, longest first, among the equalities already taken):
 *    NotSingleValueField 54, "cannot infer query fields to set, path '<p>' is matched twice" (two
 *    equalities on one path: `$all: [1, 2]`, `{$and: [{x: 1}, {x: 1}]}`) and "cannot infer query
 *    fields to set, both paths '<p>' and '<prefix>' are matched" (a path and its prefix: the prefix
 *    sorts first); a replacement ignores every path but `_id`.
 * Refused rather than guessed: `$in: []` and `$all: []` (which turn the whole query into
 * `$alwaysFalse`), `$all` with `$elemMatch`, and `'_id.<sub>'` equalities on a replacement
 * (NotExactValueField, message not re-read).
 */
export function upsertSeed(filter: Document | undefined, replacement = false): Document {
  const seed: Document = {};
  const equalities: Array<[string, unknown]> = [];
  const add = (path: string, value: unknown): void => {
    if (replacement && path !== '_id') {
      if (path.startsWith('_id.')) throw unsupported(`a replacement upsert whose query has an equality on '${path}' (mongod answers NotExactValueField)`);
      return;
    }
    equalities.push([path, value]);
  };
  const field = (path: string, cond: unknown): void => {
    if (cond instanceof RegExp) return;
    if (!isPlainObject(cond) || !Object.keys(cond).some((k) => k.startsWith('$'))) return add(path, cond);
    for (const [op, arg] of Object.entries(cond)) {
      if (op === '$eq') add(path, arg);
      else if (op === '$in' && Array.isArray(arg)) {
        if (arg.length === 0) throw unsupported('an upsert query with $in: [] (the query becomes $alwaysFalse)');
        const only = singleInValue(arg);
        if (only.ok) add(path, only.value);
      } else if (op === '$all' && Array.isArray(arg)) {
        if (arg.length === 0) throw unsupported('an upsert query with $all: []');
        for (const v of arg) {
          if (v instanceof RegExp) continue;
          if (isPlainObject(v) && Object.keys(v).some((k) => k.startsWith('$'))) throw unsupported('an upsert query with $all of $elemMatch');
          add(path, v);
        }
      }
    }
  };
  const walk = (f: Document): void => {
    for (const [k, v] of Object.entries(f)) {
      if ((k === '$and' || (k === '$or' && Array.isArray(v) && v.length === 1)) && Array.isArray(v)) {
        for (const sub of v) if (isPlainObject(sub)) walk(sub);
        continue;
      }
      if (k.startsWith('$')) continue;
      field(k, v);
    }
  };
  if (filter) walk(filter);
  equalities.sort(([a], [b]) => compareBytes(a, b));
  const taken = new Set<string>();
  for (const [path, value] of equalities) {
    const parts = path.split('.');
    for (let i = parts.length; i >= 1; i--) {
      const prefix = parts.slice(0, i).join('.');
      if (!taken.has(prefix)) continue;
      const why = i === parts.length ? `path '${path}' is matched twice` : `both paths '${path}' and '${prefix}' are matched`;
      throw new MongoCommandError(Codes.NotSingleValueField, `cannot infer query fields to set, ${why}`);
    }
    taken.add(path);
    assignSeedPath(seed, path, value);
  }
  return seed;
}

/** True when the filter is nothing but equality conditions on exactly `fields` (mongod's upsert retry rule). */
export function isExactEqualityOn(filter: Document | undefined, fields: string[]): boolean {
  if (!filter) return false;
  const keys = Object.keys(filter);
  if (keys.length !== fields.length) return false;
  return keys.every((k) => fields.includes(k) && equalityValue(filter[k]).ok);
}

export interface UpdateOutcome {
  n: number;
  nModified: number;
  upsertedId?: unknown;
  /** For findAndModify. */
  before?: Document | null;
  after?: Document | null;
}

/**
 * A write outside a transaction waits (WaitForLock, retried by waitingForLocks) only for a running
 * transaction holding a document the write is about to change: one whose COMMITTED version matches
 * the filter and is picked (the first match unless multi). On mongod the write's plan reads the
 * committed version of each candidate (WiredTiger snapshot isolation: another transaction's
 * uncommitted write is not visible), and the child stage passes on only matching documents; the
 * update or delete of such a document hits the other transaction's uncommitted write, WT_ROLLBACK,
 * a WriteConflictException, and UpdateStage::doWork / DeleteStage::doWork
 * (src/mongo/db/exec/update_stage.cpp, delete_stage.cpp) keep the member and return NEED_YIELD
 * (prepareToRetryWSM); after the yield write_stage_common::ensureStillMatches
 * (src/mongo/db/exec/write_stage_common.cpp) re-fetches it and re-applies the filter, skipping it if
 * it no longer matches. A candidate whose committed version does not match is never written, so it
 * never conflicts and nothing waits for it (compatibility record R17 for the wait itself;
 * jstests/core/txns/write_conflicts_with_non_txns.js). An upsert's insert of an `_id` a transaction
 * wrote waits in applyWrite (checkUnlocked on the new key), unique keys in uncommittedUniqueHolder.
 */
function waitForMatchedDocuments(ctx: ExecCtx, coll: Collection, matches: ReadonlyArray<readonly [string, Document]>): void {
  if (ctx.txn || ctx.storage.locks.size === 0) return;
  for (const [k] of matches) ctx.storage.checkUnlocked(coll, k);
}

/** Every `$[id]` used in the update needs an array filter, and every array filter must be used. */
function validateArrayFilters(u: UpdateSpec, arrayFilters: Document[] | undefined): void {
  if (Array.isArray(u) || !isModifier(u)) return;
  const used = new Map<string, string>();
  for (const spec of Object.values(u)) {
    if (!isPlainObject(spec)) continue;
    for (const path of Object.keys(spec)) for (const m of path.matchAll(/\$\[([a-z][a-zA-Z0-9]*)\]/g)) used.set(m[1], path);
  }
  const declared = new Set<string>();
  for (const f of arrayFilters ?? []) for (const k of Object.keys(f)) declared.add(k.split('.')[0]);
  for (const [id, path] of used) {
    if (!declared.has(id)) throw new MongoCommandError(Codes.BadValue, `No array filter found for identifier '${id}' in path '${path}'`);
  }
  for (const id of declared) {
    if (!used.has(id)) throw new MongoCommandError(Codes.FailedToParse, `The array filter for identifier '${id}' was not used in the update ${JSON.stringify(u)}`);
  }
}

/** One update statement (update command entry or findAndModify without remove). */
export function updateStatement(
  ctx: ExecCtx,
  db: string,
  collName: string,
  st: { q?: Document; u: UpdateSpec; multi?: boolean; upsert?: boolean; arrayFilters?: Document[]; sort?: Document; hint?: unknown },
): UpdateOutcome {
  const filter = st.q ?? {};
  validateUpdate(st.u);
  validateArrayFilters(st.u, st.arrayFilters);
  checkUpsertPredicate(filter, !!st.upsert);
  if (st.multi && !Array.isArray(st.u) && !isModifier(st.u)) throw new MongoCommandError(Codes.FailedToParse, 'multi update is not supported for replacement-style update');
  let coll = getColl(ctx, db, collName);
  const matcher = withRestriction(compileFilter(filter, ctx.vars), resolveHint(coll, st.hint));
  const view = new View(coll, ctx.txn);
  // Sorted by View.find (through the index when the plan provides the order), then the first one unless multi.
  const matches = view.find(filter, matcher, { sort: st.sort, hint: st.hint, limit: st.multi ? 0 : 1 });
  if (matches.length && coll) {
    waitForMatchedDocuments(ctx, coll, matches);
    let first: { before: Document; after: Document } | undefined;
    const writes: DocWrite[] = [];
    const kind: WriteKind = !Array.isArray(st.u) && !isModifier(st.u) ? 'replace' : 'update';
    // The change event's updateDescription depends on the kind of update (update-description.ts).
    const source: UpdateSource | undefined = Array.isArray(st.u) ? { kind: 'pipeline' } : kind === 'update' ? { kind: 'modifier', spec: st.u as Document } : undefined;
    for (const [key, old] of matches) {
      let next: Document;
      try {
        next = computeUpdate(old, st.u, { filter, arrayFilters: st.arrayFilters, vars: ctx.vars, inserting: false });
        if (next !== old && typedKeyOf(next) !== typedKeyOf(old)) checkUpdatedSize(next);
      } catch (e) {
        // mongod's multi-update writes document by document and keeps, outside a transaction, what
        // it wrote before the document that fails; the emulator computes every document first and
        // writes none, so that outcome (and the counts mongod reports for it) is not reproduced.
        if (writes.length && !ctx.txn) throw unsupported(`a multi-update that fails on a later document (${toCommandError(e).message}) after earlier ones changed`);
        throw e;
      }
      first ??= { before: old, after: next };
      if (next === old || typedKeyOf(next) === typedKeyOf(old)) continue;
      writes.push({ coll, key, before: old, after: next, kind, source });
    }
    // Wait before the first write, so a multi-update never half-applies and then re-runs.
    if (!ctx.txn && ctx.storage.locks.size > 0) {
      for (const w of writes) {
        const holder = ctx.txns.uncommittedUniqueHolder(coll, w.key, w.after!);
        if (holder) throw new WaitForLock(holder);
      }
    }
    for (const w of writes) applyWrite(ctx, w);
    const nModified = writes.length;
    return { n: matches.length, nModified, before: first?.before ?? null, after: first?.after ?? null };
  }
  if (!st.upsert) return { n: 0, nModified: 0, before: null, after: null };
  coll ??= ensureColl(ctx, db, collName);
  const seed = upsertSeed(filter, !Array.isArray(st.u) && !isModifier(st.u));
  let doc = computeUpdate(seed, st.u, { vars: ctx.vars, arrayFilters: st.arrayFilters, inserting: true });
  if (!Array.isArray(st.u) && !isModifier(st.u) && seed._id !== undefined) doc = withIdFirst(doc, doc._id ?? seed._id);
  if (seed._id !== undefined && doc._id !== undefined && !valuesEqual(seed._id, doc._id)) throw immutableId();
  doc = prepareInsert(doc);
  try {
    applyWrite(ctx, { coll, key: keyOf(doc._id), before: null, after: doc, kind: 'insert' });
  } catch (e) {
    // mongod retries an upsert that lost an insert race only when the filter is
    // exactly equality on the violated unique index's fields; then it is an update.
    if (e instanceof MongoCommandError && e.code === Codes.DuplicateKey && isExactEqualityOn(filter, Object.keys(e.extra.keyPattern as Document))) {
      const again = updateStatement(ctx, db, collName, { ...st, upsert: false });
      if (again.n > 0) return again;
    }
    throw e;
  }
  return { n: 1, nModified: 0, upsertedId: doc._id, before: null, after: doc };
}

export function deleteStatement(ctx: ExecCtx, db: string, collName: string, st: { q?: Document; limit?: number; sort?: Document; hint?: unknown }): { n: number; deleted: Document | null } {
  const filter = st.q ?? {};
  // ParsedDelete::parseRequest parses the query whether or not the collection exists.
  checkFilterSyntax(filter);
  if (st.sort) checkSortPattern(st.sort);
  const coll = getColl(ctx, db, collName);
  if (!coll) return { n: 0, deleted: null };
  const matcher = withRestriction(compileFilter(filter, ctx.vars), resolveHint(coll, st.hint));
  const one = st.limit === 1;
  const matches = new View(coll, ctx.txn).find(filter, matcher, { sort: st.sort, hint: st.hint, limit: one ? 1 : 0 });
  waitForMatchedDocuments(ctx, coll, matches);
  for (const [key, old] of matches) applyWrite(ctx, { coll, key, before: old, after: null, kind: 'delete' });
  return { n: matches.length, deleted: matches[0]?.[1] ?? null };
}

export function sortEntries(entries: Array<[string, Document]>, sort: Document): Array<[string, Document]> {
  const byDoc = new Map(entries.map(([k, d]) => [d, k] as const));
  return sortDocs(entries.map(([, d]) => d), sort).map((d) => [byDoc.get(d)!, d]);
}

