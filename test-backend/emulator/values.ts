/**
 * BSON value helpers: a canonical string encoding (index keys, O(1) lookups,
 * equality), deep cloning that preserves BSON wrapper types, and the
 * shell-like formatting mongod uses in duplicate-key messages.
 */
import { Binary, Decimal128, Double, Int32, Long, ObjectId, Timestamp, type Document } from 'bson';
import { numericKey, numKind, typedNumericKey } from './numbers';

type BsonTyped = { _bsontype?: string };

export function isPlainObject(v: unknown): v is Document {
  if (v === null || typeof v !== 'object' || Array.isArray(v)) return false;
  if ((v as BsonTyped)._bsontype) return false;
  if (v instanceof Date || v instanceof RegExp || ArrayBuffer.isView(v)) return false;
  return true;
}

/** Canonical encoding of a BSON value; equal values (by MongoDB equality) get equal strings. */
export function keyOf(v: unknown): string {
  return encode(v, false);
}

/**
 * Like keyOf, but equal only for identical values: numbers keep their BSON type (1, 1.0 and
 * NumberLong(1) differ), as mongod's binary comparison does when it decides whether a write changed
 * a document.
 */
export function typedKeyOf(v: unknown): string {
  return encode(v, true);
}

function encode(v: unknown, typed: boolean): string {
  if (v === undefined || v === null) return v === null || !typed ? 'z' : 'u';
  switch (typeof v) {
    case 'string':
      return `s:${v}`;
    case 'number':
      return typed ? typedNumericKey(v) : numericKey(v);
    case 'boolean':
      return v ? 'b:1' : 'b:0';
    case 'bigint':
      return numericKey(Long.fromBigInt(v));
    case 'object':
      break;
    default:
      return `?:${String(v)}`;
  }
  if (Array.isArray(v)) return `[${v.map((x) => encode(x, typed)).join(',')}]`;
  if (v instanceof Date) return `d:${v.getTime()}`;
  if (v instanceof RegExp) return `r:${v.source}/${v.flags}`;
  const t = (v as BsonTyped)._bsontype;
  if (t) {
    switch (t) {
      case 'ObjectId':
        return `o:${(v as ObjectId).toHexString()}`;
      case 'Long':
      case 'Int32':
      case 'Double':
      case 'Decimal128':
        return typed ? typedNumericKey(v) : numericKey(v);
      case 'Timestamp':
        return `t:${(v as Timestamp).toString()}`;
      case 'Binary':
        return `x:${(v as Binary).sub_type}:${Buffer.from((v as Binary).buffer).toString('base64')}`;
      default:
        return `${t}:${JSON.stringify(v)}`;
    }
  }
  if (ArrayBuffer.isView(v)) return `x:0:${Buffer.from(v.buffer, v.byteOffset, v.byteLength).toString('base64')}`;
  // Embedded documents: field order matters for equality in MongoDB.
  const parts: string[] = [];
  for (const k of Object.keys(v)) {
    const val = (v as Document)[k];
    if (val !== undefined) parts.push(`${JSON.stringify(k)}=${encode(val, typed)}`);
  }
  return `{${parts.join(',')}}`;
}

export function valuesEqual(a: unknown, b: unknown): boolean {
  return keyOf(a) === keyOf(b);
}

/** Deep clone; BSON wrapper objects are immutable in practice and shared. */
export function clone<T>(v: T): T {
  if (v === null || typeof v !== 'object') return v;
  if (Array.isArray(v)) return v.map(clone) as T;
  if (v instanceof Date) return new Date(v.getTime()) as T;
  if ((v as BsonTyped)._bsontype || v instanceof RegExp || ArrayBuffer.isView(v)) return v;
  const out: Document = {};
  for (const k of Object.keys(v)) out[k] = clone((v as Document)[k]);
  return out as T;
}

/** Reads a dotted path; for arrays along the path, collects values like MongoDB's index key extraction. */
export function getPath(doc: Document, path: string): unknown {
  let cur: unknown = doc;
  for (const part of path.split('.')) {
    if (cur === null || cur === undefined) return undefined;
    if (Array.isArray(cur) && !/^\d+$/.test(part)) {
      const vals = cur.map((el) => (isPlainObject(el) ? el[part] : undefined)).filter((x) => x !== undefined);
      cur = vals.length ? vals.flat() : undefined;
      continue;
    }
    if (typeof cur !== 'object') return undefined;
    cur = (cur as Document)[part];
  }
  return cur;
}

/** Shell-style rendering used in E11000 messages: { _id: "x" }, { n: 1 }, ObjectId('...'). */
export function formatValue(v: unknown): string {
  if (v === undefined || v === null) return 'null';
  if (typeof v === 'string') return JSON.stringify(v);
  if (typeof v === 'number') return formatDouble(v);
  if (typeof v === 'boolean' || typeof v === 'bigint') return String(v);
  if (v instanceof Date) return `new Date(${v.getTime()})`;
  // BSONObj::toString prints an empty array as [] and an empty document as {}.
  if (Array.isArray(v)) return v.length ? `[ ${v.map(formatValue).join(', ')} ]` : '[]';
  const t = (v as BsonTyped)._bsontype;
  if (t === 'ObjectId') return `ObjectId('${(v as ObjectId).toHexString()}')`;
  if (t === 'Long') return (v as Long).toString();
  if (t === 'Decimal128') return `NumberDecimal("${(v as Decimal128).toString()}")`;
  if (t === 'Int32') return String((v as Int32).valueOf());
  if (t === 'Double') return formatDouble((v as Double).valueOf(), true);
  if (t === 'Timestamp') return `Timestamp(${(v as Timestamp).t}, ${(v as Timestamp).i})`;
  if (t === 'Binary') return `BinData(${(v as Binary).sub_type}, ${Buffer.from((v as Binary).buffer).toString('hex').toUpperCase()})`;
  if (isPlainObject(v)) {
    const keys = Object.keys(v);
    return keys.length ? `{ ${keys.map((k) => `${k}: ${formatValue(v[k])}`).join(', ')} }` : '{}';
  }
  return String(v);
}

/**
 * A number as BSONElement::toString prints it: integers plainly; doubles with up to 16 significant
 * digits and a trailing ".0" when integral (the ".0" as in mongod's messages, e.g. "max: 178.0").
 */
function formatDouble(x: number, isDouble = numKind(x) === 'double'): string {
  if (!isDouble) return String(x);
  if (!Number.isFinite(x)) return Number.isNaN(x) ? 'nan.0' : x > 0 ? 'inf.0' : '-inf.0';
  const s = String(Number(x.toPrecision(16)));
  return /[.e]/.test(s) ? s : `${s}.0`;
}

export function isDate(v: unknown): v is Date {
  return v instanceof Date;
}

export { Long, ObjectId, Timestamp };
