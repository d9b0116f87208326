/**
 * Index keys as mongod's btree key generator makes them, for the ordered index structures the
 * planner scans (sorted-keys.ts, index-bounds.ts):
 *  - a missing field (or a path through a value that is not a document) is keyed as null
 *    (index_bounds_builder.cpp, the $exists case: "Documents with a missing value are stored *as
 *    if* they were explicitly given the value 'null'");
 *  - an array is keyed once per element ("multikey", manual "Multikey Indexes"), an empty array as
 *    undefined (index_bounds_builder.cpp, the $in case: "Empty arrays are indexed as undefined");
 *  - a compound key is the cartesian product of its fields' keys.
 * Shapes the emulator does not model key for key (an array above the indexed leaf, an array
 * inside an indexed array: mongod keys them by rules the query matcher here does not share) make
 * the key `undefined` ("unplannable"): the index then stops being used for planning (planner.ts
 * falls back to the collection scan, which answers the same).
 *
 * The order of keys is BSON order (bson-order.ts) with fast paths for the common types; entries
 * with equal keys are ordered by record id, as WiredTiger orders an index's (key, RecordId) pairs.
 */
import type { Document, ObjectId } from 'bson';
import { compareValues } from './bson-order';
import { isPlainObject } from './values';

/** The keys one field of a document contributes, and whether the value was an array. */
export interface FieldKeys {
  keys: unknown[];
  array: boolean;
  /** The path is missing (keyed as null; a sparse index leaves out a document missing all its fields). */
  missing: boolean;
}

const MISSING: FieldKeys = Object.freeze({ keys: [null], array: false, missing: true }) as FieldKeys;

/** The key values one path of `doc` contributes; undefined when the shape is not modelled (see header). */
export function fieldKeys(doc: Document, path: string): FieldKeys | undefined {
  let cur: unknown = doc;
  let start = 0;
  for (;;) {
    const dot = path.indexOf('.', start);
    const part = dot === -1 ? path.slice(start) : path.slice(start, dot);
    if (Array.isArray(cur)) return undefined; // an array above the leaf
    if (!isPlainObject(cur)) return MISSING;
    cur = cur[part];
    if (cur === undefined) return MISSING;
    if (dot === -1) break;
    start = dot + 1;
  }
  if (!Array.isArray(cur)) return { keys: [cur], array: false, missing: false };
  if (cur.length === 0) return { keys: [undefined], array: true, missing: false };
  const keys: unknown[] = [];
  for (const el of cur) {
    if (Array.isArray(el)) return undefined; // an array inside the indexed array
    keys.push(el === undefined ? null : el);
  }
  return { keys, array: true, missing: false };
}

/** One entry of an ordered index: the key values (one per index field), the record id, the `_id` key. */
export interface IndexEntry {
  v: unknown[];
  rid: number;
  k: string;
}

function isSurrogate(c: number): boolean {
  return c >= 0xd800 && c <= 0xdfff;
}

/**
 * Strings in UTF-8 byte order (mongod compares strings by their bytes under the simple collation)
 * without encoding them: UTF-16 code-unit order agrees with code-point (so UTF-8) order except
 * where a surrogate (a code point above U+FFFF) meets a unit above it (U+E000..U+FFFF).
 */
export function compareStrings(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    const sx = isSurrogate(x);
    if (sx !== isSurrogate(y)) return sx ? 1 : -1;
    return x < y ? -1 : 1;
  }
  return a.length === b.length ? 0 : a.length < b.length ? -1 : 1;
}

function isObjectId(v: unknown): v is ObjectId {
  return typeof v === 'object' && v !== null && (v as { _bsontype?: string })._bsontype === 'ObjectId';
}

/** BSON order of two key values (bson-order.ts compareValues), quicker for the common types. */
export function compareKeyValues(a: unknown, b: unknown): number {
  if (typeof a === 'string' && typeof b === 'string') return compareStrings(a, b);
  if (typeof a === 'number' && typeof b === 'number' && a === a && b === b) return a < b ? -1 : a > b ? 1 : 0;
  if (isObjectId(a) && isObjectId(b)) {
    const c = Buffer.compare(a.id, b.id);
    return c < 0 ? -1 : c > 0 ? 1 : 0;
  }
  if (a instanceof Date && b instanceof Date) {
    const x = a.getTime();
    const y = b.getTime();
    if (x === x && y === y) return x < y ? -1 : x > y ? 1 : 0;
  }
  return compareValues(a, b);
}

/** Index order: the key values field by field (each in its key pattern's direction), then the record id. */
export function entryComparator(dirs: number[]): (a: IndexEntry, b: IndexEntry) => number {
  return (a, b) => {
    for (let i = 0; i < dirs.length; i++) {
      const c = compareKeyValues(a.v[i], b.v[i]);
      if (c !== 0) return c * dirs[i];
    }
    return a.rid - b.rid;
  };
}
