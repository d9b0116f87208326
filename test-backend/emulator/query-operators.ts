/**
 * Query operators where mingo's answer differs from mongod's, replaced in the emulator's mingo
 * operator table (mingo-context.ts):
 *
 *  - `$type` with BSON types mingo does not recognise on the driver's value classes (objectId 7,
 *    binData 5, timestamp 17, regex 11, minKey -1, maxKey 127, ...). Manual, "$type": matches when the
 *    field's value is of the type, or, for an array field, when the array itself ('array') or any
 *    element is of the type. Numeric type names are refused earlier (query.ts), because the emulator
 *    does not keep numbers' BSON types.
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
import { isPlainObject } from './values';

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
  if (typeof v === 'number') return Number.isInteger(v) && Math.abs(v) < 2 ** 31 ? 16 : 1;
  if (typeof v === 'bigint') return 18;
  if (Array.isArray(v)) return 4;
  if (v instanceof Date) return 9;
  if (v instanceof RegExp) return 11;
  if (ArrayBuffer.isView(v)) return 5;
  switch ((v as { _bsontype?: string })._bsontype) {
    case 'ObjectId': return 7;
    case 'Binary': return 5;
    case 'Timestamp': return 17;
    case 'Long': return 18;
    case 'Int32': return 16;
    case 'Double': return 1;
    case 'Decimal128': return 19;
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
    const c = typeof w === 'string' ? TYPE_CODES[w] : Number(w);
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
      return compareValues(e, v) === 0 && (typeCode(e) === typeCode(v) || (typeof e === 'number' && typeof v === 'number'));
    });
  };
};

function bytesOf(v: unknown): Uint8Array | undefined {
  if (ArrayBuffer.isView(v)) return new Uint8Array(v.buffer, v.byteOffset, v.byteLength);
  if ((v as { _bsontype?: string } | null)?._bsontype === 'Binary') return (v as Binary).buffer.subarray(0, (v as Binary).position);
  return undefined;
}

function positionsOf(mask: unknown): number[] | undefined {
  if (Array.isArray(mask)) return mask.map(Number);
  const bytes = bytesOf(mask);
  const out: number[] = [];
  if (bytes) {
    bytes.forEach((b, i) => {
      for (let bit = 0; bit < 8; bit++) if (b & (1 << bit)) out.push(i * 8 + bit);
    });
    return out;
  }
  if (typeof mask === 'number' && Number.isInteger(mask) && mask >= 0) {
    for (let bit = 0; bit < 53; bit++) if (Math.floor(mask / 2 ** bit) % 2 === 1) out.push(bit);
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
      // Only integral numbers and BinData can match a bitwise operator ("Bitwise Query Operators").
      if (!bytes) return (typeof v === 'number' && Number.isInteger(v)) || ['Int32', 'Long'].includes((v as { _bsontype?: string } | null)?._bsontype ?? '') ? original(obj) : false;
      if (!positions) return original(obj);
      return test(positions.map((p) => p >> 3 < bytes.length && (bytes[p >> 3] & (1 << (p & 7))) !== 0));
    };
  };
}

/**
 * `$lt`/`$lte`/`$gt`/`$gte` with a BinData, ObjectId or Timestamp operand: the query language compares
 * only values of the operand's type bracket (manual, "Comparison Query Operators" / "Type
 * Bracketing"), in BSON order (BinData by length, subtype, bytes). mingo did not order BinData.
 */
function rangeOp(name: string, test: (c: number) => boolean): QueryOp {
  return (selector, value, options) => {
    const original = mingoQuery[name](selector, value, options);
    const t = (value as { _bsontype?: string } | null)?._bsontype;
    if (t !== 'Binary' && t !== 'ObjectId' && t !== 'Timestamp' && !ArrayBuffer.isView(value)) return original;
    const rank = canonicalRank(value);
    return (obj) => {
      const v = resolve(obj, selector, { unwrapArray: true });
      const candidates = Array.isArray(v) ? v : [v];
      return candidates.some((x) => canonicalRank(x) === rank && test(compareValues(x, value)));
    };
  };
}

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
  $lt: rangeOp('$lt', (c) => c < 0),
  $lte: rangeOp('$lte', (c) => c <= 0),
  $gt: rangeOp('$gt', (c) => c > 0),
  $gte: rangeOp('$gte', (c) => c >= 0),
  $type,
  $all,
  $bitsAllSet: bitsOp('$bitsAllSet', (s) => s.every(Boolean)),
  $bitsAnySet: bitsOp('$bitsAnySet', (s) => s.some(Boolean)),
  $bitsAllClear: bitsOp('$bitsAllClear', (s) => s.every((x) => !x)),
  $bitsAnyClear: bitsOp('$bitsAnyClear', (s) => s.some((x) => !x)),
};

export type { Document };
