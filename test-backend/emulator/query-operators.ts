/**
 * Query operators where mingo's answer differs from mongod's, replaced in the emulator's mingo
 * operator table (mingo-context.ts):
 *
 *  - `$type` with BSON types mingo does not recognise on the driver's value classes (objectId 7,
 *    binData 5, timestamp 17, regex 11, minKey -1, maxKey 127, ...) and the numeric types of the
 *    emulator's number representation (numbers.ts: int 16, long 18, double 1, decimal 19, "number").
 *    Manual, "$type": matches when the field's value is of the type, or, for an array field, when the
 *    array itself ('array') or any element is of the type.
 *  - `$eq`, `$ne`, `$in`, `$nin`, `$gt`, `$gte`, `$lt`, `$lte`: BSON equality and order (numbers by
 *    value across Int32, Int64, Double and Decimal128, exactly; bson-order.ts), ranges within the
 *    operand's type bracket (manual, "Comparison Query Operators", "Type Bracketing"), null matching
 *    a missing field, an array field matching by any element or as a whole. NaN equals NaN and is
 *    neither greater nor less than anything (ComparisonMatchExpressionBase, expression_leaf.cpp (*)).
 *  - `$mod` and `$size` with operands of any numeric type; `$expr` with mongod's truthiness (every
 *    number but 0 is true, NaN included; Value::coerceToBool, value.cpp (*)).
 *  - `$all` on a field that is not an array: manual, "$all": "{ tags: { $all: [ 'ssl', 'security' ] } }
 *    is equivalent to { $and: [ { tags: 'ssl' }, { tags: 'security' } ] }", so a scalar field equal to
 *    every listed value matches; an empty list matches nothing.
 *  - `$bitsAllSet`, `$bitsAnySet`, `$bitsAllClear`, `$bitsAnyClear` on BinData fields: manual,
 *    "Bitwise Query Operators": BinData is tested as a little-endian bit array (position 0 is the
 *    least significant bit of the first byte); positions past the end are clear. Values that are
 *    neither integral numbers nor BinData never match (mingo matched strings and missing fields).
 */
import type { Binary, Document } from 'bson';
import { canonicalRank, compareValues } from './bson-order';
import { MongoCommandError, unsupported } from './errors';
import { isNumeric, numKind, toBigInt, toNumber } from './numbers';
import { isPlainObject, keyOf } from './values';

/* eslint-disable @typescript-eslint/no-require-imports */
const { resolve } = require('mingo/util') as { resolve: (obj: unknown, selector: string, opts?: { unwrapArray?: boolean }) => unknown };
const mingoQuery = require('mingo/operators/query') as Record<string, QueryOp>;
/* eslint-enable @typescript-eslint/no-require-imports */

type QueryOp = (selector: string, value: unknown, options: unknown) => (obj: unknown) => boolean;

const TYPE_CODES: Record<string, number> = {
  double: 1, string: 2, object: 3, array: 4, binData: 5, undefined: 6, objectId: 7, bool: 8, date: 9, null: 10,
  regex: 11, dbPointer: 12, javascript: 13, symbol: 14, int: 16, timestamp: 17, long: 18, decimal: 19, minKey: -1, maxKey: 127,
};

function typeCode(v: unknown): number {
  if (v === null) return 10;
  if (v === undefined) return 6;
  if (typeof v === 'string') return 2;
  if (typeof v === 'boolean') return 8;
  const k = numKind(v);
  if (k) return k === 'int' ? 16 : k === 'long' ? 18 : k === 'double' ? 1 : 19;
  if (typeof v === 'bigint') return 18;
  if (Array.isArray(v)) return 4;
  if (v instanceof Date) return 9;
  if (v instanceof RegExp) return 11;
  if (ArrayBuffer.isView(v)) return 5;
  switch ((v as { _bsontype?: string })._bsontype) {
    case 'ObjectId': return 7;
    case 'Binary': return 5;
    case 'Timestamp': return 17;
    case 'BSONRegExp': return 11;
    case 'MinKey': return -1;
    case 'MaxKey': return 127;
    case 'Code': return 13;
    case 'BSONSymbol': return 14;
    case 'DBRef': return 3;
    case undefined: return 3;
    default: return 0;
  }
}

