/**
 * The query planner: how a read finds its candidate documents, decided as mongod's classic
 * planner decides it for the shapes it plans here (everything else is a collection scan, which
 * answers the same, only slower). View.candidates (query.ts) executes exactly the chosen path and
 * explain (commands/explain.ts) reports it.
 *
 *  1. No collection: EOF.
 *  2. A hint: `{$natural: ...}` is a collection scan (QueryPlanner::plan, "hintObj[kNaturalSortField]");
 *     an index hint plans with that index only, and scans the whole index when no predicate bounds
 *     it (buildWholeIXSoln, query_planner.cpp: "This is the desired behavior when an index is hinted
 *     that is not relevant to the query").
 *  3. `{_id: v}` alone (v a value with exact bounds), no hint, no skip: IDHACK
 *     (isIdHackEligibleQuery / isSimpleIdQuery, src/mongo/db/query/query_utils.{h,cpp} in 7.0;
 *     jstests/core/idhack.js: "ID hack cannot be used with hint()", "... with skip()").
 *  4. An index is a candidate when a predicate bounds its first field (QueryPlannerIXSelect::
 *     rateIndices tags predicates by index and key position; the enumerator needs the leading field
 *     assigned). Hidden, partial, unplannable (ordered-index.ts) indexes, indexes with a collation
 *     and every index of a collection with a default collation are left out.
 *     An equality on the field of a single-field unique index (`_id` included) makes that index
 *     the only candidate (QueryPlannerIXSelect::stripUnneededAssignments: "Found an EQ predicate
 *     which can use a single-field unique index. Clear assignments from the entire tree").
 *  5. Of several candidates mongod races the plans (MultiPlanStage); the emulator picks, in this
 *     order: the longest prefix of fields bounded to points (equality or `$in`), a range on the
 *     next field, an index that provides the sort, a unique index, fewer key fields, catalog order.
 *  6. With a sort and no candidate, an index whose key pattern (or its reverse) starts with the
 *     sort is scanned whole to provide it (query_planner.cpp: "If a sort order is requested, there
 *     may be an index that provides it, even if that index is not over any predicates in the
 *     query"; not sparse, not partial).
 *  7. Otherwise a collection scan ("No indexed plans? We must provide a collscan").
 *
 * An index scan provides the sort when the sort, without the fields bounded to one point, is a
 * prefix of the key pattern without those fields, in the same or the reverse direction (then the
 * scan runs backward): QueryPlannerAnalysis::analyzeSort (planner_analysis.cpp), `providedSorts()
 * .contains(sort)`, else the reverse with reverseScans; the point-bounded fields are the ignored
 * fields of IndexScanNode::computeProperties (query_solution_test.cpp). The emulator does not let a multikey
 * index provide a sort (a blocking sort answers the same) nor explode `$in` points into a merge
 * sort (explodeForSort): both then sort in memory, where mongod may not.
 */
import type { Document } from 'bson';
import { ALL_VALUES, isPointOil, intersect, predicatesOf, translate, type Oil, type Predicate } from './index-bounds';
import { canonicalRank } from './bson-order';
import type { OrderedIndex } from './ordered-index';
import { isNumeric, toNumber } from './numbers';
import type { Collection } from './storage/collection';
import { isPlainObject, keyOf } from './values';

/** An index scan: the index, its bounds (one OIL per key field), the direction, what it answers. */
export interface IndexScan {
  kind: 'ixscan';
  index: OrderedIndex;
  bounds: Oil[];
  /** 1 forward, -1 backward (to provide a sort reversed from the key pattern). */
  direction: 1 | -1;
  /** The scan's order is the requested sort (no SORT stage). */
  providesSort: boolean;
  /** Top-level filter fields whose predicates the bounds answer exactly (left out of explain's FETCH filter). */
  coveredFields: Set<string>;
  /** The bounds of `_id` index points: the scan is one `_id` lookup per point. */
  idPoints?: unknown[];
}

/**
 * How a filter's candidate documents are found (then re-checked by the matcher, except for
 * IDHACK on `{_id: v}` alone):
 *  - eof: the collection does not exist;
 *  - idhack: one lookup in the `_id` map;
 *  - ixscan: the keys within the bounds of one index, in index order;
 *  - collscan: every visible document in natural order.
 */
export type AccessPath = { kind: 'eof' } | { kind: 'idhack'; value: unknown } | IndexScan | { kind: 'collscan' };

