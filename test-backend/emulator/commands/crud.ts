/** insert, update, delete, findAndModify, find, getMore, killCursors, count, distinct, aggregate. */
import type { Document, Long } from 'bson';
import { makeAggregator, makeQuery } from '../mingo-context';
import type { CommandCtx, Handler } from '../context';
import { Codes, MongoCommandError, toCommandError, unsupported } from '../errors';
import { bindExpression, bindPipeline, compileFilter, View, withRestriction, type ReadStats } from '../query';
import { hintOrder, resolveHint } from '../hint';
import { applyProjection, checkProjectionSpec, projectionIsSimple } from '../projection';
import { checkFilterSyntax } from '../query-parse';
import { checkSortPattern } from '../sort';
import { deleteStatement, insertOne, sortDocs, updateStatement, waitingForLocks, type UpdateSpec } from '../writes';
import { isPlainObject, keyOf } from '../values';
import { ensureColl, getColl } from '../namespaces';
import { parseWriteStage, runWriteStage } from '../aggregate-write';
import { checkMatchClausesInStage } from '../match-stage-refusals';
import { rejectSystemViews, runOnView, viewNotCollection } from '../views';
import { collectionlessAggregate, collectionlessDocs } from '../collectionless-aggregate';
import { numKind, toNumber } from '../numbers';
import { snapshotView } from '../snapshot-reads';
import { parseSafeBool } from '../safe-bool';
import { checkCommandFields } from '../command-fields';

function collName(ctx: CommandCtx): string {
  const v = ctx.cmd[ctx.name];
  if (typeof v !== 'string' || !v) throw new MongoCommandError(Codes.InvalidNamespace, `collection name has invalid type ${typeof v}`);
  return v;
}

function rejectOptions(ctx: CommandCtx, names: string[]): void {
  for (const n of names) if (ctx.cmd[n] !== undefined) throw unsupported(`${ctx.name} option '${n}'`);
}

function rejectStatementOptions(ctx: CommandCtx, st: Document, names: string[]): void {
  for (const n of names) if (st[n] !== undefined) throw unsupported(`${ctx.name} statement option '${n}'`);
}

/** Whether `name` is a view (views.ts); every statement of a write on it fails (write_ops_exec.cpp). */
function isView(ctx: CommandCtx, name: string): boolean {
  return ctx.state.storage.getView(ctx.db, name) !== undefined;
}

/**
 * The write commands' `bypassDocumentValidation`, a safeBool (safe-bool.ts): WriteCommandRequestBase
 * in write_ops.idl (insert, update, delete: chained, so the path is '<command>.<field>'), and a field
 * of findAndModify's own (kCommandName 'findAndModify', also for the 'findandmodify' alias). The IDL
 * parse runs before the command does, so a wrong type fails the whole command. Delete parses it but
 * has nothing to validate.
 */
function takeBypass(ctx: CommandCtx, command: string): void {
  if (parseSafeBool(command, 'bypassDocumentValidation', ctx.cmd.bypassDocumentValidation)) ctx.exec.bypassDocumentValidation = true;
}

/** The documents of `stages` run over the view `name` (the resolved view pipeline first). */
function viewDocs(ctx: CommandCtx, name: string, stages: Document[]): Document[] {
  return runOnView(ctx.state.storage, ctx.db, name, stages, ctx.vars, (coll) => [...readView(ctx, coll).all()].map(([, d]) => d), (coll) => resolverDocs(ctx, coll));
}

/** What `$lookup`/`$unionWith` read from `name`: a collection's documents, or a view's. */
function resolverDocs(ctx: CommandCtx, name: string): Document[] {
  if (isView(ctx, name)) return viewDocs(ctx, name, []);
  return [...readView(ctx, name).all()].map(([, d]) => d);
}

/** Options a read on a view does not take here (NotImplemented). */
function rejectOnView(ctx: CommandCtx, c: Document): void {
  if (c.hint !== undefined) throw unsupported(`${ctx.name} with a hint on a view`);
}

