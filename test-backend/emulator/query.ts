/**
 * Reading documents: system-variable binding ($$NOW / $$CLUSTER_TIME, one
 * value per command), the view a command reads (committed state, or a
 * transaction's snapshot plus its own writes), and candidate selection that
 * uses the `_id` map and single-field indexes before mingo re-checks.
 */
import type { Document, Timestamp } from 'bson';
import type { Query } from 'mingo';
import { makeQuery } from './mingo-context';
import { rejectProtoKeys, rejectUnsupportedQueryFeatures } from './unsupported-features';
import type { Index } from './indexes';
import type { Collection } from './storage/collection';
import type { Transaction } from './transactions';
import { MongoCommandError, toCommandError } from './errors';
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
  /** The command's `let` variables, evaluated once (see let.ts). */
  let?: Document;
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
 * Aggregation stages: `$match` is a filter, every other stage holds expressions; a `$lookup`'s
 * `let` holds expressions and its `pipeline` is a pipeline (its `$match` stages are filters, whose
 * plain values are never variables). The sub-pipeline's `$$NOW` is the command's: its expression
 * context is a copy of the command's (DocumentSourceLookUp, `expCtx->copyForSubPipeline`).
 */
export function bindPipeline(pipeline: Document[], vars: SystemVars): Document[] {
  return pipeline.map((stage) => {
    if (isPlainObject(stage) && isPlainObject(stage.$match)) return { $match: bindFilter(stage.$match, vars) };
    if (isPlainObject(stage) && isPlainObject(stage.$lookup) && Object.keys(stage).length === 1) {
      const { let: letSpec, pipeline: sub, ...rest } = stage.$lookup;
      const bound: Document = { ...rest };
      for (const key of Object.keys(stage.$lookup)) {
        if (key === 'let') bound.let = bindExpression(letSpec, vars);
        else if (key === 'pipeline') bound.pipeline = Array.isArray(sub) && sub.every(isPlainObject) ? bindPipeline(sub, vars) : sub;
        else bound[key] = rest[key];
      }
      return { $lookup: bound };
    }
    return bindExpression(stage, vars);
  });
}

export interface Matcher {
  test(doc: Document): boolean;
}

/** The matcher narrowed by a hint's restriction (hint.ts), if any. */
export function withRestriction(m: Matcher, r: ((doc: Document) => boolean) | undefined): Matcher {
  return r ? { test: (d) => m.test(d) && r(d) } : m;
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
  const cacheable = !vars.let && !cacheKey.includes('"$expr"') && !cacheKey.includes('"$where"');
  if (cacheable) {
    const hit = compiledFilters.get(cacheKey);
    if (hit) return hit;
  }
  rejectUnsupportedQueryFeatures(filter);
  rejectProtoKeys(filter);
  let q: Query;
  try {
    q = makeQuery(bindFilter(filter, vars), { variables: vars.let });
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

  /**
   * `readAt`: a snapshot read outside a transaction (snapshot-reads.ts) reads the committed state
   * as of that commit sequence, like a transaction without writes of its own.
   */
  constructor(
    readonly coll: Collection | undefined,
    readonly txn?: Transaction,
    readAt?: number,
  ) {
    this.overlay = coll && txn ? txn.overlayFor(coll.ns) : undefined;
    this.snapshot = txn ? txn.snapshot : readAt;
  }

  /** Whether the view reads a past snapshot (a transaction's or a snapshot read's), not the latest state. */
  get pointInTime(): boolean {
    return this.snapshot !== undefined;
  }

  get(key: string): Document | undefined {
    if (this.overlay?.has(key)) return this.overlay.get(key) ?? undefined;
    return this.coll?.getAt(key, this.snapshot);
  }

  /** All visible documents as [key, doc] in natural (insertion) order. */
  *all(): Iterable<[string, Document]> {
    const c = this.coll;
    if (!c) return;
    if (this.snapshot === undefined) {
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

  *candidates(filter: Document | undefined, path: AccessPath = chooseAccessPath(this.coll, filter, this.pointInTime)): Iterable<[string, Document]> {
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
 *    transactions and snapshot reads only: the maps hold the latest committed
 *    state, not a snapshot);
 *  - collscan: every visible document in natural order.
 * View.candidates executes exactly this decision and explain reports it.
 */
export type AccessPath =
  | { kind: 'eof' }
  | { kind: 'id'; value: unknown }
  | { kind: 'index'; index: Index; field: string; value: unknown }
  | { kind: 'collscan' };

export function chooseAccessPath(coll: Collection | undefined, filter: Document | undefined, pointInTime: boolean): AccessPath {
  if (!coll) return { kind: 'eof' };
  if (filter) {
    const idEq = equalityValue(filter._id);
    if (idEq.ok) return { kind: 'id', value: idEq.value };
    if (!pointInTime) {
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