function matchesType(v: unknown, wanted: unknown[]): boolean {
  const code = typeCode(v);
  return wanted.some((w) => {
    if (w === 'number') return code === 1 || code === 16 || code === 18 || code === 19;
    const c = typeof w === 'string' ? TYPE_CODES[w] : toNumber(w);
    return c === code;
  });
}

const $type: QueryOp = (selector, value, options) => {
  const wanted = Array.isArray(value) ? value : [value];
  if (wanted.some((w) => typeof w === 'string' && w !== 'number' && !(w in TYPE_CODES))) return mingoQuery.$type(selector, value, options);
  return (obj) => {
    const v = resolve(obj, selector, { unwrapArray: true });
    if (v === undefined) return false;
    if (Array.isArray(v)) return matchesType(v, wanted) || v.some((el) => matchesType(el, wanted));
    return matchesType(v, wanted);
  };
};

const $all: QueryOp = (selector, value, options) => {
  const original = mingoQuery.$all(selector, value, options);
  const list = Array.isArray(value) ? value : [];
  return (obj) => {
    const v = resolve(obj, selector, { unwrapArray: true });
    if (Array.isArray(v) || v === undefined) return original(obj);
    if (!list.length) return false;
    return list.every((e) => {
      if (e instanceof RegExp) return typeof v === 'string' && e.test(v);
      if (isPlainObject(e) && '$elemMatch' in e) return false;
      return equal(e, v);
    });
  };
};

function bytesOf(v: unknown): Uint8Array | undefined {
  if (ArrayBuffer.isView(v)) return new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
  if ((v as { _bsontype?: string } | null)?._bsontype === 'Binary') return (v as Binary).buffer.subarray(0, (v as Binary).position);
  return undefined;
}

function positionsOf(mask: unknown): number[] | undefined {
  if (Array.isArray(mask)) return mask.map(toNumber);
  const bytes = bytesOf(mask);
  const out: number[] = [];
  if (bytes) {
    bytes.forEach((b, i) => {
      for (let bit = 0; bit < 8; bit++) if (b & (1 << bit)) out.push(i * 8 + bit);
    });
    return out;
  }
  const k = numKind(mask);
  if ((k === 'int' || k === 'long' || k === 'double') && Number.isInteger(toNumber(mask)) && toNumber(mask) >= 0) {
    const m = k === 'long' ? toBigInt(mask) : BigInt(toNumber(mask));
    for (let bit = 0n; m >> bit > 0n; bit++) if ((m >> bit) & 1n) out.push(Number(bit));
    return out;
  }
  return undefined;
}

function bitsOp(name: string, test: (set: boolean[]) => boolean): QueryOp {
  return (selector, value, options) => {
    const original = mingoQuery[name](selector, value, options);
    const positions = positionsOf(value);
    return (obj) => {
      const v = resolve(obj, selector, { unwrapArray: true });
      const bytes = bytesOf(v);
      if (!positions) return original(obj);
      if (bytes) return test(positions.map((p) => p >> 3 < bytes.length && (bytes[p >> 3] & (1 << (p & 7))) !== 0));
      // Only integral numbers (as 64-bit two's complement, sign-extended beyond bit 63) and BinData
      // can match a bitwise operator ("Bitwise Query Operators").
      const k = numKind(v);
      if (!k || k === 'decimal') return false;
      let b: bigint;
      if (k === 'int' || k === 'long') b = toBigInt(v);
      else {
        const x = toNumber(v);
        if (!Number.isInteger(x) || Math.abs(x) >= 2 ** 63) return false;
        b = BigInt(x);
      }
      return test(positions.map((p) => ((b >> BigInt(p)) & 1n) === 1n));
    };
  };
}

/** A query-language value: a missing field compares as null. */
function q(v: unknown): unknown {
  return v === undefined ? null : v;
}

function isNaNValue(v: unknown): boolean {
  const k = numKind(v);
  if (!k || k === 'int' || k === 'long') return false;
  if (k === 'decimal') return (v as { toString(): string }).toString().endsWith('NaN');
  return Number.isNaN(toNumber(v));
}

function equal(a: unknown, b: unknown): boolean {
  return keyOf(q(a)) === keyOf(q(b));
}

/** The values a query condition on `selector` looks at: the value, or an array's elements (and, flattened, nested paths). */
function resolved(obj: unknown, selector: string): unknown {
  return resolve(obj, selector, { unwrapArray: true });
}

function depthOf(selector: string): number {
  let depth = 0;
  for (let i = selector.indexOf('.'); i !== -1; i = selector.indexOf('.', i + 1)) depth++;
  return depth;
}

