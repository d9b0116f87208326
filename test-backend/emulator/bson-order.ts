/**
 * The total order mongod uses to compare BSON values of any types (aggregation comparisons, $sort,
 * $min/$max, index keys).
 *
 * Source: the manual, "Comparison/Sort Order" (reference/bson-type-comparison-order): MinKey <
 * Null < Numbers (ints, longs, doubles, decimals) < Symbol, String < Object < Array < BinData <
 * ObjectId < Boolean < Date < Timestamp < Regular Expression < MaxKey; "The comparison treats a
 * non-existent field as if it were null" for sort, while in aggregation expressions a missing value
 * sorts below null (Value::compare, src/mongo/db/exec/document_value/value.cpp: canonical type of
 * EOO/Undefined is below jstNULL). Numbers compare by value across types. BinData: "MongoDB sorts
 * BinData in the following order: first, the length or size of the data; then, by the BSON one-byte
 * subtype; finally, by the data, performing a byte-by-byte comparison". Objects compare field by
 * field (type, then name, then value), arrays element by element.
 */
import type { Binary, Document } from 'bson';
import { compareNumeric } from './numbers';
import { isPlainObject } from './values';

/** Canonical type ranks (canonicalizeBSONType, src/mongo/bson/bsontypes.h, re-read: missing/Undefined 0, null 5, numbers 10, strings 15, objects 20, arrays 25, BinData 30, ObjectId 35, Boolean 40, Date 45, Timestamp 47, regex 50, Code 60, CodeWScope 65, MinKey -1, MaxKey 127). */
export function canonicalRank(v: unknown): number {
  if (v === undefined) return 0; // missing / undefined (expressions)
  if (v === null) return 5;
  switch (typeof v) {
    case 'number':
    case 'bigint':
      return 10;
    case 'string':
      return 15;
    case 'boolean':
      return 40;
    case 'object':
      break;
    default:
      return 15;
  }
  if (Array.isArray(v)) return 25;
  if (v instanceof Date) return 45;
  if (v instanceof RegExp) return 50;
  if (ArrayBuffer.isView(v)) return 30;
  switch ((v as { _bsontype?: string })._bsontype) {
    case 'MinKey':
      return -1;
    case 'MaxKey':
      return 127;
    case 'Int32':
    case 'Double':
    case 'Long':
    case 'Decimal128':
      return 10;
    case 'BSONSymbol':
      return 15;
    case 'Binary':
      return 30;
    case 'ObjectId':
      return 35;
    case 'Timestamp':
      return 47;
    case 'BSONRegExp':
      return 50;
    case 'DBRef':
      return 20;
    case 'Code':
      // canonicalizeBSONType (src/mongo/bson/bsontypes.h): Code 60, CodeWScope 65.
      return (v as { scope?: unknown }).scope ? 65 : 60;
    case undefined:
      return 20; // embedded document
    default:
      return 100;
  }
}

function cmpNum(a: number, b: number): number {
  // NaN is the smallest number (value.cpp compareDoubles).
  if (Number.isNaN(a)) return Number.isNaN(b) ? 0 : -1;
  if (Number.isNaN(b)) return 1;
  return a < b ? -1 : a > b ? 1 : 0;
}

function cmpBytes(a: Uint8Array, b: Uint8Array): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) if (a[i] !== b[i]) return a[i] < b[i] ? -1 : 1;
  return a.length - b.length;
}

function bytesOf(v: unknown): { sub: number; bytes: Uint8Array } {
  if (ArrayBuffer.isView(v)) return { sub: 0, bytes: new Uint8Array(v.buffer, v.byteOffset, v.byteLength) };
  const b = v as Binary;
  return { sub: b.sub_type, bytes: b.buffer.subarray(0, b.position) };
}

function sign(n: number): number {
  return n < 0 ? -1 : n > 0 ? 1 : 0;
}

/** Compares two BSON values in mongod's total order; -1, 0 or 1. */
export function compareValues(a: unknown, b: unknown): number {
  const ra = canonicalRank(a);
  const rb = canonicalRank(b);
  if (ra !== rb) return ra < rb ? -1 : 1;
  switch (ra) {
    case 0:
    case 5:
    case -1:
    case 127:
      return 0;
    case 10:
      return compareNumeric(a, b);
    case 15: {
      const x = String(typeof a === 'string' ? a : (a as { valueOf(): unknown }).valueOf());
      const y = String(typeof b === 'string' ? b : (b as { valueOf(): unknown }).valueOf());
      return sign(Buffer.compare(Buffer.from(x, 'utf8'), Buffer.from(y, 'utf8')));
    }
    case 20:
      return compareDocs(a as Document, b as Document);
    case 25: {
      const x = a as unknown[];
      const y = b as unknown[];
      for (let i = 0; i < Math.min(x.length, y.length); i++) {
        const c = compareValues(x[i], y[i]);
        if (c) return c;
      }
      return sign(x.length - y.length);
    }
    case 30: {
      const x = bytesOf(a);
      const y = bytesOf(b);
      if (x.bytes.length !== y.bytes.length) return x.bytes.length < y.bytes.length ? -1 : 1;
      if (x.sub !== y.sub) return x.sub < y.sub ? -1 : 1;
      return sign(cmpBytes(x.bytes, y.bytes));
    }
    case 35:
      return sign(Buffer.compare(Buffer.from((a as { id: Uint8Array }).id), Buffer.from((b as { id: Uint8Array }).id)));
    case 40:
      return a === b ? 0 : a ? 1 : -1;
    case 45:
      return cmpNum((a as Date).getTime(), (b as Date).getTime());
    case 47: {
      const x = a as { t: number; i: number };
      const y = b as { t: number; i: number };
      return x.t !== y.t ? (x.t < y.t ? -1 : 1) : x.i !== y.i ? (x.i < y.i ? -1 : 1) : 0;
    }
    case 50: {
      const x = a as { source?: string; pattern?: string; flags?: string; options?: string };
      const y = b as { source?: string; pattern?: string; flags?: string; options?: string };
      const c = sign(String(x.source ?? x.pattern).localeCompare(String(y.source ?? y.pattern)));
      return c || sign(String(x.flags ?? x.options).localeCompare(String(y.flags ?? y.options)));
    }
    default:
      return 0;
  }
}

function compareDocs(a: Document, b: Document): number {
  const ka = Object.keys(a).filter((k) => a[k] !== undefined);
  const kb = Object.keys(b).filter((k) => b[k] !== undefined);
  for (let i = 0; i < Math.min(ka.length, kb.length); i++) {
    const ta = canonicalRank(a[ka[i]]);
    const tb = canonicalRank(b[kb[i]]);
    if (ta !== tb) return ta < tb ? -1 : 1;
    const n = sign(Buffer.compare(Buffer.from(ka[i]), Buffer.from(kb[i])));
    if (n) return n;
    const c = compareValues(a[ka[i]], b[kb[i]]);
    if (c) return c;
  }
  return sign(ka.length - kb.length);
}

export function isDocument(v: unknown): v is Document {
  return isPlainObject(v);
}
