/**
 * Index bounds as mongod's planner builds them from a query's predicates
 * (IndexBoundsBuilder::translate, src/mongo/db/query/index_bounds_builder.cpp), the ranges of an
 * ordered index they cover, and their explain text (Interval::toString, src/mongo/db/query/interval.cpp).
 *
 * One ordered interval list (OIL) per index field, its intervals ascending and disjoint:
 *  - equality `{f: v}` / `{f: {$eq: v}}`: the point [v, v]; `null`: the points [undefined, undefined]
 *    and [null, null] (makeNullEqualityBounds: "There are two values that could possibly be equal
 *    to null in an index: undefined and null"; 8.0 dropped undefined, the emulator answers as 7.0);
 *  - `$in`: the union of its elements' points (`null` as above);
 *  - `$gt/$gte/$lt/$lte: v`: the range from v to the end of v's type bracket (appendMaxForType /
 *    appendMinForType, src/mongo/bson/bsonobjbuilder.cpp: numbers to inf.0 / from -inf.0, strings
 *    from "" to {} exclusive, ObjectIds from 000.. to fff.., dates from the smallest to the largest
 *    Date, booleans false..true, BinData from the empty one to ObjectId('000..') exclusive,
 *    timestamps from Timestamp(0, 0) to Timestamp::max()); an empty range is dropped ("If the operand to GT is equal to the
 *    upper bound X, the interval (X, X] is invalid and should not be added to the bounds");
 *  - several predicates on one field: the intersection (translateAndIntersect), except on a
 *    multikey field: there only the first is used (QueryPlannerAccess::shouldMergeWithLeaf,
 *    planner_access.cpp: "If the plan enumerator told us that it isn't safe to intersect bounds in
 *    this case, then it must be because we're using a multikey index"), the others stay in the filter;
 *  - a field without a usable predicate: [MinKey, MaxKey].
 * A predicate is left out of the bounds (its field stays [MinKey, MaxKey] unless another predicate
 * bounds it) when its operand is a type the emulator does not bound: regular expressions, arrays,
 * documents, NaN, MinKey/MaxKey, undefined, and the types beyond numbers, strings, ObjectIds, dates,
 * booleans, BinData and timestamps; `null` on a sparse index (QueryPlannerIXSelect::nodeIsSupportedBySparseIndex,
 * planner_ixselect.cpp: "we can't use a sparse index for $eq (or $lte, or $gte) with a null element",
 * nor for a `$in` holding null). Leaving a predicate out only widens the scan: every fetched document is
 * re-checked against the whole filter (query.ts), so answers never depend on the bounds.
 */
import { Binary, MaxKey, MinKey, ObjectId, Timestamp, type Document } from 'bson';
import { canonicalRank } from './bson-order';
import { compareKeyValues, type IndexEntry } from './index-keys';
import { isNumeric, numKind, toNumber } from './numbers';
import { formatValue, isPlainObject } from './values';

export interface Interval {
  lo: unknown;
  loIncl: boolean;
  hi: unknown;
  hiIncl: boolean;
}

/** One field's intervals, ascending and disjoint. */
export type Oil = Interval[];

const MIN_KEY = new MinKey();
const MAX_KEY = new MaxKey();
/**
 * The ends of the Date bracket, shown as mongod's Date_t::min() / max(): below every date an
 * invalid Date (a stored date beyond what a JS Date holds, which BSON order puts first among
 * dates, bson-order.ts), above every date the largest a JS Date holds.
 */
const MIN_DATE = new Date(NaN);
const MAX_DATE = new Date(8_640_000_000_000_000);
const MIN_OID = new ObjectId('000000000000000000000000');
const MAX_OID = new ObjectId('ffffffffffffffffffffffff');
const MIN_BINARY = new Binary(new Uint8Array(0), 0);
const MIN_TIMESTAMP = new Timestamp({ t: 0, i: 0 });
const MAX_TIMESTAMP = new Timestamp({ t: 4294967295, i: 4294967295 });

