/**
 * Reading documents: system-variable binding ($$NOW / $$CLUSTER_TIME, one
 * value per command), the view a command reads (committed state, or a
 * transaction's snapshot plus its own writes), and candidate selection that
 * uses the `_id` map and single-field indexes before mingo re-checks.
 */
import type { Document, Timestamp } from 'bson';
import { Query } from 'mingo';
import type { Index } from './indexes';
import type { Collection } from './storage/collection';
import type { Transaction } from './transactions';
import { MongoCommandError, toCommandError, unsupported } from './errors';
import { isPlainObject, keyOf } from './values';

export interface SystemVars {
  now: Date;
  clusterTime: Timestamp;
  /**
   * False on a standalone: its logical clock does not run, so `$$CLUSTER_TIME` is not defined
   * (src/mongo/db/pipeline/variables.cpp: "On a standalone mongod the logical clock may not be
   * running and $$CLUSTER_TIME is not available"; reading it fails with 51144).
   */
  clusterTimeAvailable?: boolean;
}

/**
 * mongod 7.0 raises this when the expression is evaluated (`Variables::getValue`, code 51144); the
 * emulator raises it when the command binds its variables, so a command that would evaluate the
 * variable on no document at all is refused here where mongod would succeed.
 */
function clusterTimeUnavailable(): MongoCommandError {
  return new MongoCommandError(51144, "Builtin variable '$$CLUSTER_TIME' is not available");
}

function bindValue(v: unknown, vars: SystemVars): unknown {
  if (typeof v === 'string') {
    if (v === '$$NOW') return { $literal: vars.now };
    if (v === '$$CLUSTER_TIME' || v.startsWith('$$CLUSTER_TIME.')) {
      if (vars.clusterTimeAvailable === false) throw clusterTimeUnavailable();
      if (v === '$$CLUSTER_TIME') return { $literal: vars.clusterTime };
    }
    return v;
  }
  if (Array.isArray(v)) return v.map((x) => bindValue(x, vars));
  if (isPlainObject(v)) {
    if ('$literal' in v) return v;
    const out: Document = {};
    for (const k of Object.keys(v)) out[k] = bindValue(v[k], vars);
    return out;
  }
  return v;
}

/**
 * Binds system variables inside aggregation expressions. mingo evaluates
 * `$$NOW` lazily per evaluation context, so we substitute a literal to make
 * every document of one command see the same instant.
 */
export function bindExpression<T>(expr: T, vars: SystemVars): T {
  return bindValue(expr, vars) as T;
}

/** In a query filter, only `$expr` (at any `$and/$or/$nor` depth) holds expressions. */
export function bindFilter(filter: Document, vars: SystemVars): Document {
  const out: Document = {};
  for (const k of Object.keys(filter)) {
    const v = filter[k];
    if (k === '$expr') out[k] = bindExpression(v, vars);
    else if ((k === '$and' || k === '$or' || k === '$nor') && Array.isArray(v)) out[k] = v.map((f) => (isPlainObject(f) ? bindFilter(f, vars) : f));
    else out[k] = v;
  }
  return out;
}

/**
 * Numbers lose their BSON type on the way in (see the header of index.ts): a
 * stored Int32, Int64 and Double are all JS numbers here. A `$type` test that
 * tells them apart would answer wrongly, so it fails loudly instead.
 */
const NUMERIC_TYPE_ALIASES = new Set<unknown>(['double', 'int', 'long', 'decimal', 1, 16, 18, 19]);
const QUERY_TYPE_ALIASES_OK = new Set<unknown>(['string', 'object', 'array', 'binData', 'objectId', 'bool', 'date', 'null', 'regex', 'timestamp', 'number', 'minKey', 'maxKey', 'undefined', 'javascript', 'symbol', 'dbPointer']);

function typeUnsupported(detail: string): MongoCommandError {
  return unsupported(`${detail} (the emulator does not keep the BSON type of numbers: Int32, Int64 and Double are all stored as plain numbers)`);
}