/** Runs statements with ordered/unordered semantics and collects writeErrors shaped like mongod's. */
async function runStatements<T>(ctx: CommandCtx, items: T[], run: (item: T, index: number) => void): Promise<Document[]> {
  const ordered = ctx.cmd.ordered !== false;
  const writeErrors: Document[] = [];
  // maxTimeMS bounds the wait for a transaction's lock (waitingForLocks); statements already applied stay.
  const maxTimeMS = ctx.cmd.maxTimeMS;
  const deadline = typeof maxTimeMS === 'number' && maxTimeMS > 0 ? performance.now() + maxTimeMS : undefined;
  for (let i = 0; i < items.length; i++) {
    try {
      await waitingForLocks(() => run(items[i], i), deadline);
    } catch (e) {
      const err = toCommandError(e);
      // In a transaction the first error aborts it and is reported as a command error.
      if (ctx.txn) throw err;
      // An interruption fails the whole batch (write_ops_exec.cpp handleError: "These have always
      // failed the whole batch"), ordered or not.
      if (err.code === Codes.MaxTimeMSExpired) throw err;
      writeErrors.push(err.toWriteError(i));
      if (ordered) break;
    }
  }
  return writeErrors;
}

const insert: Handler = async (ctx) => {
  const name = collName(ctx);
  takeBypass(ctx, 'insert');
  const docs = ctx.cmd.documents as Document[] | undefined;
  if (!Array.isArray(docs)) throw new MongoCommandError(Codes.FailedToParse, "BSON field 'insert.documents' is missing but a required field");
  rejectOptions(ctx, ['collation']);
  let n = 0;
  if (isView(ctx, name)) return withErrors({ n, ok: 1 }, await runStatements(ctx, docs, () => { throw viewNotCollection(ctx.db, name); }));
  const coll = ensureColl(ctx.exec, ctx.db, name);
  const writeErrors = await runStatements(ctx, docs, (d) => {
    insertOne(ctx.exec, getColl(ctx.exec, ctx.db, name) ?? coll, d);
    n++;
  });
  return withErrors({ n, ok: 1 }, writeErrors);
};

function withErrors(reply: Document, writeErrors: Document[]): Document {
  if (writeErrors.length) reply.writeErrors = writeErrors;
  return reply;
}

/**
 * UpdateDriver::parse (src/mongo/db/update/update_driver.cpp, 7.0), per statement: a pipeline
 * update with array filters is FailedToParse "arrayFilters may not be specified for pipeline-style
 * updates" (an empty list is no filters), constants (`c`) without a pipeline are 51198 "Constant
 * values may only be specified for pipeline updates" (jstests/core/write/update/
 * update_with_pipeline.js, `c: {}` included). A pipeline with constants is valid on mongod; the
 * emulator does not bind them, so it refuses it (NotImplemented). 8.0 checks both when it parses the
 * command (write_ops.cpp validateUpdateDoc) and fails the whole command instead.
 */
function checkPipelineUpdateOptions(st: Document): void {
  const hasConstants = st.c !== undefined && st.c !== null;
  if (Array.isArray(st.u)) {
    if (Array.isArray(st.arrayFilters) && st.arrayFilters.length) throw new MongoCommandError(Codes.FailedToParse, 'arrayFilters may not be specified for pipeline-style updates');
    if (hasConstants) throw unsupported("constants ('c') in a pipeline update");
    return;
  }
  if (hasConstants) throw new MongoCommandError(51198, 'Constant values may only be specified for pipeline updates');
}