export const ALL_VALUES: Interval = { lo: MIN_KEY, loIncl: true, hi: MAX_KEY, hiIncl: true };

function point(v: unknown): Interval {
  return { lo: v, loIncl: true, hi: v, hiIncl: true };
}

function isNaNNumber(v: unknown): boolean {
  const k = numKind(v);
  if (k === 'double') return Number.isNaN(toNumber(v));
  if (k === 'decimal') return String(v).endsWith('NaN');
  return false;
}

/** The type bracket of a value the emulator builds bounds for: [min, minIncl, max, maxIncl]; undefined for others. */
function bracketOf(v: unknown): [unknown, boolean, unknown, boolean] | undefined {
  if (isNumeric(v)) return isNaNNumber(v) ? undefined : [-Infinity, true, Infinity, true];
  if (typeof v === 'string') return ['', true, {}, false];
  if (typeof v === 'boolean') return [false, true, true, true];
  if (v instanceof Date) return Number.isNaN(v.getTime()) ? undefined : [MIN_DATE, true, MAX_DATE, true];
  if (v instanceof ObjectId) return [MIN_OID, true, MAX_OID, true];
  // BinData's maximum is the minimum of the next type, ObjectId (appendMaxForType), so excluded.
  const t = (v as { _bsontype?: string } | null)?._bsontype;
  if (t === 'Binary' || (ArrayBuffer.isView(v) && !t)) return [MIN_BINARY, true, MIN_OID, false];
  if (t === 'Timestamp') return [MIN_TIMESTAMP, true, MAX_TIMESTAMP, true];
  return undefined;
}

/** Whether `v` is an operand the emulator turns into an exact point. */
function pointable(v: unknown): boolean {
  return bracketOf(v) !== undefined;
}

function isEmpty(iv: Interval): boolean {
  const c = compareKeyValues(iv.lo, iv.hi);
  return c > 0 || (c === 0 && !(iv.loIncl && iv.hiIncl));
}

function sortUnique(points: unknown[]): Oil {
  const sorted = [...points].sort(compareKeyValues);
  const out: Oil = [];
  for (const p of sorted) if (!out.length || compareKeyValues(out[out.length - 1].lo, p) !== 0) out.push(point(p));
  return out;
}

/** One predicate on an index field. */
export interface Predicate {
  op: '$eq' | '$in' | '$gt' | '$gte' | '$lt' | '$lte';
  value: unknown;
}

/** A predicate's bounds, and whether they are exact (a document in them matches the predicate). */
export interface Translated {
  oil: Oil;
  exact: boolean;
}

/**
 * IndexBoundsBuilder::translate for one predicate, or undefined when the emulator does not bound
 * it (see the header). `sparse`: the index is sparse (no bounds for null).
 */
export function translate(p: Predicate, sparse: boolean): Translated | undefined {
  const v = p.value;
  switch (p.op) {
    case '$eq':
      if (v === null) return sparse ? undefined : { oil: [point(undefined), point(null)], exact: false };
      return pointable(v) ? { oil: [point(v)], exact: true } : undefined;
    case '$in': {
      if (!Array.isArray(v)) return undefined;
      const points: unknown[] = [];
      let exact = true;
      for (const el of v) {
        if (el === null) {
          if (sparse) return undefined;
          points.push(undefined, null);
          exact = false;
        } else if (pointable(el)) points.push(el);
        else return undefined;
      }
      return { oil: sortUnique(points), exact };
    }
    default: {
      const b = bracketOf(v);
      if (!b) return undefined;
      const [min, minIncl, max, maxIncl] = b;
      const iv: Interval =
        p.op === '$gt' ? { lo: v, loIncl: false, hi: max, hiIncl: maxIncl }
        : p.op === '$gte' ? { lo: v, loIncl: true, hi: max, hiIncl: maxIncl }
        : p.op === '$lt' ? { lo: min, loIncl: minIncl, hi: v, hiIncl: false }
        : { lo: min, loIncl: minIncl, hi: v, hiIncl: true };
      return { oil: isEmpty(iv) ? [] : [iv], exact: true };
    }
  }
}