/** Rejects `$type` conditions on numeric BSON types in a query filter (at any depth). */
export function rejectNumericTypeTests(v: unknown, inExpression = false, root: unknown = v): void {
  if (Array.isArray(v)) {
    for (const x of v) rejectNumericTypeTests(x, inExpression, root);
    return;
  }
  if (!isPlainObject(v)) return;
  for (const k of Object.keys(v)) {
    const x = v[k];
    if (k === '$type') {
      const aliases = Array.isArray(x) ? x : [x];
      if (inExpression) {
        // The `$type` expression names a value's type; for numbers that name is a guess,
        // so an expression that compares it with a numeric type name is refused.
        if (!(typeof x === 'string' && QUERY_TYPE_ALIASES_OK.has(x)) && mentionsNumericTypeName(root)) throw typeUnsupported('the $type aggregation expression compared with a numeric type name');
      } else if (aliases.some((a) => NUMERIC_TYPE_ALIASES.has(a) || (a !== null && typeof a === 'object'))) {
        throw typeUnsupported(`$type ${JSON.stringify(x)} in a query filter`);
      }
      continue;
    }
    if (k === '$literal') continue;
    rejectNumericTypeTests(x, inExpression || k === '$expr', root);
  }
}

function mentionsNumericTypeName(v: unknown): boolean {
  if (typeof v === 'string') return v === 'double' || v === 'int' || v === 'long' || v === 'decimal';
  if (Array.isArray(v)) return v.some(mentionsNumericTypeName);
  return isPlainObject(v) && Object.values(v).some(mentionsNumericTypeName);
}

/** Aggregation stages: `$match` is a filter, every other stage holds expressions. */
export function bindPipeline(pipeline: Document[], vars: SystemVars): Document[] {
  for (const stage of pipeline) {
    if (isPlainObject(stage) && isPlainObject(stage.$match)) rejectNumericTypeTests(stage.$match, false, pipeline);
    else rejectNumericTypeTests(stage, true, pipeline);
  }
  return pipeline.map((stage) => {
    if (isPlainObject(stage) && isPlainObject(stage.$match)) return { $match: bindFilter(stage.$match, vars) };
    return bindExpression(stage, vars);
  });
}

export interface Matcher {
  test(doc: Document): boolean;
}

const ALWAYS: Matcher = { test: () => true };

export function compileFilter(filter: Document | undefined, vars: SystemVars): Matcher {
  if (!filter) return ALWAYS;
  const keys = Object.keys(filter);
  if (keys.length === 0) return ALWAYS;
  // `{_id: scalar}`: the _id map lookup in View.find is already exact, skip mingo.
  if (isExactIdLookup(filter)) return ALWAYS;
  // Compiling a mingo Query copies mingo's whole operator table; filters without
  // `$expr`/`$where` do not depend on the command's variables, so reuse them.
  const cacheKey = keyOf(filter);
  const cacheable = !cacheKey.includes('"$expr"') && !cacheKey.includes('"$where"');
  if (cacheable) {
    const hit = compiledFilters.get(cacheKey);
    if (hit) return hit;
  }
  rejectNumericTypeTests(filter);
  let q: Query;
  try {
    q = new Query(bindFilter(filter, vars));
  } catch (e) {
    throw toCommandError(e);
  }
  if (cacheable) {
    if (compiledFilters.size >= FILTER_CACHE_SIZE) compiledFilters.clear();
    compiledFilters.set(cacheKey, q);
  }
  return q;
}

const FILTER_CACHE_SIZE = 1000;
const compiledFilters = new Map<string, Query>();

/** A command's view of one collection. */
export class View {
  private readonly overlay: Map<string, Document | null> | undefined;
  private readonly snapshot: number | undefined;

  constructor(
    readonly coll: Collection | undefined,
    readonly txn?: Transaction,
  ) {
    this.overlay = coll && txn ? txn.overlayFor(coll.ns) : undefined;
    this.snapshot = txn?.snapshot;
  }

  get(key: string): Document | undefined {
    if (this.overlay?.has(key)) return this.overlay.get(key) ?? undefined;
    return this.coll?.getAt(key, this.snapshot);
  }