function eqPredicate(selector: string, value: unknown): (obj: unknown) => boolean {
  const depth = depthOf(selector);
  return (obj) => {
    const a = resolved(obj, selector);
    if (equal(a, value)) return true;
    if (!Array.isArray(a)) return false;
    if (a.some((x) => equal(x, value))) return true;
    return depth > 0 && flatten(a, depth).some((x) => equal(x, value));
  };
}

function flatten(a: unknown[], depth: number): unknown[] {
  let out = a;
  for (let i = 0; i < depth; i++) out = out.flatMap((x) => (Array.isArray(x) ? x : [x]));
  return out;
}

const $eq: QueryOp = (selector, value) => eqPredicate(selector, value);
const $ne: QueryOp = (selector, value) => {
  const eq = eqPredicate(selector, value);
  return (obj) => !eq(obj);
};

function rangeOp(test: (c: number) => boolean, acceptsEqual: boolean): QueryOp {
  return (selector, value) => {
    const b = q(value);
    const rank = canonicalRank(b);
    const bNaN = isNaNValue(b);
    const unbounded = rank === -1 || rank === 127; // MinKey / MaxKey compare with every type
    const matches = (x: unknown): boolean => {
      const v = q(x);
      if (!unbounded && canonicalRank(v) !== rank) return false;
      if (bNaN || isNaNValue(v)) return acceptsEqual && bNaN && isNaNValue(v);
      return test(compareValues(v, b));
    };
    return (obj) => {
      const a = resolved(obj, selector);
      if (!Array.isArray(a)) return matches(a);
      if (a.some(matches)) return true;
      return Array.isArray(value) && matches(a);
    };
  };
}

function inPredicate(selector: string, list: unknown): (obj: unknown) => boolean {
  if (!Array.isArray(list)) throw new MongoCommandError(2, '$in needs an array');
  const keys = new Set(list.filter((x) => !(x instanceof RegExp)).map((x) => keyOf(q(x))));
  const patterns = list.filter((x): x is RegExp => x instanceof RegExp);
  const one = (x: unknown): boolean => keys.has(keyOf(q(x))) || (typeof x === 'string' && patterns.some((re) => re.test(x)));
  return (obj) => {
    const a = resolved(obj, selector);
    if (one(a)) return true;
    return Array.isArray(a) && a.some(one);
  };
}

const $in: QueryOp = (selector, value) => inPredicate(selector, value);
const $nin: QueryOp = (selector, value) => {
  const p = inPredicate(selector, value);
  return (obj) => !p(obj);
};

/** `$mod: [divisor, remainder]` on numbers of any type (the value's and the operands' numeric values). */
const $mod: QueryOp = (selector, value, options) => {
  if (!Array.isArray(value) || value.length !== 2 || !value.every(isNumeric)) return mingoQuery.$mod(selector, value, options);
  const [d, r] = value.map(toNumber);
  if (!Number.isSafeInteger(d) || !Number.isSafeInteger(r)) throw unsupported('$mod with a divisor or remainder that is not an integer of at most 53 bits');
  return (obj) => {
    const a = resolved(obj, selector);
    return (Array.isArray(a) ? a : [a]).some((x) => {
      if (!isNumeric(x)) return false;
      const n = toNumber(x);
      if (!Number.isFinite(n)) return false;
      const t = Math.trunc(n);
      if (!Number.isSafeInteger(t)) throw unsupported('$mod on a value beyond 53 bits');
      return t % d === r;
    });
  };
};

const $size: QueryOp = (selector, value, options) => {
  if (!isNumeric(value)) return mingoQuery.$size(selector, value, options);
  const n = toNumber(value);
  return (obj) => {
    const a = resolved(obj, selector);
    return Array.isArray(a) && a.length === n;
  };
};

let evaluateExpr: (doc: unknown, expr: unknown, options: unknown) => unknown = () => {
  throw new Error('query-operators: evaluateExpr not wired');
};

/** mingo-context.ts wires its typed expression evaluator in. */
export function setExpressionEvaluator(f: (doc: unknown, expr: unknown, options: unknown) => unknown): void {
  evaluateExpr = f;
}