const update: Handler = async (ctx) => {
  const name = collName(ctx);
  takeBypass(ctx, 'update');
  const updates = ctx.cmd.updates as Document[] | undefined;
  if (!Array.isArray(updates)) throw new MongoCommandError(Codes.FailedToParse, "BSON field 'update.updates' is missing but a required field");
  let n = 0;
  let nModified = 0;
  const upserted: Document[] = [];
  // 'sort' in an update statement exists from 8.0; the 7.0 IDL parser rejects unknown fields for the
  // whole command ("BSON field '<path>' is an unknown field.", 40415).
  if (updates.some((st) => isPlainObject(st) && st.sort !== undefined)) throw new MongoCommandError(40415, "BSON field 'update.updates.sort' is an unknown field.");
  const onView = isView(ctx, name);
  const executed = ctx.executedStatements;
  const retriedStmtIds: number[] = [];
  const writeErrors = await runStatements(ctx, updates, (st, index) => {
    // A retryable write: a statement that already wrote is answered from its record (its stmtId is
    // its index: drivers send no stmtIds), the others run (performUpdates).
    const prior = executed?.get(index);
    if (prior) {
      retriedStmtIds.push(index);
      n += prior.n as number;
      nModified += prior.nModified as number;
      if (prior.upsertedId !== undefined) upserted.push({ index, _id: prior.upsertedId });
      return;
    }
    if (onView) throw viewNotCollection(ctx.db, name);
    rejectStatementOptions(ctx, st, ['collation']);
    checkPipelineUpdateOptions(st);
    // performSingleUpdateOpWithDupKeyRetry (write_ops_exec.cpp): a multi statement cannot be part
    // of a retryable write; the statement fails, the batch goes on as for any statement error.
    if (executed && st.multi) throw new MongoCommandError(Codes.InvalidOptions, 'Cannot use (or request) retryable writes with multi=true');
    const r = updateStatement(ctx.exec, ctx.db, name, {
      q: st.q as Document,
      u: st.u as UpdateSpec,
      multi: !!st.multi,
      upsert: !!st.upsert,
      arrayFilters: st.arrayFilters as Document[] | undefined,
      hint: st.hint,
    });
    n += r.n;
    nModified += r.nModified;
    if (r.upsertedId !== undefined) upserted.push({ index, _id: r.upsertedId });
    // What parseOplogEntryForUpdate rebuilds from the statement's oplog entry, if it wrote one:
    // an insert (the upsert) or an update. A statement that changed nothing has none.
    if (r.upsertedId !== undefined) executed?.set(index, { n: 1, nModified: 0, upsertedId: r.upsertedId });
    else if (r.nModified > 0) executed?.set(index, { n: 1, nModified: 1 });
  });
  const reply: Document = { n, nModified, ok: 1 };
  if (upserted.length) reply.upserted = upserted;
  // write_commands.cpp serializeReply: retriedStmtIds only when a statement was answered from its record.
  if (retriedStmtIds.length) reply.retriedStmtIds = retriedStmtIds;
  return withErrors(reply, writeErrors);
};

const del: Handler = async (ctx) => {
  const name = collName(ctx);
  takeBypass(ctx, 'delete');
  const deletes = ctx.cmd.deletes as Document[] | undefined;
  if (!Array.isArray(deletes)) throw new MongoCommandError(Codes.FailedToParse, "BSON field 'delete.deletes' is missing but a required field");
  let n = 0;
  const onView = isView(ctx, name);
  const writeErrors = await runStatements(ctx, deletes, (st) => {
    if (onView) throw viewNotCollection(ctx.db, name);
    rejectStatementOptions(ctx, st, ['collation']);
    const limit = Number(st.limit ?? 0);
    if (limit !== 0 && limit !== 1) throw new MongoCommandError(Codes.FailedToParse, 'The limit field in delete objects must be 0 or 1');
    n += deleteStatement(ctx.exec, ctx.db, name, { q: st.q as Document, limit, hint: st.hint }).n;
  });
  return withErrors({ n, ok: 1 }, writeErrors);
};

function project(docs: Document[], projection: Document | undefined, ctx: CommandCtx, filter?: Document): Document[] {
  if (!projection || !Object.keys(projection).length) return docs;
  checkProjectionSpec(projection, 'find');
  if (projectionIsSimple(projection)) return applyProjection(docs, projection, filter);
  try {
    return makeQuery({}, { variables: ctx.vars.let }).find(docs, bindExpression(projection, ctx.vars)).all() as Document[];
  } catch (e) {
    throw toCommandError(e);
  }
}

/**
 * findAndModify's option rules: `remove`, `upsert` and `new` are safeBools (write_ops.idl; a value
 * of another type fails the parse, safe-bool.ts), then validate() (src/mongo/db/commands/
 * find_and_modify.cpp, 7.0, re-read) in this order, all FailedToParse: "Either an update or
 * remove=true must be specified"; with remove: "Cannot specify both an update and remove=true",
 * "Cannot specify both upsert=true and remove=true " (sic, trailing space), "Cannot specify both
 * new=true and remove=true; 'remove' always returns the deleted document", "Cannot specify
 * arrayFilters and remove=true" (an empty arrayFilters array too); a pipeline update with
 * arrayFilters: "Cannot specify arrayFilters and a pipeline update". A null option is absent (the
 * IDL ignores null for optional fields). jstests/core/write/find_and_modify/
 * find_and_modify_invalid_query_params.js exercises each.
 */
