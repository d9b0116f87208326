/**
 * explain: describes the plan the emulator really runs, shaped like mongod's
 * `queryPlanner` output. The access path comes from the planner (planner.ts) through the same
 * View.plan call the command itself makes, so the two cannot disagree:
 *  - `{_id: v}` alone             -> IDHACK (one `_id` map lookup, no re-check);
 *  - a predicate bounding the     -> FETCH { filter: what the bounds do not answer } over IXSCAN
 *    first field of an index,        { keyPattern, indexName, isMultiKey, multiKeyPaths, isUnique,
 *    or a sort an index provides     isSparse, isPartial, indexVersion, direction, indexBounds };
 *  - anything else                -> COLLSCAN (with `filter` when non-empty);
 *  - missing collection           -> EOF.
 * Writes are wrapped in UPDATE / DELETE, count in COUNT, and find's in-memory sort / skip / limit /
 * projection appear as SORT / SKIP / LIMIT / PROJECTION_DEFAULT; there is no SORT stage when the
 * index scan provides the order.
 *
 * Verbosity 'executionStats' / 'allPlansExecution' runs the read (find, count,
 * aggregate that is only a $match) and reports real counts (keys examined by the index scan,
 * documents fetched); for writes it fails with NotImplemented. explain never writes.
 */
import type { Document } from 'bson';
import type { CommandCtx, Handler } from '../context';
import { Codes, MongoCommandError, unsupported } from '../errors';
import { oilText } from '../index-bounds';
import { resolveHint } from '../hint';
import { compileFilter, withRestriction, type AccessPath, type IndexScan, type ReadStats } from '../query';
import { isPlainObject } from '../values';
import { countDocs, FIND_UNSUPPORTED_OPTIONS, findDocs, findWindow, readView, UNSUPPORTED_STAGES } from './crud';
import { GIT_VERSION, SERVER_VERSION } from './handshake';

const VERBOSITIES = new Set(['queryPlanner', 'executionStats', 'allPlansExecution']);

interface Explained {
  ns: string;
  filter: Document;
  plan: Document;
  path: AccessPath;
  /** Runs the read and returns how many documents it produced (count: the count); absent for writes. */
  execute?: (stats: ReadStats) => number;
  /** When the plan is the first stage of a longer pipeline. */
  laterStages?: Document[];
}

/**
 * The FETCH filter of an index scan: the filter without the fields its bounds answer exactly,
 * as mongod serializes what is left (planner_access.cpp keeps predicates with inexact bounds, and
 * the others, in the FETCH stage's filter): a plain equality as `{f: {$eq: v}}`, several
 * predicates under `$and`. The emulator re-checks the whole filter on every fetched document; the
 * predicates the bounds answer exactly are true there anyway.
 */
function residualFilter(filter: Document, covered: Set<string>): Document | undefined {
  const items: Document[] = [];
  for (const key of Object.keys(filter)) {
    if (covered.has(key)) continue;
    const v = filter[key];
    const plain = !key.startsWith('$') && !(v instanceof RegExp) && !(isPlainObject(v) && Object.keys(v).some((k) => k.startsWith('$')));
    items.push({ [key]: plain ? { $eq: v } : v });
  }
  if (items.length === 0) return undefined;
  return items.length === 1 ? items[0] : { $and: items };
}

/**
 * An IXSCAN stage as plan_explainer_impl.cpp's statsToBSON writes it: keyPattern, indexName,
 * isMultiKey, multiKeyPaths (the multikey path components per field), isUnique, isSparse,
 * isPartial, indexVersion, direction, indexBounds (one list of interval strings per key field,
 * in the order the scan visits them, index-bounds.ts oilText).
 */
function ixscanStage(path: IndexScan): Document {
  const index = path.index;
  const spec = index.spec;
  return {
    stage: 'IXSCAN',
    keyPattern: { ...spec.key },
    indexName: index.name,
    isMultiKey: index.multikeyFields.size > 0,
    multiKeyPaths: Object.fromEntries(index.fields.map((f) => [f, index.multikeyFields.has(f) ? [f] : []])),
    isUnique: index.isId || !!spec.unique,
    isSparse: !!spec.sparse,
    isPartial: !!spec.partialFilterExpression,
    indexVersion: spec.v ?? 2,
    direction: path.direction > 0 ? 'forward' : 'backward',
    indexBounds: Object.fromEntries(index.fields.map((f, i) => [f, oilText(path.bounds[i], index.dirs[i], path.direction)])),
  };
}

