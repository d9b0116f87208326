/**
 * Reading documents: system-variable binding ($$NOW / $$CLUSTER_TIME, one
 * value per command), the view a command reads (committed state, or a
 * transaction's snapshot plus its own writes), and the execution of the
 * access path the planner chose (planner.ts): IDHACK, an index scan in index
 * order, or a collection scan, every candidate re-checked by the matcher.
 */
import type { Document, Timestamp } from 'bson';
import type { Query } from 'mingo';
import { makeQuery } from './mingo-context';
import { rejectProtoKeys, rejectUnsupportedQueryFeatures } from './unsupported-features';
import { inOil, rangeCuts, scanRanges, type Oil } from './index-bounds';
import type { IndexEntry } from './index-keys';
import { chooseAccessPath, type AccessPath, type IndexScan } from './planner';
import { sortDocs } from './sort';
import { checkFilterSyntax } from './query-parse';
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
  // `{_id: scalar}`: IDHACK's `_id` map lookup is exact and View.find skips the matcher; it is
  // compiled only if another path (a hint) needs it.
  if (isExactIdLookup(filter)) {
    let compiled: Matcher | undefined;
    return { test: (doc) => (compiled ??= compileQuery(filter, vars)).test(doc) };
  }
  return compileQuery(filter, vars);
}