function validateFindAndModify(c: Document): { remove: boolean; upsert: boolean; returnNew: boolean } {
  const remove = parseSafeBool('findAndModify', 'remove', c.remove);
  const upsert = parseSafeBool('findAndModify', 'upsert', c.upsert);
  const returnNew = parseSafeBool('findAndModify', 'new', c.new);
  const hasUpdate = c.update !== undefined && c.update !== null;
  const hasArrayFilters = c.arrayFilters !== undefined && c.arrayFilters !== null;
  const fail = (msg: string): MongoCommandError => new MongoCommandError(Codes.FailedToParse, msg);
  if (!remove && !hasUpdate) throw fail('Either an update or remove=true must be specified');
  if (remove) {
    if (hasUpdate) throw fail('Cannot specify both an update and remove=true');
    if (upsert) throw fail('Cannot specify both upsert=true and remove=true ');
    if (returnNew) throw fail("Cannot specify both new=true and remove=true; 'remove' always returns the deleted document");
    if (hasArrayFilters) throw fail('Cannot specify arrayFilters and remove=true');
  }
  if (Array.isArray(c.update) && hasArrayFilters) throw fail('Cannot specify arrayFilters and a pipeline update');
  return { remove, upsert, returnNew };
}

/**
 * findAndModify. A retryable one (lsid + txnNumber) that wrote is answered, when retried, as
 * parseOplogEntryForFindAndModify (src/mongo/db/query/write_ops/write_ops_retryability.cpp) rebuilds
 * it from the oplog: lastErrorObject `{n: 1}` (remove), `{n: 1, updatedExisting: true}` (update) or
 * `{n: 1, updatedExisting: false, upserted: <_id>}` (upsert), `value` the stored pre- or post-image
 * (the inserted document for an upsert with `new`, else null) without the request's `fields`
 * (SERVER-31242, SERVER-48368), and `retriedStmtId` (find_and_modify.cpp: setRetriedStmtId, stmtId
 * defaulting to 0). server.ts stores `ctx.retryReply` only when the command wrote.
 */
const findAndModify: Handler = async (ctx) => {
  const name = collName(ctx);
  takeBypass(ctx, 'findAndModify');
  const c = ctx.cmd;
  const { remove, upsert, returnNew } = validateFindAndModify(c);
  rejectOptions(ctx, ['collation']);
  // ParsedUpdate / ParsedDelete canonicalize the query with its sort and projection before the
  // collection is looked at (query-parse.ts, sort.ts, projection.ts).
  checkFilterSyntax(c.query);
  if (isPlainObject(c.sort)) checkSortPattern(c.sort);
  if (isPlainObject(c.fields)) checkProjectionSpec(c.fields, 'find');
  if (isView(ctx, name)) throw viewNotCollection(ctx.db, name);
  return waitingForLocks(() => {
    let value: Document | null;
    const leo: Document = {};
    if (remove) {
      const r = deleteStatement(ctx.exec, ctx.db, name, { q: c.query as Document, limit: 1, sort: c.sort as Document, hint: c.hint });
      leo.n = r.n;
      value = r.deleted;
      ctx.retryReply = { lastErrorObject: { n: 1 }, value: r.deleted, retriedStmtId: 0, ok: 1 };
    } else {
      const r = updateStatement(ctx.exec, ctx.db, name, {
        q: c.query as Document,
        u: c.update as UpdateSpec,
        upsert,
        sort: c.sort as Document,
        arrayFilters: c.arrayFilters as Document[] | undefined,
        hint: c.hint,
      });
      leo.n = r.n;
      leo.updatedExisting = r.n > 0 && r.upsertedId === undefined;
      if (r.upsertedId !== undefined) leo.upserted = r.upsertedId;
      value = returnNew ? (r.after ?? null) : r.upsertedId !== undefined ? null : (r.before ?? null);
      ctx.retryReply = {
        lastErrorObject: r.upsertedId !== undefined ? { n: 1, updatedExisting: false, upserted: r.upsertedId } : { n: 1, updatedExisting: true },
        value,
        retriedStmtId: 0,
        ok: 1,
      };
    }
    if (value && c.fields) value = project([value], c.fields as Document, ctx, c.query as Document | undefined)[0];
    return { lastErrorObject: leo, value, ok: 1 };
  });
};