function maxOf(a: unknown, aIncl: boolean, b: unknown, bIncl: boolean): [unknown, boolean] {
  const c = compareKeyValues(a, b);
  return c > 0 ? [a, aIncl] : c < 0 ? [b, bIncl] : [a, aIncl && bIncl];
}

function minOf(a: unknown, aIncl: boolean, b: unknown, bIncl: boolean): [unknown, boolean] {
  const c = compareKeyValues(a, b);
  return c < 0 ? [a, aIncl] : c > 0 ? [b, bIncl] : [a, aIncl && bIncl];
}

/** The intersection of two OILs (IndexBoundsBuilder::intersectize). */
export function intersect(a: Oil, b: Oil): Oil {
  const out: Oil = [];
  for (const x of a) {
    for (const y of b) {
      const [lo, loIncl] = maxOf(x.lo, x.loIncl, y.lo, y.loIncl);
      const [hi, hiIncl] = minOf(x.hi, x.hiIncl, y.hi, y.hiIncl);
      const iv = { lo, loIncl, hi, hiIncl };
      if (!isEmpty(iv)) out.push(iv);
    }
  }
  return out;
}

export function isPointOil(oil: Oil): boolean {
  return oil.every((iv) => iv.loIncl && iv.hiIncl && compareKeyValues(iv.lo, iv.hi) === 0);
}

/** Whether `v` lies in one of the OIL's intervals. */
export function inOil(v: unknown, oil: Oil): boolean {
  for (const iv of oil) {
    const lo = compareKeyValues(v, iv.lo);
    if (lo < 0 || (lo === 0 && !iv.loIncl)) continue;
    const hi = compareKeyValues(v, iv.hi);
    if (hi > 0 || (hi === 0 && !iv.hiIncl)) continue;
    return true;
  }
  return false;
}

/**
 * The top-level predicates of a filter by field: its fields' `$eq`, `$in`, `$gt`, `$gte`, `$lt`,
 * `$lte` conditions (a plain value is `$eq`), also inside a top-level `$and` (mongod flattens
 * nested ANDs before planning, MatchExpression::optimize). Other operators bound nothing.
 */
export function predicatesOf(filter: Document | undefined): Map<string, Predicate[]> {
  const out = new Map<string, Predicate[]>();
  const add = (field: string, p: Predicate) => {
    let list = out.get(field);
    if (!list) out.set(field, (list = []));
    list.push(p);
  };
  const walk = (f: Document) => {
    for (const key of Object.keys(f)) {
      const cond = f[key];
      if (key === '$and' && Array.isArray(cond)) {
        for (const sub of cond) if (isPlainObject(sub)) walk(sub);
        continue;
      }
      if (key.startsWith('$')) continue;
      if (isPlainObject(cond) && Object.keys(cond).some((k) => k.startsWith('$'))) {
        for (const op of Object.keys(cond)) {
          if (op === '$eq' || op === '$in' || op === '$gt' || op === '$gte' || op === '$lt' || op === '$lte') add(key, { op, value: cond[op] });
        }
      } else if (!(cond instanceof RegExp) && !Array.isArray(cond) && !isPlainObject(cond)) {
        add(key, { op: '$eq', value: cond });
      }
    }
  };
  if (filter) walk(filter);
  return out;
}

/**
 * A contiguous stretch of an index in its order: every entry whose first `prefix.length` values
 * equal `prefix` and, when `iv` is given, whose next value lies in `iv`.
 */
export interface ScanRange {
  prefix: unknown[];
  iv?: Interval;
}

/** Most ranges one scan enumerates; beyond that, fewer leading fields are enumerated (the rest are checked per key). */
const MAX_RANGES = 10_000;

/**
 * The ranges covering the bounds, in the index's forward order: the points of the leading fields
 * whose OILs are all points (their cartesian product, each field in its direction), then the
 * intervals of the next field. Keys in the ranges still have to be checked against the bounds of
 * the later fields (inOil). Empty when some field's OIL is empty.
 */