/** The leaf stages for the access path actually taken for `filter`. */
function accessStage(path: AccessPath, filter: Document): Document {
  switch (path.kind) {
    case 'eof':
      return { stage: 'EOF' };
    case 'idhack':
      return { stage: 'IDHACK' };
    case 'ixscan': {
      const fetch: Document = { stage: 'FETCH' };
      const rest = residualFilter(filter, path.coveredFields);
      if (rest) fetch.filter = rest;
      fetch.inputStage = ixscanStage(path);
      return fetch;
    }
    case 'collscan':
      return Object.keys(filter).length ? { stage: 'COLLSCAN', filter, direction: 'forward' } : { stage: 'COLLSCAN', direction: 'forward' };
  }
}

/** Whether the plan needs a SORT stage for `sort`: not when the index scan provides the order. */
function needsSort(path: AccessPath, sort: unknown): boolean {
  if (!isPlainObject(sort) || Object.keys(sort).length === 0) return false;
  return !((path.kind === 'ixscan' && path.providesSort) || path.kind === 'idhack' || path.kind === 'eof');
}

function filterArg(v: unknown, field: string): Document {
  if (v === undefined || v === null) return {};
  if (!isPlainObject(v)) throw new MongoCommandError(Codes.TypeMismatch, `BSON field '${field}' is the wrong type '${typeof v}', expected type 'object'`);
  return v;
}

function collArg(inner: Document, name: string): string {
  const v = inner[name];
  if (typeof v !== 'string' || !v) throw new MongoCommandError(Codes.InvalidNamespace, `collection name has invalid type ${typeof v}`);
  return v;
}

function rejectOptions(cmd: Document, name: string, options: string[]): void {
  for (const o of options) if (cmd[o] !== undefined) throw unsupported(`${name} option '${o}'`);
}

/** The explained read: its filter and the access path the command itself would take (the same planner call). */
function base(ctx: CommandCtx, coll: string, filter: Document, req: { sort?: unknown; hint?: unknown; skip?: number } = {}): Omit<Explained, 'plan'> {
  // A view's explain is the aggregation's explain of its resolved pipeline (views.ts): not modelled.
  if (ctx.state.storage.getView(ctx.db, coll)) throw unsupported('explain of a command on a view');
  compileFilter(filter, ctx.vars); // the same validation (and errors) as running the command
  const view = readView(ctx, coll);
  resolveHint(view.coll, req.hint); // the same hint errors as running the command
  const sort = isPlainObject(req.sort) && Object.keys(req.sort).length ? req.sort : undefined;
  return { ns: `${ctx.db}.${coll}`, filter, path: view.plan(filter, { sort, hint: req.hint, skip: req.skip }) };
}

function single(inner: Document, name: string, field: string): Document {
  const list = inner[field];
  if (!Array.isArray(list)) throw new MongoCommandError(Codes.FailedToParse, `BSON field '${name}.${field}' is missing but a required field`);
  if (list.length !== 1) throw new MongoCommandError(Codes.InvalidLength, `explained write batches must be of size 1, got ${list.length}`);
  if (!isPlainObject(list[0])) throw new MongoCommandError(Codes.TypeMismatch, `${name}.${field}[0] must be an object`);
  return list[0];
}

function explainFind(ctx: CommandCtx, inner: Document): Explained {
  const coll = collArg(inner, 'find');
  rejectOptions(inner, 'find', FIND_UNSUPPORTED_OPTIONS);
  const { skip, limit, sort } = findWindow(inner);
  const b = base(ctx, coll, filterArg(inner.filter, 'find.filter'), { sort, hint: inner.hint, skip });
  let plan = accessStage(b.path, b.filter);
  if (sort && needsSort(b.path, sort)) plan = { stage: 'SORT', sortPattern: { ...sort }, inputStage: plan };
  if (skip) plan = { stage: 'SKIP', skipAmount: skip, inputStage: plan };
  if (limit) plan = { stage: 'LIMIT', limitAmount: limit, inputStage: plan };
  const projection = inner.projection as Document | undefined;
  if (projection && Object.keys(projection).length) plan = { stage: 'PROJECTION_DEFAULT', transformBy: { ...projection }, inputStage: plan };
  return { ...b, plan, execute: (stats) => findDocs(ctx, coll, inner, stats).length };
}