export function readView(ctx: CommandCtx, name: string): View {
  // integration: snapshot reads outside transactions (snapshot-reads.ts) read at ctx.readAt.
  if (ctx.readAt) return snapshotView(ctx, ctx.readAt, name);
  return new View(getColl(ctx.exec, ctx.db, name), ctx.txn);
}

export const FIND_UNSUPPORTED_OPTIONS = ['collation', 'min', 'max', 'returnKey', 'showRecordId', 'tailable', 'awaitData', 'allowPartialResults'];

/** A find command's parsed window: skip, limit (made positive) and whether it is one batch. */
export function findWindow(c: Document): { skip: number; limit: number; singleBatch: boolean; sort: Document | undefined } {
  const skip = Number(c.skip ?? 0);
  let limit = Number(c.limit ?? 0);
  let singleBatch = !!c.singleBatch;
  if (limit < 0) {
    limit = -limit;
    singleBatch = true;
  }
  const sort = c.sort as Document | undefined;
  return { skip, limit, singleBatch, sort: sort && Object.keys(sort).length > 0 ? sort : undefined };
}

/** The documents a find command `c` on `name` returns (used by find and by explain's executionStats). */
export function findDocs(ctx: CommandCtx, name: string, c: Document, stats?: ReadStats): Document[] {
  const filter = (c.filter ?? {}) as Document;
  const { skip, limit, sort } = findWindow(c);
  const view = readView(ctx, name);
  const matcher = withRestriction(compileFilter(filter, ctx.vars), resolveHint(view.coll, c.hint));
  // CanonicalQuery::init parses the filter, then the projection, then the sort, before any
  // document is read (projection.ts, sort.ts; a $natural sort is a hint, not a sort pattern).
  if (isPlainObject(c.projection)) checkProjectionSpec(c.projection, 'find');
  if (sort && !('$natural' in sort)) checkSortPattern(sort);
  // Sorted (and stopped after skip + limit) by View.find: through the index when the plan provides the order.
  const order = sort ?? hintOrder(view.coll, c.hint);
  let docs = view.find(filter, matcher, { sort: order, hint: c.hint, skip, limit: limit ? skip + limit : 0, stats }).map(([, d]) => d);
  if (skip) docs = docs.slice(skip);
  if (limit) docs = docs.slice(0, limit);
  return project(docs, c.projection as Document | undefined, ctx, filter);
}

/**
 * A find on a view runs as the aggregation query_request_helper::asAggregationCommand builds: the
 * view pipeline, then $match, $sort, $skip, $limit, $project. Projections beyond plain
 * inclusion/exclusion differ between find and $project and are refused.
 */
function findOnView(ctx: CommandCtx, name: string, c: Document): Document[] {
  rejectOnView(ctx, c);
  const { skip, limit, sort } = findWindow(c);
  const projection = c.projection as Document | undefined;
  if (projection && Object.entries(projection).some(([k, v]) => k.includes('$') || (typeof v !== 'number' && typeof v !== 'boolean'))) {
    throw unsupported('a find projection with operators or expressions on a view');
  }
  const filter = (c.filter ?? {}) as Document;
  compileFilter(filter, ctx.vars); // the filter's own checks and errors, as on a collection
  if (projection) checkProjectionSpec(projection, 'find');
  if (sort && !('$natural' in sort)) checkSortPattern(sort);
  let docs = viewDocs(ctx, name, Object.keys(filter).length ? bindPipeline([{ $match: filter }], ctx.vars) : []);
  if (sort) docs = sortDocs(docs, sort);
  if (skip) docs = docs.slice(skip);
  if (limit) docs = docs.slice(0, limit);
  return project(docs, projection, ctx, filter);
}

const find: Handler = (ctx) => {
  const name = collName(ctx);
  const c = ctx.cmd;
  rejectOptions(ctx, FIND_UNSUPPORTED_OPTIONS);
  rejectSystemViews(name);
  const docs = isView(ctx, name) ? findOnView(ctx, name, c) : findDocs(ctx, name, c);
  return ctx.state.cursors.fromArray(`${ctx.db}.${name}`, docs, c.batchSize as number | undefined, findWindow(c).singleBatch);
};

