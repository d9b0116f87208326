/**
 * Loud where unsupported: query features the emulator does not implement are refused with
 * NotImplemented naming the feature, before mingo could answer them differently from mongod
 * (mingo evaluates `$where` functions in-process, rejects strings, and does not know geo operators).
 *
 * Refused: `$where` (JavaScript), `$text` (text search), geo query operators (`$near`,
 * `$nearSphere`, `$geoWithin`, `$geoIntersects`, `$within`, `$box`, `$center`, `$centerSphere`,
 * `$polygon`, `$geometry`), and `$jsonSchema`.
 */
import type { Document } from 'bson';
import { unsupported } from './errors';
import { isPlainObject } from './values';

const TOP_LEVEL: Record<string, string> = {
  $where: '$where (server-side JavaScript)',
  $text: '$text (text search)',
  $jsonSchema: '$jsonSchema (schema validation)',
};
const FIELD_LEVEL: Record<string, string> = {
  $near: '$near (geo)',
  $nearSphere: '$nearSphere (geo)',
  $geoWithin: '$geoWithin (geo)',
  $geoIntersects: '$geoIntersects (geo)',
  $within: '$within (geo)',
  $box: '$box (geo)',
  $center: '$center (geo)',
  $centerSphere: '$centerSphere (geo)',
  $polygon: '$polygon (geo)',
  $geometry: '$geometry (geo)',
  $maxDistance: '$maxDistance (geo)',
};

/** Throws NotImplemented when `filter` uses a feature listed above (at any $and/$or/$nor/$not/$elemMatch depth). */
export function rejectUnsupportedQueryFeatures(filter: unknown): void {
  if (Array.isArray(filter)) {
    for (const f of filter) rejectUnsupportedQueryFeatures(f);
    return;
  }
  if (!isPlainObject(filter)) return;
  for (const [k, v] of Object.entries(filter as Document)) {
    if (k in TOP_LEVEL) throw unsupported(TOP_LEVEL[k]);
    if (k in FIELD_LEVEL) throw unsupported(FIELD_LEVEL[k]);
    if (k === '$expr' || k === '$literal') continue;
    if (isPlainObject(v) || Array.isArray(v)) rejectUnsupportedQueryFeatures(v);
  }
}

/**
 * Field names `__proto__` (as a key or a path segment) are valid on mongod but JavaScript objects,
 * mingo included, treat them as the prototype: the value would silently vanish. Refused instead.
 */
export function rejectProtoKeys(v: unknown): void {
  if (Array.isArray(v)) {
    for (const x of v) rejectProtoKeys(x);
    return;
  }
  if (!isPlainObject(v)) return;
  for (const k of Object.keys(v)) {
    if (k === '__proto__' || k.split('.').includes('__proto__')) throw unsupported("a field named '__proto__'");
    const x = (v as Document)[k];
    if (x !== null && typeof x === 'object') rejectProtoKeys(x);
  }
}
