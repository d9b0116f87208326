/**
 * Check mode's narrowing of a sorted single-document write (`findOneAndUpdate(filter, update,
 * { sort })`) to the document its search found FIRST, while that document still sorts where it
 * did: the write is sent narrowed to the found `_id` AND to the found document's sort-key values,
 * so a document whose sort key changed between the search and the write (demoted, promoted, its
 * key removed) matches nothing, and the guard searches again (write-guard.ts, checkThenWrite).
 *
 * The condition is an `$expr` over aggregation field paths (a non-upsert write may carry `$expr`;
 * only upserts refuse it, R1: check mode writes what it found without `upsert`). Each sort path
 * `p` whose value at the search was:
 *  - missing: `{ $eq: [{ $type: '$p' }, 'missing'] }`; null: the same with `'null'` (`$type` tells
 *    them apart, and tells both from an array, which a field path through an array yields);
 *  - any other value v: `{ $eq: ['$p', { $literal: v }] }`, compared as aggregation compares
 *    values (numbers by value, strings under the write's collation, documents and arrays element
 *    by element), which is how the sort compares equal keys under that collation or stricter;
 *    for an array or document value, each prefix of `p` must still be a document, so that a
 *    field path through a new array cannot rebuild an equal array;
 * so the condition holds only while the sort key is unchanged, or stricter (a null that became
 * missing sorts the same and is searched again all the same: one more round, never a wrong write).
 * `{ $literal: v }` keeps the stored value from ever being evaluated (the server's own value,
 * read back, but data all the same).
 *
 * Where that equality cannot be written exactly, there is no condition and the write is narrowed
 * by `_id` alone (README, Limits): a sort the guard cannot read (`$natural`, `{ $meta }`, an
 * unknown form), a path that is no aggregation field path (a component empty, starting with `$`
 * or holding a NUL), an array on the way to the value (the sort key of `a.b` over an array of
 * documents is the least or greatest of its elements), or a value the driver does not decode to
 * exactly what it stores (a JavaScript RegExp, a Buffer, Code, a symbol, a DBRef).
 */
import { mongo } from 'mongoose';

type Document = mongo.Document;

/** The paths `sort` orders by, in order, as the driver reads a sort (formatSort), or undefined when the guard cannot read it. */
export function sortPaths(sort: unknown): string[] | undefined {
  if (sort === undefined || sort === null) return [];
  let entries: [unknown, unknown][];
  if (typeof sort === 'string') entries = [[sort, 1]];
  else if (sort instanceof Map) entries = [...(sort as Map<unknown, unknown>).entries()];
  else if (Array.isArray(sort)) {
    if (sort.length === 2 && typeof sort[0] === 'string' && !Array.isArray(sort[1])) entries = [[sort[0], sort[1]]];
    else if (sort.every((item) => typeof item === 'string')) entries = sort.map((key) => [key, 1]);
    else if (sort.every((item) => Array.isArray(item) && item.length === 2)) entries = sort as [unknown, unknown][];
    else return undefined;
  } else if (typeof sort === 'object' && (Object.getPrototypeOf(sort) === Object.prototype || Object.getPrototypeOf(sort) === null)) {
    entries = Object.entries(sort);
  } else return undefined;
  const paths: string[] = [];
  for (const [key, direction] of entries) {
    if (typeof key !== 'string' || !isFieldPath(key)) return undefined;
    if (direction !== null && typeof direction === 'object') return undefined; // { $meta: ... }
    paths.push(key);
  }
  return paths;
}

/** A path an aggregation field path `'$' + path` reads as that very path. */
function isFieldPath(path: string): boolean {
  if (path === '$natural') return false;
  return path.split('.').every((part) => part.length > 0 && !part.startsWith('$') && !part.includes('\0'));
}

/** The paths whose values decide the order beside `_id` (which the narrowing fixes already, and with it every path under it). */
function keyPaths(paths: string[]): string[] {
  return paths.filter((path) => path !== '_id' && !path.startsWith('_id.'));
}

/** The projection that reads `paths` (a path under another one is read with it: a projection of both collides). */
export function sortProjection(paths: string[]): Document {
  const projection: Document = { _id: 1 };
  const wanted = keyPaths(paths);
  for (const path of wanted) {
    if (wanted.some((other) => other !== path && path.startsWith(`${other}.`))) continue;
    projection[path] = 1;
  }
  return projection;
}

/**
 * The condition that holds while a document's sort key is `found`'s (the document as the search
 * read it with sortProjection), or undefined when it cannot be written exactly (see the module
 * comment); `{}`-free: undefined also when no path beside `_id` orders.
 */
export function sortKeyCondition(found: Document, paths: string[]): Document | undefined {
  const conditions: Document[] = [];
  for (const path of keyPaths(paths)) {
    const parts = path.split('.');
    let value: unknown = found;
    let reached = true;
    for (const part of parts) {
      if (Array.isArray(value)) return undefined;
      if (value === null || typeof value !== 'object' || (value as { _bsontype?: unknown })._bsontype !== undefined || value instanceof Date) {
        reached = false; // a field path through a scalar is missing
        break;
      }
      value = (value as Document)[part];
    }
    const field = `$${path}`;
    if (!reached || value === undefined) conditions.push({ $eq: [{ $type: field }, 'missing'] });
    else if (value === null) conditions.push({ $eq: [{ $type: field }, 'null'] });
    else {
      if (!isExact(value)) return undefined;
      if (Array.isArray(value) || isPlainDocument(value)) {
        for (let i = 1; i < parts.length; i++) conditions.push({ $eq: [{ $type: `$${parts.slice(0, i).join('.')}` }, 'object'] });
      }
      conditions.push({ $eq: [field, { $literal: value }] });
    }
  }
  if (conditions.length === 0) return undefined;
  return { $expr: conditions.length === 1 ? conditions[0] : { $and: conditions } };
}

function isPlainDocument(value: unknown): value is Document {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

/** BSON classes the driver decodes to an object that serializes to the very value stored. */
const EXACT_BSON_TYPES: ReadonlySet<string> = new Set(['ObjectId', 'Decimal128', 'Long', 'Double', 'Int32', 'Timestamp', 'Binary', 'MinKey', 'MaxKey', 'BSONRegExp']);

/** Whether a value read back from the server is sent back as exactly what is stored (see the module comment). */
function isExact(value: unknown): boolean {
  if (value === null) return true;
  switch (typeof value) {
    case 'string':
    case 'boolean':
    case 'number':
    case 'bigint':
      return true;
    case 'object':
      break;
    default:
      return false;
  }
  if (value instanceof Date) return !Number.isNaN(value.getTime());
  if (Array.isArray(value)) return value.every(isExact);
  const type = (value as { _bsontype?: unknown })._bsontype;
  if (typeof type === 'string') return EXACT_BSON_TYPES.has(type);
  if (!isPlainDocument(value)) return false; // a Buffer, a RegExp, a class instance
  return Object.values(value).every(isExact);
}
