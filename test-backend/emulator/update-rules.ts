/**
 * Update-modifier rules applied before mingo's updater runs, where mingo's answer differs from
 * mongod's.
 *
 *  - `$set: { _id: <the same value> }` is allowed: only a changed _id is ImmutableField (the
 *    immutability check compares the values; manual, "Field Update Operators" › _id: "you cannot
 *    update the value of the _id field").
 *  - The positional `$` resolves to the first array element the query matched (manual, "$
 *    (update)"), once for all paths of the update, so `'arr.$.a'` and `'arr.$.b'` are two different
 *    fields and do not conflict. The emulator computes the index and substitutes it; the array's
 *    conditions may sit inside `$and` (see andConditions).
 *  - `$push` onto a field that holds no array fails with BadValue "The field '<path>' must be an
 *    array but is of type <type> in document {_id: <id>}" (src/mongo/db/update/push_node_test.cpp).
 *  - `$pull` with a condition made of `$or`/`$and`/`$nor` removes the elements the condition matches,
 *    each element tested as a document (manual, "$pull": "If the specified <value> to remove is a
 *    document, $pull removes only the elements in the array that have the exact same fields and
 *    values"/"conditions" — query operators apply to each element).
 *  - A path that would need to create a field inside an array by name, or inside a scalar or null,
 *    fails with PathNotViable (see pathNotViable below).
 */
import type { Document } from 'bson';
import { Codes, MongoCommandError } from './errors';
import { makeQuery } from './mingo-context';
import { formatValue, isPlainObject, valuesEqual } from './values';
import { comparePaths } from './update-order';

const CREATING_OPS = new Set(['$set', '$setOnInsert', '$inc', '$mul', '$min', '$max', '$push', '$addToSet', '$currentDate']);

export function bsonTypeName(v: unknown): string {
  if (v === null) return 'null';
  if (typeof v === 'string') return 'string';
  if (typeof v === 'boolean') return 'bool';
  if (typeof v === 'number') return Number.isInteger(v) && Math.abs(v) < 2 ** 31 ? 'int' : 'double';
  if (Array.isArray(v)) return 'array';
  if (v instanceof Date) return 'date';
  if (v instanceof RegExp) return 'regex';
  switch ((v as { _bsontype?: string })._bsontype) {
    case 'ObjectId': return 'objectId';
    case 'Binary': return 'binData';
    case 'Timestamp': return 'timestamp';
    case 'Long': return 'long';
    case 'Int32': return 'int';
    case 'Double': return 'double';
    case 'Decimal128': return 'decimal';
    default: return 'object';
  }
}

function valueAt(doc: Document, parts: string[]): { value: unknown; present: boolean } {
  let cur: unknown = doc;
  for (const p of parts) {
    if (Array.isArray(cur) && /^\d+$/.test(p)) cur = cur[Number(p)];
    else if (isPlainObject(cur) && p in cur) cur = cur[p];
    else return { value: undefined, present: false };
  }
  return { value: cur, present: true };
}

/** True when `path` leads through documents only and its last field is absent. */
function renameSourceAbsent(doc: Document, path: string): boolean {
  let cur: unknown = doc;
  for (const p of path.split('.')) {
    if (!isPlainObject(cur)) return false;
    if (!(p in cur)) return true;
    cur = cur[p];
  }
  return false;
}

/**
 * The PathNotViable error of a creating modifier (`$set`, `$inc`, `$push`...) whose path cannot be
 * created in `doc`, or undefined. ModifierNode::applyToNonexistentElement creates the missing part of
 * the path under the deepest existing element with pathsupport::createPathAt
 * (src/mongo/db/update/path_support.cpp, modifier_node.cpp): an element that is neither a document
 * nor an array (null included), or an array reached with a field name that is not an index, fails
 * with PathNotViable (28) "Cannot create field '<first missing part>' in element {<element>}", the
 * element printed by BSONElement::toString ("a: 1", "0: 1" for an array element,
 * "eatenBy: [ { name: \"alice\" } ]").
 */
function pathNotViable(doc: Document, path: string): MongoCommandError | undefined {
  const parts = path.split('.');
  let cur: unknown = doc;
  let name = '';
  for (let i = 0; i < parts.length; i++) {
    const p = parts[i];
    const fail = (): MongoCommandError => new MongoCommandError(Codes.PathNotViable, `Cannot create field '${p}' in element {${name}: ${formatValue(cur)}}`);
    if (Array.isArray(cur)) {
      if (!/^\d+$/.test(p)) return fail();
      const next = cur[Number(p)];
      if (next === undefined) return undefined; // created (the array is padded with nulls)
      cur = next;
    } else if (isPlainObject(cur)) {
      if (cur[p] === undefined) return undefined; // created
      cur = cur[p];
    } else {
      return fail();
    }
    name = p;
  }
  return undefined;
}