function compileQuery(filter: Document, vars: SystemVars): Matcher {
  // Compiling a mingo Query copies mingo's whole operator table; filters without
  // `$expr`/`$where` do not depend on the command's variables, so reuse them.
  const cacheKey = keyOf(filter);
  const cacheable = !vars.let && !cacheKey.includes('"$expr"') && !cacheKey.includes('"$where"');
  if (cacheable) {
    const hit = compiledFilters.get(cacheKey);
    if (hit) return hit;
  }
  // MatchExpressionParser's own refusals first (query-parse.ts), then what the emulator lacks.
  checkFilterSyntax(filter);
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

/** Counters of one read (explain's executionStats): documents fetched, index keys examined. */
export interface ReadStats {
  examined: number;
  keys?: number;
}

export interface FindOptions {
  /** Matches to return (after the sort); 0 or absent: all. */
  limit?: number;
  /** The order of the result: provided by the index scan when the plan says so, else sorted here. */
  sort?: Document;
  hint?: unknown;
  /** Only for the choice of plan (IDHACK is not used with a skip). */
  skip?: number;
  stats?: ReadStats;
}

/** The rows of an access path, and whether they come in the requested sort order. */
interface Scan {
  rows: Iterable<[string, Document]>;
  sorted: boolean;
}

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

  /** The access path for a read of this view (planner.ts). */
  plan(filter: Document | undefined, o: Omit<FindOptions, 'limit' | 'stats'> = {}): AccessPath {
    return chooseAccessPath(this.coll, { filter, sort: o.sort, hint: o.hint, skip: o.skip });
  }

  /**
   * Visible documents matching `filter` (candidates from the planned access path, each re-checked
   * by `matcher` except IDHACK's one document), sorted and limited as `o` asks.
   */
  find(filter: Document | undefined, matcher: Matcher, o: FindOptions = {}): Array<[string, Document]> {
    const chosen = this.plan(filter, o);
    const scan = this.scan(chosen, o.stats);
    const sorted = !o.sort || scan.sorted;
    const stopAt = sorted ? (o.limit ?? 0) : 0;
    const recheck = chosen.kind !== 'idhack';
    let out: Array<[string, Document]> = [];
    for (const row of scan.rows) {
      if (o.stats) o.stats.examined++;
      if (recheck && !matcher.test(row[1])) continue;
      out.push(row);
      if (stopAt && out.length >= stopAt) break;
    }
    if (!sorted && o.sort) {
      const keyOfDoc = new Map(out.map(([k, d]) => [d, k] as const));
      out = sortDocs(out.map(([, d]) => d), o.sort).map((d): [string, Document] => [keyOfDoc.get(d)!, d]);
      if (o.limit) out = out.slice(0, o.limit);
    }
    return out;
  }

  /** The candidate documents of `filter`'s access path (a superset of the matches), in its order. */
  *candidates(filter: Document | undefined, path: AccessPath = this.plan(filter)): Iterable<[string, Document]> {
    yield* this.scan(path).rows;
  }

  private scan(path: AccessPath, stats?: ReadStats): Scan {
    switch (path.kind) {
      case 'eof':
        return { rows: [], sorted: true };
      case 'idhack':
        return { rows: this.idLookups([path.value], stats), sorted: true };
      case 'collscan':
        return { rows: this.all(), sorted: false };
      case 'ixscan':
        if (path.idPoints) return { rows: this.idLookups(path.direction > 0 ? path.idPoints : [...path.idPoints].reverse(), stats), sorted: path.providesSort };
        return this.indexScan(path, stats);
    }
  }

  /** `_id` lookups (the `_id` map is the `_id` index): read through the view, so snapshots and own writes count. */
  private *idLookups(values: unknown[], stats?: ReadStats): Iterable<[string, Document]> {
    const seen = new Set<string>();
    for (const v of values) {
      const k = keyOf(v);
      if (seen.has(k)) continue;
      seen.add(k);
      const d = this.get(k);
      if (!d) continue;
      if (stats) stats.keys = (stats.keys ?? 0) + 1;
      yield [k, d];
    }
  }

  /**
   * The keys a point-in-time view cannot take from the committed index: its transaction's own
   * writes, and documents written (or deleted) since its snapshot. Every other document reads the
   * same in the view as committed, so its committed index keys are its keys in the view.
   */
  private changedKeys(): Set<string> | undefined {
    const c = this.coll;
    if (!c || this.snapshot === undefined) return undefined;
    const changed = new Set<string>(this.overlay?.keys() ?? []);
    for (const k of c.history.keys()) {
      const rec = c.docs.get(k);
      if (!rec || rec.seq > this.snapshot) changed.add(k);
    }
    // A document written since the snapshot always has history while the snapshot is in use
    // (Storage.commit keeps before-images for running snapshots); checked here all the same.
    return changed;
  }

  /**
   * The index scan: the committed keys within the bounds (ranges of the ordered index, later
   * fields checked key by key), merged with the keys of the documents this view reads differently
   * from the committed state (changedKeys), in index order; a multikey document once. When a
   * document of the view has keys the plan could not foresee (a new array, a shape the index does
   * not model), the scan falls back to the collection scan, which is always right.
   */
  private indexScan(path: IndexScan, stats?: ReadStats): Scan {
    const c = this.coll!;
    const index = path.index;
    const cmp = path.direction > 0 ? index.compare : (a: IndexEntry, b: IndexEntry) => index.compare(b, a);
    const changed = this.changedKeys();
    const extras: Array<{ e: IndexEntry; d: Document }> = [];
    let multikey = index.multikeyFields.size > 0;
    if (changed) {
      for (const k of changed) {
        const d = this.get(k);
        if (!d) continue;
        const keys = index.keysOf(d, k, c.docs.peekRid(k) ?? Number.MAX_SAFE_INTEGER);
        if (!keys || keys.arrayFields.some((f) => !index.multikeyFields.has(f))) return { rows: this.all(), sorted: false };
        if (keys.arrayFields.length) multikey = true;
        for (const e of keys.entries) if (inBounds(e, path.bounds)) extras.push({ e, d });
      }
      extras.sort((x, y) => cmp(x.e, y.e));
    }
    const read = (k: string) => this.get(k);
    function* committed(): Generator<IndexEntry> {
      const ranges = scanRanges(path.bounds, index.dirs);
      const ordered = path.direction > 0 ? ranges : [...ranges].reverse();
      for (const r of ordered) {
        const { beforeStart, afterEnd } = rangeCuts(r, index.dirs);
        for (const e of index.keys.range(beforeStart, afterEnd, path.direction < 0)) {
          if (stats) stats.keys = (stats.keys ?? 0) + 1;
          if (changed?.has(e.k) || !inBounds(e, path.bounds)) continue;
          yield e;
        }
      }
    }
    function* rows(): Generator<[string, Document]> {
      const seen = multikey ? new Set<string>() : undefined;
      const main = committed();
      // The next committed key, read only when needed (a limit stops the scan at its last key).
      let head: IteratorResult<IndexEntry> | undefined;
      let x = 0;
      for (;;) {
        let k: string;
        let d: Document | undefined;
        const h = (head ??= main.next());
        if (x < extras.length && (h.done || cmp(extras[x].e, h.value) < 0)) {
          if (stats) stats.keys = (stats.keys ?? 0) + 1;
          k = extras[x].e.k;
          d = extras[x++].d;
        } else if (!h.done) {
          k = h.value.k;
          d = changed ? read(k) : c.docs.get(k)?.doc;
          head = undefined;
        } else {
          return;
        }
        if (!d) continue;
        if (seen) {
          if (seen.has(k)) continue;
          seen.add(k);
        }
        yield [k, d];
      }
    }
    return { rows: rows(), sorted: path.providesSort };
  }
}

/** Whether every value of an index entry lies in its field's bounds. */
function inBounds(e: IndexEntry, bounds: Oil[]): boolean {
  for (let i = 0; i < bounds.length; i++) if (!inOil(e.v[i], bounds[i])) return false;
  return true;
}

export { chooseAccessPath, type AccessPath, type IndexScan } from './planner';

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