function explainCount(ctx: CommandCtx, inner: Document): Explained {
  const coll = collArg(inner, 'count');
  rejectOptions(inner, 'count', ['collation']);
  const b = base(ctx, coll, filterArg(inner.query, 'count.query'), { hint: inner.hint });
  const plan: Document = { stage: 'COUNT', inputStage: accessStage(b.path, b.filter) };
  if (inner.skip !== undefined) plan.skipAmount = Number(inner.skip);
  if (inner.limit !== undefined) plan.limitAmount = Math.abs(Number(inner.limit));
  return { ...b, plan, execute: (stats) => countDocs(ctx, coll, inner, stats) };
}

function sorted(plan: Document, path: AccessPath, sort: unknown): Document {
  return needsSort(path, sort) ? { stage: 'SORT', sortPattern: { ...(sort as Document) }, inputStage: plan } : plan;
}

function explainUpdate(ctx: CommandCtx, inner: Document): Explained {
  const coll = collArg(inner, 'update');
  const st = single(inner, 'update', 'updates');
  rejectOptions(st, 'update statement', ['collation', 'sort']);
  if (st.u === undefined) throw new MongoCommandError(Codes.FailedToParse, "BSON field 'update.updates.u' is missing but a required field");
  const b = base(ctx, coll, filterArg(st.q, 'update.updates.q'), { hint: st.hint });
  return { ...b, plan: { stage: 'UPDATE', inputStage: accessStage(b.path, b.filter) } };
}

function explainDelete(ctx: CommandCtx, inner: Document): Explained {
  const coll = collArg(inner, 'delete');
  const st = single(inner, 'delete', 'deletes');
  rejectOptions(st, 'delete statement', ['collation']);
  const limit = Number(st.limit ?? 0);
  if (limit !== 0 && limit !== 1) throw new MongoCommandError(Codes.FailedToParse, 'The limit field in delete objects must be 0 or 1');
  const b = base(ctx, coll, filterArg(st.q, 'delete.deletes.q'), { hint: st.hint });
  return { ...b, plan: { stage: 'DELETE', inputStage: accessStage(b.path, b.filter) } };
}

function explainFindAndModify(ctx: CommandCtx, inner: Document, name: string): Explained {
  const coll = collArg(inner, name);
  rejectOptions(inner, 'findAndModify', ['collation']);
  if (inner.remove && inner.update !== undefined) throw new MongoCommandError(Codes.FailedToParse, 'Cannot specify both an update and remove=true');
  if (!inner.remove && inner.update === undefined) throw new MongoCommandError(Codes.FailedToParse, 'Either an update or remove=true must be specified');
  if (inner.remove && inner.upsert) throw new MongoCommandError(Codes.FailedToParse, 'Cannot specify both upsert=true and remove=true');
  const b = base(ctx, coll, filterArg(inner.query, 'findAndModify.query'), { sort: inner.sort, hint: inner.hint });
  const input = sorted(accessStage(b.path, b.filter), b.path, inner.sort);
  return { ...b, plan: { stage: inner.remove ? 'DELETE' : 'UPDATE', inputStage: input } };
}