export interface PlanRequest {
  filter?: Document;
  sort?: Document;
  hint?: unknown;
  skip?: number;
}

/**
 * Types with exact index bounds (Indexability::isExactBoundsGenerating) that the `_id` map finds by
 * value: a document too, when no field of it is an operator (jstests/core/idhack.js plans
 * `{_id: {x: 2}}` as IDHACK).
 */
function idHackValue(v: unknown): boolean {
  if (isPlainObject(v)) return !Object.keys(v).some((k) => k.startsWith('$'));
  if (v === null || v === undefined || v instanceof RegExp || Array.isArray(v)) return false;
  const rank = canonicalRank(v);
  return rank !== 0 && rank !== 5 && rank !== 25 && rank !== 50 && rank !== -1 && rank !== 127 && rank !== 100;
}

/** The value of `{_id: v}` / `{_id: {$eq: v}}` when that is the whole filter (isSimpleIdQuery). */
export function simpleIdValue(filter: Document | undefined): { ok: true; value: unknown } | { ok: false } {
  if (!filter) return { ok: false };
  const keys = Object.keys(filter);
  if (keys.length !== 1 || keys[0] !== '_id') return { ok: false };
  const cond = filter._id;
  if (isPlainObject(cond) && Object.keys(cond).some((k) => k.startsWith('$'))) {
    const ks = Object.keys(cond);
    if (ks.length !== 1 || ks[0] !== '$eq') return { ok: false };
    return idHackValue(cond.$eq) ? { ok: true, value: cond.$eq } : { ok: false };
  }
  return idHackValue(cond) ? { ok: true, value: cond } : { ok: false };
}

/** The sort as [field, direction] pairs, or undefined when it is not a plain 1/-1 field sort. */
function sortFields(sort: Document | undefined): Array<[string, number]> | undefined {
  if (!sort) return undefined;
  const out: Array<[string, number]> = [];
  for (const [f, d] of Object.entries(sort)) {
    if (f.startsWith('$') || !isNumeric(d)) return undefined;
    const n = toNumber(d);
    if (n !== 1 && n !== -1) return undefined;
    out.push([f, n]);
  }
  return out.length ? out : undefined;
}

/**
 * Whether the scan of `index` with `bounds` yields documents in `sort` order, and in which
 * direction: the sort without point-bounded fields must be a prefix of the key pattern without
 * them, all in the key's directions (forward) or all reversed (backward).
 */
function sortDirection(index: OrderedIndex, bounds: Oil[], sort: Array<[string, number]>): 1 | -1 | undefined {
  if (index.multikeyFields.size > 0) return undefined;
  const points = new Set(index.fields.filter((_, i) => bounds[i].length === 1 && isPointOil(bounds[i])));
  const wanted = sort.filter(([f]) => !points.has(f));
  const keyed = index.fields.map((f, i): [string, number] => [f, index.dirs[i]]).filter(([f]) => !points.has(f));
  if (wanted.length === 0) return 1;
  if (wanted.length > keyed.length) return undefined;
  let dir: 1 | -1 | undefined;
  for (let i = 0; i < wanted.length; i++) {
    if (wanted[i][0] !== keyed[i][0]) return undefined;
    const d = wanted[i][1] === keyed[i][1] ? 1 : -1;
    if (dir === undefined) dir = d;
    else if (dir !== d) return undefined;
  }
  return dir;
}

/** The bounds the filter's predicates give `index` (and which fields they answer exactly). */
function boundsFor(index: OrderedIndex, preds: Map<string, Predicate[]>): { bounds: Oil[]; covered: Set<string>; bounded: boolean[] } {
  const sparse = !!index.spec.sparse;
  const covered = new Set<string>();
  const bounded: boolean[] = [];
  const bounds = index.fields.map((f) => {
    const list = preds.get(f) ?? [];
    let oil: Oil | undefined;
    let exact = true;
    let used = 0;
    for (const p of list) {
      const t = translate(p, sparse);
      if (!t) {
        exact = false;
        continue;
      }
      // A multikey field takes the bounds of its first predicate only (index-bounds.ts).
      if (oil && index.multikeyFields.has(f)) {
        exact = false;
        continue;
      }
      oil = oil ? intersect(oil, t.oil) : t.oil;
      exact &&= t.exact;
      used++;
    }
    bounded.push(oil !== undefined);
    if (oil && exact && used === list.length && !index.multikeyFields.has(f)) covered.add(f);
    return oil ?? [ALL_VALUES];
  });
  return { bounds, covered, bounded };
}