  /** All visible documents as [key, doc] in natural (insertion) order. */
  *all(): Iterable<[string, Document]> {
    const c = this.coll;
    if (!c) return;
    if (!this.txn) {
      for (const [k, r] of c.docs) yield [k, r.doc];
      return;
    }
    const seen = new Set<string>();
    for (const k of c.snapshotKeys()) {
      seen.add(k);
      const d = this.get(k);
      if (d) yield [k, d];
    }
    if (this.overlay) for (const [k, d] of this.overlay) if (!seen.has(k) && d) yield [k, d];
  }

  /** Visible documents matching `filter`, using indexes for plain equality conditions. */
  find(filter: Document | undefined, matcher: Matcher, limit = 0, stats?: { examined: number }): Array<[string, Document]> {
    const out: Array<[string, Document]> = [];
    for (const [k, d] of this.candidates(filter)) {
      if (stats) stats.examined++;
      if (matcher.test(d)) {
        out.push([k, d]);
        if (limit && out.length >= limit) break;
      }
    }
    return out;
  }

  *candidates(filter: Document | undefined, path: AccessPath = chooseAccessPath(this.coll, filter, !!this.txn)): Iterable<[string, Document]> {
    const c = this.coll;
    if (!c) return;
    switch (path.kind) {
      case 'eof':
        return;
      case 'id': {
        const k = keyOf(path.value);
        const d = this.get(k);
        if (d) yield [k, d];
        return;
      }
      case 'index': {
        const keys = path.index.lookupEqual(path.value) ?? new Set<string>();
        for (const k of [...keys]) {
          const r = c.docs.get(k);
          if (r) yield [k, r.doc];
        }
        return;
      }
      case 'collscan':
        yield* this.all();
    }
  }
}

/**
 * How a filter's candidate documents are found (then re-checked by the
 * matcher, except for an exact `_id` lookup, see isExactIdLookup):
 *  - eof: the collection does not exist, nothing is read;
 *  - id: one lookup in the collection's `_id` map (equality on `_id`);
 *  - index: the equality map of a single-field secondary index (outside
 *    transactions only: the maps hold committed state, not a snapshot);
 *  - collscan: every visible document in natural order.
 * View.candidates executes exactly this decision and explain reports it.
 */
export type AccessPath =
  | { kind: 'eof' }
  | { kind: 'id'; value: unknown }
  | { kind: 'index'; index: Index; field: string; value: unknown }
  | { kind: 'collscan' };

export function chooseAccessPath(coll: Collection | undefined, filter: Document | undefined, inTransaction: boolean): AccessPath {
  if (!coll) return { kind: 'eof' };
  if (filter) {
    const idEq = equalityValue(filter._id);
    if (idEq.ok) return { kind: 'id', value: idEq.value };
    if (!inTransaction) {
      for (const field of Object.keys(filter)) {
        if (field.startsWith('$')) continue;
        const eq = equalityValue(filter[field]);
        if (!eq.ok) continue;
        const index = coll.indexes.find((i) => i.canLookup(field));
        if (!index || !index.lookupEqual(eq.value)) continue;
        return { kind: 'index', index, field, value: eq.value };
      }
    }
  }
  return { kind: 'collscan' };
}

/** `{_id: scalar}` and nothing else: the `_id` map lookup is exact and the matcher is skipped. */
export function isExactIdLookup(filter: Document | undefined): boolean {
  if (!filter) return false;
  const keys = Object.keys(filter);
  return keys.length === 1 && keys[0] === '_id' && equalityValue(filter._id).ok;
}

/** `{f: v}` or `{f: {$eq: v}}` with a scalar v (regexes and operator objects excluded). */
export function equalityValue(cond: unknown): { ok: true; value: unknown } | { ok: false } {
  if (cond === undefined) return { ok: false };
  if (cond instanceof RegExp) return { ok: false };
  if (isPlainObject(cond)) {
    const keys = Object.keys(cond);
    if (keys.length === 1 && keys[0] === '$eq' && !(cond.$eq instanceof RegExp) && !Array.isArray(cond.$eq) && !isPlainObject(cond.$eq)) return { ok: true, value: cond.$eq };
    return { ok: false };
  }
  if (Array.isArray(cond)) return { ok: false };
  return { ok: true, value: cond };
}