const getMore: Handler = (ctx) => {
  const coll = ctx.cmd.collection as string;
  const fp = ctx.state.failPoints?.writes;
  return ctx.state.cursors.getMore(ctx.cmd.getMore as Long, `${ctx.db}.${coll}`, ctx.cmd.batchSize as number | undefined, ctx.cmd.maxTimeMS as number | undefined, fp && ((cs) => fp.afterGetMoreCheckout(cs)));
};

const killCursors: Handler = (ctx) => {
  const r = ctx.state.cursors.kill((ctx.cmd.cursors as Long[]) ?? []);
  return { cursorsKilled: r.killed, cursorsNotFound: r.notFound, cursorsAlive: [], cursorsUnknown: [], ok: 1 };
};

/** The count command's answer for `c` on `name` (used by count and by explain's executionStats). */
export function countDocs(ctx: CommandCtx, name: string, c: Document, stats?: ReadStats): number {
  const filter = (c.query ?? {}) as Document;
  const view = readView(ctx, name);
  let n = view.find(filter, withRestriction(compileFilter(filter, ctx.vars), resolveHint(view.coll, c.hint)), { hint: c.hint, stats }).length;
  n = Math.max(0, n - Number(c.skip ?? 0));
  const limit = Math.abs(Number(c.limit ?? 0));
  if (limit) n = Math.min(n, limit);
  return n;
}

/** count on a view: the view pipeline, $match, $skip, $limit, counted (count_cmd.cpp runs it as an aggregation). */
function countOnView(ctx: CommandCtx, name: string, c: Document): number {
  rejectOnView(ctx, c);
  const filter = (c.query ?? {}) as Document;
  compileFilter(filter, ctx.vars);
  let n = viewDocs(ctx, name, Object.keys(filter).length ? bindPipeline([{ $match: filter }], ctx.vars) : []).length;
  n = Math.max(0, n - Number(c.skip ?? 0));
  const limit = Math.abs(Number(c.limit ?? 0));
  if (limit) n = Math.min(n, limit);
  return n;
}

const count: Handler = (ctx) => {
  const name = collName(ctx);
  // count_cmd.cpp parses CountCommandRequest inside run (command-fields.ts).
  checkCommandFields(ctx.name, ctx.cmd);
  rejectOptions(ctx, ['collation']);
  rejectSystemViews(name);
  if (isView(ctx, name)) return { n: countOnView(ctx, name, ctx.cmd), ok: 1 };
  return { n: countDocs(ctx, name, ctx.cmd), ok: 1 };
};

const distinct: Handler = (ctx) => {
  const name = collName(ctx);
  // ParsedDistinct::parse runs inside the command (command-fields.ts).
  checkCommandFields(ctx.name, ctx.cmd);
  rejectOptions(ctx, ['collation']);
  const key = ctx.cmd.key as string;
  const filter = (ctx.cmd.query ?? {}) as Document;
  rejectSystemViews(name);
  let docs: Document[];
  if (isView(ctx, name)) {
    // distinct.cpp runs a distinct on a view as an aggregation of the view pipeline and $match.
    rejectOnView(ctx, ctx.cmd);
    compileFilter(filter, ctx.vars);
    docs = viewDocs(ctx, name, Object.keys(filter).length ? bindPipeline([{ $match: filter }], ctx.vars) : []);
  } else {
    const view = readView(ctx, name);
    docs = view.find(filter, withRestriction(compileFilter(filter, ctx.vars), resolveHint(view.coll, ctx.cmd.hint)), { hint: ctx.cmd.hint }).map(([, d]) => d);
  }
  const seen = new Map<string, unknown>();
  for (const d of docs) {
    let v: unknown = d;
    for (const p of key.split('.')) v = isPlainObject(v) ? v[p] : undefined;
    const vals = Array.isArray(v) ? v : [v];
    for (const x of vals) if (x !== undefined && !seen.has(keyOf(x))) seen.set(keyOf(x), x);
  }
  return { values: [...seen.values()], ok: 1 };
};

