/** Sorting documents by a sort specification, in BSON order (find, update/delete `sort`, the `$sort` stage). */
import type { Document } from 'bson';
import { compareValues } from './bson-order';
import { Codes, MongoCommandError, unsupported } from './errors';
import { isNumeric, toNumber } from './numbers';
import { formatValue, getPath, isPlainObject } from './values';

/**
 * find / findAndModify / update `sort`: documents in the order of their sort keys, compared in BSON
 * order (bson-order.ts). A missing field sorts as null ("The comparison treats a non-existent field
 * as if it were null", manual "Comparison/Sort Order"); an array field sorts by its smallest element
 * ascending and its largest descending (same page, "Arrays"). An empty array's place is not pinned
 * down here from a source, so sorting on one is refused.
 */
export function sortDocs(docs: Document[], sort: Document): Document[] {
  if (!sort || !Object.keys(sort).length) return docs;
  checkSortPattern(sort);
  const specs = Object.entries(sort).map(([path, dir]) => ({ path, dir: sortDirection(dir) }));
  const keyed = docs.map((doc, i) => ({
    doc,
    i,
    keys: specs.map(({ path, dir }) => {
      const v = getPath(doc, path);
      if (!Array.isArray(v)) return v === undefined ? null : v;
      if (!v.length) throw unsupported(`sorting on '${path}' where a document holds an empty array`);
      return v.reduce((best, x) => (compareValues(x, best) * dir < 0 ? x : best));
    }),
  }));
  keyed.sort((a, b) => {
    for (let k = 0; k < specs.length; k++) {
      const c = compareValues(a.keys[k], b.keys[k]) * specs[k].dir;
      if (c) return c;
    }
    return a.i - b.i;
  });
  return keyed.map((x) => x.doc);
}

/** $meta sorts some release accepts (textScore, randVal, geoNearDistance, search and vector scores...). */
const META_SORTS = new Set(['textScore', 'randVal', 'geoNearDistance', 'searchScore', 'vectorSearchScore', 'score', 'searchHighlights', 'searchScoreDetails']);

/** BSONElement::safeNumberLong for a sort direction: truncated toward zero, NaN as 0. */
function sortDirection(v: unknown): number {
  const n = Math.trunc(toNumber(v));
  return Number.isNaN(n) ? 0 : n;
}

/**
 * A sort specification as SortPattern::SortPattern parses it (src/mongo/db/query/sort_pattern.cpp;
 * find, findAndModify and update sorts, the $sort stage): an object value is a $meta sort (17312
 * "$meta is the only expression supported by $sort right now", FailedToParse "Cannot have
 * additional keys in a $meta sort specification", 31138 "Illegal $meta sort: <element>"; the
 * supported ones are not implemented), a value that is not a number 15974 "Illegal key in $sort
 * specification: <element>", a number whose safeNumberLong is neither 1 nor -1 15975 "$sort key
 * ordering must be 1 (for ascending) or -1 (for descending)" (so 1.5 sorts ascending).
 */
export function checkSortPattern(sort: Document): void {
  for (const [path, v] of Object.entries(sort)) {
    if (isPlainObject(v)) {
      const keys = Object.keys(v);
      if (keys[0] !== '$meta') throw new MongoCommandError(17312, '$meta is the only expression supported by $sort right now');
      if (keys.length !== 1) throw new MongoCommandError(Codes.FailedToParse, 'Cannot have additional keys in a $meta sort specification');
      if (typeof v.$meta !== 'string' || !META_SORTS.has(v.$meta)) throw new MongoCommandError(31138, `Illegal $meta sort: $meta: ${formatValue(v.$meta)}`);
      throw unsupported(`sort by ${JSON.stringify(v)} (text score / $meta)`);
    }
    if (!isNumeric(v)) throw new MongoCommandError(15974, `Illegal key in $sort specification: ${path}: ${formatValue(v)}`);
    const dir = sortDirection(v);
    if (dir !== 1 && dir !== -1) throw new MongoCommandError(15975, '$sort key ordering must be 1 (for ascending) or -1 (for descending)');
  }
}
