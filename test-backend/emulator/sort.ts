/** Sorting documents by a sort specification, in BSON order (find, update/delete `sort`, the `$sort` stage). */
import type { Document } from 'bson';
import { compareValues } from './bson-order';
import { Codes, MongoCommandError, unsupported } from './errors';
import { isNumeric, toNumber } from './numbers';
import { getPath, isPlainObject } from './values';

/**
 * find / findAndModify / update `sort`: documents in the order of their sort keys, compared in BSON
 * order (bson-order.ts). A missing field sorts as null ("The comparison treats a non-existent field
 * as if it were null", manual "Comparison/Sort Order"); an array field sorts by its smallest element
 * ascending and its largest descending (same page, "Arrays"). An empty array's place is not pinned
 * down here from a source, so sorting on one is refused.
 */
export function sortDocs(docs: Document[], sort: Document): Document[] {
  if (!sort || !Object.keys(sort).length) return docs;
  const specs = Object.entries(sort).map(([path, dir]) => {
    if (isPlainObject(dir)) throw unsupported(`sort by ${JSON.stringify(dir)} (text score / $meta)`);
    const n = isNumeric(dir) ? toNumber(dir) : NaN;
    if (n !== 1 && n !== -1) throw new MongoCommandError(Codes.BadValue, `$sort key ordering must be 1 (for ascending) or -1 (for descending)`);
    return { path, dir: n };
  });
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