export function scanRanges(bounds: Oil[], dirs: number[]): ScanRange[] {
  if (bounds.some((oil) => oil.length === 0)) return [];
  const ordered = bounds.map((oil, i) => (dirs[i] < 0 ? [...oil].reverse() : oil));
  let k = 0;
  while (k < bounds.length && isPointOil(bounds[k])) k++;
  const count = (n: number) => bounds.slice(0, n).reduce((acc, oil) => acc * oil.length, 1) * (n < bounds.length ? bounds[n].length : 1);
  while (k > 0 && count(k) > MAX_RANGES) k--;
  let prefixes: unknown[][] = [[]];
  for (let i = 0; i < k; i++) {
    const next: unknown[][] = [];
    for (const p of prefixes) for (const iv of ordered[i]) next.push([...p, iv.lo]);
    prefixes = next;
  }
  if (k === bounds.length) return prefixes.map((prefix) => ({ prefix }));
  const out: ScanRange[] = [];
  for (const prefix of prefixes) for (const iv of ordered[k]) out.push({ prefix, iv });
  return out;
}

/** Compares an entry's first values with a prefix, in the index's order. */
function comparePrefix(e: IndexEntry, prefix: unknown[], dirs: number[]): number {
  for (let i = 0; i < prefix.length; i++) {
    const c = compareKeyValues(e.v[i], prefix[i]);
    if (c !== 0) return c * dirs[i];
  }
  return 0;
}

/** The two cuts of the index order around a range (see SortedKeys.range). */
export function rangeCuts(r: ScanRange, dirs: number[]): { beforeStart: (e: IndexEntry) => boolean; afterEnd: (e: IndexEntry) => boolean } {
  const k = r.prefix.length;
  const iv = r.iv;
  const dir = dirs[k];
  return {
    beforeStart: (e) => {
      const c = comparePrefix(e, r.prefix, dirs);
      if (c !== 0 || !iv) return c < 0;
      // The start of the interval in index order: its low end ascending, its high end descending.
      const s = dir > 0 ? compareKeyValues(e.v[k], iv.lo) : -compareKeyValues(e.v[k], iv.hi);
      return s < 0 || (s === 0 && !(dir > 0 ? iv.loIncl : iv.hiIncl));
    },
    afterEnd: (e) => {
      const c = comparePrefix(e, r.prefix, dirs);
      if (c !== 0 || !iv) return c > 0;
      const s = dir > 0 ? compareKeyValues(e.v[k], iv.hi) : -compareKeyValues(e.v[k], iv.lo);
      return s > 0 || (s === 0 && !(dir > 0 ? iv.hiIncl : iv.loIncl));
    },
  };
}

/** A bound as BSONElement::toString(false) prints it (Date_t::min/max for the ends of the Date bracket). */
function boundText(v: unknown): string {
  if (v === undefined) return 'undefined';
  if (v === MIN_DATE) return 'new Date(-9223372036854775808)';
  if (v === MAX_DATE) return 'new Date(9223372036854775807)';
  if (canonicalRank(v) === -1) return 'MinKey';
  if (canonicalRank(v) === 127) return 'MaxKey';
  return formatValue(v);
}

/**
 * The explain form of one field's bounds for a scan in `scanDir` over a key field of direction
 * `keyDir`: the intervals in the order the scan visits them, each written from where the scan
 * enters it (planner_access.cpp alignBounds and QueryPlannerCommon::reverseScans reverse the OIL
 * of a descending field and of a backward scan).
 */
export function oilText(oil: Oil, keyDir: number, scanDir: number): string[] {
  const reversed = keyDir * scanDir < 0;
  const list = reversed ? [...oil].reverse() : oil;
  return list.map((iv) => {
    const [a, aIncl, b, bIncl] = reversed ? [iv.hi, iv.hiIncl, iv.lo, iv.loIncl] : [iv.lo, iv.loIncl, iv.hi, iv.hiIncl];
    return `${aIncl ? '[' : '('}${boundText(a)}, ${boundText(b)}${bIncl ? ']' : ')'}`;
  });
}