function pointPrefix(bounds: Oil[]): number {
  let k = 0;
  while (k < bounds.length && bounds[k].length > 0 && isPointOil(bounds[k])) k++;
  return k;
}

/** Whether the planner may use `index` at all (see the header, 4). */
function plannable(coll: Collection, index: OrderedIndex): boolean {
  return !index.unplannable && !index.spec.hidden && !index.spec.partialFilterExpression && index.spec.collation === undefined && coll.options.collation === undefined;
}

function scanOf(index: OrderedIndex, bounds: Oil[], covered: Set<string>, dir: 1 | -1 | undefined): IndexScan {
  const scan: IndexScan = { kind: 'ixscan', index, bounds, direction: dir ?? 1, providesSort: dir !== undefined, coveredFields: covered };
  if (index.isId && bounds[0].length > 0 && isPointOil(bounds[0])) scan.idPoints = bounds[0].map((iv) => iv.lo);
  return scan;
}

/** The indexes of `coll` in catalog order, the `_id` index first. */
function catalog(coll: Collection): OrderedIndex[] {
  return [coll.docs.idIndex, ...coll.indexes.map((i) => i.ordered)];
}

/** The index a hint names (undefined: `$natural`, or no hint); resolveHint (hint.ts) has refused unknown ones. */
function hinted(coll: Collection, hint: unknown): OrderedIndex | 'natural' | undefined {
  if (hint === undefined || hint === null) return undefined;
  if (isPlainObject(hint) && '$natural' in hint) return 'natural';
  const all = catalog(coll);
  if (typeof hint === 'string') return all.find((i) => i.name === hint) ?? 'natural';
  if (isPlainObject(hint)) return all.find((i) => keyOf(i.spec.key) === keyOf(hint)) ?? 'natural';
  return 'natural';
}

export function chooseAccessPath(coll: Collection | undefined, req: PlanRequest): AccessPath {
  if (!coll) return { kind: 'eof' };
  const hint = hinted(coll, req.hint);
  if (hint === 'natural') return { kind: 'collscan' };
  const sort = sortFields(req.sort);
  if (!hint && !req.skip) {
    const id = simpleIdValue(req.filter);
    if (id.ok) return { kind: 'idhack', value: id.value };
  }
  const preds = predicatesOf(req.filter);
  if (hint) {
    if (hint.unplannable || coll.options.collation !== undefined || hint.spec.collation !== undefined) return { kind: 'collscan' };
    // "Hinted index could not provide a bounded scan, reverting to whole index scan".
    let b = boundsFor(hint, preds);
    if (!b.bounded[0]) b = { bounds: hint.fields.map(() => [ALL_VALUES]), covered: new Set(), bounded: [] };
    const dir = sort ? sortDirection(hint, b.bounds, sort) : undefined;
    return scanOf(hint, b.bounds, b.covered, dir);
  }
  let candidates = catalog(coll).filter((i) => plannable(coll, i));
  // stripUnneededAssignments: an equality on a single-field unique index's field wins outright.
  const uniqueEq = candidates.find((i) => (i.isId || i.spec.unique) && i.fields.length === 1 && (preds.get(i.fields[0]) ?? []).some((p) => p.op === '$eq' && translate(p, !!i.spec.sparse) !== undefined));
  if (uniqueEq) candidates = [uniqueEq];
  let best: { scan: IndexScan; score: number[] } | undefined;
  for (const index of candidates) {
    const b = boundsFor(index, preds);
    if (!b.bounded[0]) continue;
    const dir = sort ? sortDirection(index, b.bounds, sort) : undefined;
    const k = pointPrefix(b.bounds);
    const score = [k, k < index.fields.length && b.bounded[k] ? 1 : 0, dir !== undefined ? 1 : 0, index.isId || index.spec.unique ? 1 : 0, -index.fields.length];
    if (!best || compareScores(score, best.score) > 0) best = { scan: scanOf(index, b.bounds, b.covered, dir), score };
  }
  if (best) return best.scan;
  if (sort) {
    for (const index of candidates) {
      if (index.spec.sparse) continue;
      const bounds = index.fields.map(() => [ALL_VALUES]);
      const dir = sortDirection(index, bounds, sort);
      if (dir !== undefined) return scanOf(index, bounds, new Set(), dir);
    }
  }
  return { kind: 'collscan' };
}

function compareScores(a: number[], b: number[]): number {
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return a[i] - b[i];
  return 0;
}