/** Value::coerceToBool: false, null, missing and numeric zero are false; everything else (NaN, "", [], {}) is true. */
export function bsonTruthy(v: unknown): boolean {
  if (v === undefined || v === null || v === false) return false;
  if (isNumeric(v)) {
    if (isNaNValue(v)) return true;
    return compareValues(v, 0) !== 0;
  }
  return true;
}

const $expr: QueryOp = (_selector, value, options) => (obj) => bsonTruthy(evaluateExpr(obj, value, options));

const DBREF_FIELDS = new Set(['$ref', '$id', '$db']);

/**
 * `$elemMatch` whose criteria name DBRef fields (`$ref`, `$id`, `$db`): mongod reads those as field
 * names, not operators (manual, "Database References"; Mongoose's test "casts $elemMatch with dbrefs
 * (gh-8577)" passes on mongod). mingo took them for unknown operators. Equality on the DBRef fields,
 * the other criteria as a query on the element.
 */
const $elemMatch: QueryOp = (selector, value, options) => {
  // The driver decodes { $ref, $id[, $db] } as a DBRef object: same rule, on its parts.
  const ref = value as { _bsontype?: string; collection?: string; oid?: unknown; db?: string } | null;
  if (ref?._bsontype === 'DBRef') {
    return (obj) => {
      const v = resolve(obj, selector, { unwrapArray: true });
      if (!Array.isArray(v)) return false;
      return v.some((el) => {
        const e = el as typeof ref;
        return e?._bsontype === 'DBRef' && e.collection === ref.collection && compareValues(e.oid, ref.oid) === 0 && canonicalRank(e.oid) === canonicalRank(ref.oid) && (ref.db === undefined || e.db === ref.db);
      });
    };
  }
  if (!isPlainObject(value) || !Object.keys(value).some((k) => DBREF_FIELDS.has(k))) return mingoQuery.$elemMatch(selector, value, options);
  const refs = Object.entries(value).filter(([k]) => DBREF_FIELDS.has(k));
  const rest = Object.fromEntries(Object.entries(value).filter(([k]) => !DBREF_FIELDS.has(k)));
  if (refs.some(([, v]) => isPlainObject(v) && Object.keys(v).some((k) => k.startsWith('$')))) {
    return mingoQuery.$elemMatch(selector, value, options);
  }
  const restQuery = Object.keys(rest).length ? makeQueryForElements(rest) : undefined;
  return (obj) => {
    const v = resolve(obj, selector, { unwrapArray: true });
    if (!Array.isArray(v)) return false;
    return v.some((el) => {
      const d = asFields(el);
      return !!d && refs.every(([k, x]) => compareValues(d[k], x) === 0 && canonicalRank(d[k]) === canonicalRank(x)) && (!restQuery || restQuery.test(d));
    });
  };
};

/** An element as a plain document; a decoded DBRef exposes its $ref/$id/$db and extra fields. */
function asFields(el: unknown): Document | undefined {
  const r = el as { _bsontype?: string; collection?: string; oid?: unknown; db?: string; fields?: Document } | null;
  if (r?._bsontype === 'DBRef') return { $ref: r.collection, $id: r.oid, ...(r.db !== undefined ? { $db: r.db } : {}), ...(r.fields ?? {}) };
  return isPlainObject(el) ? el : undefined;
}

let makeQueryForElements: (filter: Document) => { test(doc: unknown): boolean } = () => {
  throw new Error('query-operators: makeQueryForElements not wired');
};

/** mingo-context.ts wires its query factory in (avoids an import cycle). */
export function setElementQueryFactory(f: (filter: Document) => { test(doc: unknown): boolean }): void {
  makeQueryForElements = f;
}

export const QUERY_OVERRIDES: Record<string, QueryOp> = {
  $elemMatch,
  $eq,
  $ne,
  $in,
  $nin,
  $mod,
  $size,
  $expr,
  $lt: rangeOp((c) => c < 0, false),
  $lte: rangeOp((c) => c <= 0, true),
  $gt: rangeOp((c) => c > 0, false),
  $gte: rangeOp((c) => c >= 0, true),
  $type,
  $all,
  $bitsAllSet: bitsOp('$bitsAllSet', (s) => s.every(Boolean)),
  $bitsAnySet: bitsOp('$bitsAnySet', (s) => s.some(Boolean)),
  $bitsAllClear: bitsOp('$bitsAllClear', (s) => s.every((x) => !x)),
  $bitsAnyClear: bitsOp('$bitsAnyClear', (s) => s.some((x) => !x)),
};

export type { Document };