function explainAggregate(ctx: CommandCtx, inner: Document): Explained {
  const coll = inner.aggregate;
  const pipeline = inner.pipeline;
  if (!Array.isArray(pipeline)) throw new MongoCommandError(Codes.FailedToParse, "'pipeline' option must be specified as an array");
  rejectOptions(inner, 'aggregate', ['collation']);
  for (const stage of pipeline as unknown[]) {
    const op = isPlainObject(stage) ? Object.keys(stage)[0] : undefined;
    if (op === '$changeStream') throw unsupported('explain of a $changeStream aggregation');
    // Explain of the write stages (aggregate-write.ts) is not implemented: refused, never run.
    if (op === '$out' || op === '$merge') throw unsupported(`explain of an aggregation with ${op}`);
    if (op && UNSUPPORTED_STAGES.has(op)) throw unsupported(`aggregation stage ${op}`);
  }
  if (typeof coll !== 'string' || !coll) throw unsupported('explain of a collection-less aggregate');
  const first = pipeline[0] as unknown;
  const hasMatch = isPlainObject(first) && isPlainObject(first.$match);
  const filter = hasMatch ? (first.$match as Document) : {};
  const b = base(ctx, coll, filter, { hint: inner.hint });
  const rest = (pipeline as Document[]).slice(hasMatch ? 1 : 0);
  const explained: Explained = { ...b, plan: accessStage(b.path, b.filter) };
  if (rest.length) explained.laterStages = rest;
  else {
    explained.execute = (stats) => {
      const view = readView(ctx, coll);
      return view.find(filter, withRestriction(compileFilter(filter, ctx.vars), resolveHint(view.coll, inner.hint)), { hint: inner.hint, stats }).length;
    };
  }
  return explained;
}

function describe(ctx: CommandCtx, inner: Document): Explained {
  const name = Object.keys(inner)[0] ?? '';
  switch (name) {
    case 'find':
      return explainFind(ctx, inner);
    case 'count':
      return explainCount(ctx, inner);
    case 'update':
      return explainUpdate(ctx, inner);
    case 'delete':
      return explainDelete(ctx, inner);
    case 'findAndModify':
    case 'findandmodify':
      return explainFindAndModify(ctx, inner, name);
    case 'aggregate':
      return explainAggregate(ctx, inner);
    default:
      throw unsupported(`explain of '${name}'`);
  }
}

const explain: Handler = (ctx) => {
  const inner = ctx.cmd.explain;
  if (!isPlainObject(inner)) throw new MongoCommandError(Codes.TypeMismatch, "BSON field 'explain.explain' is the wrong type, expected type 'object'");
  const verbosity = ctx.cmd.verbosity ?? 'allPlansExecution';
  if (typeof verbosity !== 'string' || !VERBOSITIES.has(verbosity)) {
    throw new MongoCommandError(Codes.BadValue, "verbosity string must be one of {'queryPlanner', 'executionStats', 'allPlansExecution'}");
  }
  const name = Object.keys(inner)[0] ?? '';
  const x = describe(ctx, inner);
  const queryPlanner: Document = { namespace: x.ns, parsedQuery: x.filter, winningPlan: x.plan, rejectedPlans: [] };
  const reply: Document = {};
  if (x.laterStages) {
    if (verbosity !== 'queryPlanner') throw unsupported(`explain verbosity '${verbosity}' for an aggregate with stages after its leading $match`);
    reply.stages = [{ $cursor: { queryPlanner } }, ...x.laterStages];
  } else {
    reply.queryPlanner = queryPlanner;
  }
  if (verbosity !== 'queryPlanner') {
    if (!x.execute) throw unsupported(`explain verbosity '${verbosity}' for '${name}' (only 'queryPlanner' is implemented for writes)`);
    const stats: ReadStats = { examined: 0, keys: 0 };
    const started = Date.now();
    const produced = x.execute(stats);
    // COUNT returns no documents; like mongod, its stage reports the number as nCounted.
    const isCount = x.plan.stage === 'COUNT';
    const nReturned = isCount ? 0 : produced;
    const executionStats: Document = {
      executionSuccess: true,
      nReturned,
      executionTimeMillis: Date.now() - started,
      totalKeysExamined: stats.keys ?? 0,
      totalDocsExamined: stats.examined,
      executionStages: isCount ? { ...x.plan, nReturned, nCounted: produced } : { ...x.plan, nReturned },
    };
    if (verbosity === 'allPlansExecution') executionStats.allPlansExecution = [];
    reply.executionStats = executionStats;
  }
  const [host, port] = ctx.state.me.split(':');
  Object.assign(reply, {
    explainVersion: '1',
    command: { ...inner, $db: ctx.db },
    serverInfo: { host, port: Number(port), version: SERVER_VERSION, gitVersion: GIT_VERSION },
    ok: 1,
  });
  return reply;
};

export const explainCommands: Record<string, Handler> = { explain };