/**
 * What the stages' own parsers refuse before any document flows (the top-level pipeline; mingo runs
 * the rest):
 *  - $match: MatchExpressionParser (query-parse.ts);
 *  - $project: projection_ast::parse with the aggregation policies (projection.ts);
 *  - $sort: DocumentSourceSort::createFromBson (src/mongo/db/pipeline/document_source_sort.cpp)
 *    15973 "the $sort key specification must be an object", 15976 "$sort stage must have at least
 *    one sort key", then SortPattern (sort.ts);
 *  - $group: DocumentSourceGroupBase::initializeFromBson (document_source_group_base.cpp): after
 *    the accumulators are parsed, 15955 "a group specification must include an _id" (answered here
 *    only when every other field has an accumulator's shape, so that no accumulator error comes
 *    first).
 */
function checkStageSpec(op: string, spec: unknown): void {
  if (op === '$match') checkFilterSyntax(spec);
  else if (op === '$project' && isPlainObject(spec)) checkProjectionSpec(spec, 'aggregate');
  else if (op === '$sort') {
    if (!isPlainObject(spec)) throw new MongoCommandError(15973, 'the $sort key specification must be an object');
    if (!Object.keys(spec).length) throw new MongoCommandError(15976, '$sort stage must have at least one sort key');
    checkSortPattern(spec);
  } else if (op === '$group' && isPlainObject(spec) && !('_id' in spec)) {
    const accumulatorShaped = Object.values(spec).every((v) => isPlainObject(v) && Object.keys(v).length === 1 && Object.keys(v)[0].startsWith('$'));
    if (accumulatorShaped) throw new MongoCommandError(15955, 'a group specification must include an _id');
  }
}

export const UNSUPPORTED_STAGES = new Set(['$changeStreamSplitLargeEvent', '$currentOp', '$listSessions', '$collStats', '$indexStats', '$planCacheStats', '$search', '$geoNear']);