/**
 * The field conditions of a filter as the update stage sees them when it asks for the matched array
 * position: the top level and, through `$and` (at any depth), its children's — UpdateStage re-matches
 * the document with `matchDetails.requestElemMatchKey()` and AndMatchExpression::matches hands the
 * details to each child (src/mongo/db/exec/update_stage.cpp; AndMatchExpression::matches in
 * src/mongo/db/matcher/expression_tree.cpp). Conditions under `$or`/`$nor` are not searched (what
 * mongod records there is not sourced here; such an update stays refused).
 */
function andConditions(filter: Document): Array<[string, unknown]> {
  const out: Array<[string, unknown]> = [];
  for (const [k, v] of Object.entries(filter)) {
    if (k === '$and' && Array.isArray(v)) for (const sub of v) if (isPlainObject(sub)) out.push(...andConditions(sub));
    if (!k.startsWith('$')) out.push([k, v]);
  }
  return out;
}

/** Index of the first element of the array at `path` that satisfies the filter's conditions on it. */
function positionalIndex(doc: Document, arrayPath: string, filter: Document): number | undefined {
  const arr = valueAt(doc, arrayPath.split('.')).value;
  if (!Array.isArray(arr)) return undefined;
  const conds = andConditions(filter).filter(([k]) => k === arrayPath || k.startsWith(`${arrayPath}.`));
  if (!conds.length) return undefined;
  for (let i = 0; i < arr.length; i++) {
    const probe: Document = {};
    let cur = probe;
    const parts = arrayPath.split('.');
    for (let j = 0; j < parts.length - 1; j++) cur = cur[parts[j]] = {};
    cur[parts[parts.length - 1]] = [arr[i]];
    if (conds.every(([k, c]) => makeQuery({ [k]: c }).test(probe))) return i;
  }
  return undefined;
}

/** Rewrites `modifier` for `old` (see the module comment); returns a new modifier document. */
export function prepareModifier(old: Document, modifier: Document, filter: Document | undefined, inserting: boolean): Document {
  const out: Document = {};
  // Paths apply in field-name order (update-order.ts): the first non-viable one in that order fails.
  const notViable: Array<[string, MongoCommandError]> = [];
  for (const [op, spec] of Object.entries(modifier)) {
    if (!isPlainObject(spec)) {
      out[op] = spec;
      continue;
    }
    const next: Document = {};
    for (const [original, v] of Object.entries(spec)) {
      let path = original;
      if (path === '_id' && (op === '$set' || op === '$setOnInsert') && old._id !== undefined && valuesEqual(v, old._id)) continue;
      if (!inserting && filter && /(^|\.)\$(\.|$)/.test(path)) {
        const arrayPath = path.slice(0, path.search(/(^|\.)\$(\.|$)/));
        const i = positionalIndex(old, arrayPath, filter);
        if (i !== undefined) path = path.replace(/(^|\.)\$(\.|$)/, `$1${i}$2`);
      }
      // RenameNode::apply (src/mongo/db/update/rename_node.cpp): a source that does not exist makes
      // the rename a no-op, whatever its target (`_id` included); only a source path through a
      // scalar fails (PathNotViable), so that case is left to the general path below.
      if (op === '$rename' && !path.includes('$') && renameSourceAbsent(old, path)) continue;
      if (CREATING_OPS.has(op) && !path.includes('$')) {
        const err = pathNotViable(old, path);
        if (err) notViable.push([path, err]);
      }
      if (op === '$push' && !path.includes('$')) {
        const at = valueAt(old, path.split('.'));
        if (at.present && !Array.isArray(at.value)) {
          throw new MongoCommandError(Codes.BadValue, `The field '${path}' must be an array but is of type ${bsonTypeName(at.value)} in document {_id: ${formatValue(old._id)}}`);
        }
      }
      if (op === '$pull' && isPlainObject(v) && Object.keys(v).some((k) => k === '$or' || k === '$and' || k === '$nor') && !path.includes('$')) {
        const at = valueAt(old, path.split('.'));
        if (Array.isArray(at.value)) {
          const q = makeQuery(v);
          const doomed = at.value.filter((el) => isPlainObject(el) && q.test(el));
          out.$pullAll = { ...(out.$pullAll as Document | undefined), [path]: doomed };
          continue;
        }
      }
      next[path] = v;
    }
    if (Object.keys(next).length) out[op] = { ...(out[op] as Document | undefined), ...next };
  }
  if (notViable.length) throw notViable.sort(([a], [b]) => comparePaths(a, b))[0][1];
  return out;
}