const aggregate: Handler = async (ctx) => {
  const c = ctx.cmd;
  // aggregate_command.idl declares bypassDocumentValidation a safeBool: the IDL parse refuses
  // another type whether or not the pipeline writes (safe-bool.ts; parseWriteStage reads the value).
  parseSafeBool('aggregate', 'bypassDocumentValidation', c.bypassDocumentValidation);
  let pipeline = c.pipeline as Document[] | undefined;
  if (!Array.isArray(pipeline)) throw new MongoCommandError(Codes.FailedToParse, "'pipeline' option must be specified as an array");
  if (c.cursor === undefined && !c.explain) throw new MongoCommandError(Codes.FailedToParse, "The 'cursor' option is required, except for aggregate with the explain argument");
  rejectOptions(ctx, ['collation', 'explain']);
  const collArg = c.aggregate;
  const first = pipeline[0];
  if (isPlainObject(first) && first.$changeStream !== undefined) {
    // DocumentSourceChangeStream::assertIsLegalSpecification
    // (src/mongo/db/pipeline/document_source_change_stream.cpp): replica sets and mongos only.
    if (ctx.state.topology === 'standalone') throw new MongoCommandError(40573, 'The $changeStream stage is only supported on replica sets');
    // run_aggregate.cpp: "Raise an error if 'origNss' is a view" (views.ts).
    if (typeof collArg === 'string' && isView(ctx, collArg)) throw viewNotCollection(ctx.db, collArg);
    const hook = ctx.state.changeStreams;
    if (!hook) throw unsupported('$changeStream (change-streams module not installed)');
    const src = await hook.openCursor({
      db: ctx.db,
      coll: typeof collArg === 'string' ? collArg : undefined,
      options: (first.$changeStream ?? {}) as Document,
      pipeline: pipeline.slice(1),
      command: c,
    });
    return ctx.state.cursors.fromSource(src, (c.cursor as Document | undefined)?.batchSize as number | undefined, c.maxAwaitTimeMS as number | undefined);
  }
  for (const stage of pipeline) {
    // LiteParsedDocumentSource::parse (src/mongo/db/pipeline/lite_parsed_document_source.cpp).
    if (isPlainObject(stage) && Object.keys(stage).length !== 1) throw new MongoCommandError(40323, 'A pipeline stage specification object must contain exactly one field.');
    const op = isPlainObject(stage) ? Object.keys(stage)[0] : undefined;
    if (op && UNSUPPORTED_STAGES.has(op)) throw unsupported(`aggregation stage ${op}`);
    // $where/$near/$nearSphere in any $match of the stage, sub-pipelines included (match-stage-refusals.ts).
    checkMatchClausesInStage(stage);
    if (op) checkStageSpec(op, stage[op]);
    // mongod refuses a $changeStream that is not first (Pipeline::validateCommon's 40602 for stages
    // whose position is kFirst, src/mongo/db/pipeline/pipeline.cpp), but which of its expanded
    // stages meets that check first, and so the errmsg, was not sourced: refused here instead.
    if (op === '$changeStream') throw unsupported('$changeStream after the first stage (mongod refuses it; its errmsg is not sourced here)');
  }
  // $out / $merge (aggregate-write.ts): validated here, split off, written after the pipeline ran.
  const write = parseWriteStage(ctx, pipeline);
  if (write) pipeline = write.body;
  // Collection-less aggregate ($listLocalSessions, $documents): collectionless-aggregate.ts.
  if (typeof collArg !== 'string' && numKind(collArg) !== undefined && toNumber(collArg) === 1) {
    const resolver = (name: string) => resolverDocs(ctx, name);
    if (write) return runWriteStage(ctx, write, collectionlessDocs(ctx, pipeline, resolver), `${ctx.db}.$cmd.aggregate`);
    return collectionlessAggregate(ctx, pipeline, resolver);
  }
  if (typeof collArg !== 'string') throw unsupported(`aggregate: ${String(collArg)} (neither a collection name nor 1)`);
  for (const stage of pipeline) {
    const op = isPlainObject(stage) ? Object.keys(stage)[0] : undefined;
    // DocumentSourceListLocalSessions::createFromBson (document_source_list_local_sessions.cpp).
    if (op === '$listLocalSessions') throw new MongoCommandError(Codes.InvalidNamespace, '$listLocalSessions must be run against the database with {aggregate: 1}, not a collection');
    if (op === '$documents') throw unsupported('$documents in an aggregate on a collection');
  }
  rejectSystemViews(collArg);
  if (isView(ctx, collArg)) {
    // The view pipeline, then the request's (views.ts).
    rejectOnView(ctx, c);
    const out = viewDocs(ctx, collArg, bindPipeline(pipeline, ctx.vars));
    if (write) return runWriteStage(ctx, write, out, `${ctx.db}.${collArg}`);
    return ctx.state.cursors.fromArray(`${ctx.db}.${collArg}`, out, (c.cursor as Document | undefined)?.batchSize as number | undefined);
  }
  let stages = bindPipeline(pipeline, ctx.vars);
  let docs: Document[];
  const view = readView(ctx, collArg);
  const hinted = resolveHint(view.coll, c.hint);
  if (isPlainObject(stages[0]) && isPlainObject(stages[0].$match)) {
    const filter = pipeline[0].$match as Document;
    docs = view.find(filter, withRestriction(compileFilter(filter, ctx.vars), hinted), { hint: c.hint }).map(([, d]) => d);
    stages = stages.slice(1);
  } else {
    docs = [...view.all()].map(([, d]) => d).filter((d) => !hinted || hinted(d));
  }
  const scanOrder = hintOrder(view.coll, c.hint);
  if (scanOrder) docs = sortDocs(docs, scanOrder);
  let out: Document[];
  try {
    out = stages.length
      ? (makeAggregator(stages, {
          variables: ctx.vars.let,
          collectionResolver: (name: string) => resolverDocs(ctx, name),
        }).run(docs) as Document[])
      : docs;
  } catch (e) {
    throw toCommandError(e);
  }
  if (write) return runWriteStage(ctx, write, out, `${ctx.db}.${collArg}`);
  const cursor = c.cursor as Document | undefined;
  return ctx.state.cursors.fromArray(`${ctx.db}.${collArg}`, out, cursor?.batchSize as number | undefined);
};

export const crudCommands: Record<string, Handler> = {
  insert,
  update,
  delete: del,
  findAndModify,
  findandmodify: findAndModify,
  find,
  getMore,
  killCursors,
  count,
  distinct,
  aggregate,
};

export const WRITE_COMMANDS = new Set(['insert', 'update', 'delete', 'findAndModify', 'findandmodify']);
