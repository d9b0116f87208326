/**
 * The order in which mongod applies an update's modifiers: by path, not by the update document's
 * order.
 *
 * UpdateObjectNode::parseAndMerge puts every modifier's path (all operators together; `$rename`
 * both its source, as a placeholder, and its target) into one tree whose children are a
 * `std::map<std::string, clonable_ptr<UpdateNode>, pathsupport::cmpPathsAndArrayIndexes>`
 * (src/mongo/db/update/update_object_node.h), and UpdateObjectNode::apply walks `_children` in that
 * map's order (update_object_node.cpp: `for (const auto& pair : _children)`). The manual says the
 * same ($set, "Behavior": "Starting in MongoDB 5.0, update operators process document fields with
 * string-based names in lexicographic order. Fields with numeric names are processed in numeric
 * order."). Since the paths of one update never meet (checkPathConflicts), applying them in any
 * order gives the same values; only where a created field is appended differs: a new field is
 * appended to its object (pathsupport::createPathAt pushes back), so the new fields of one object
 * end up after its existing fields, in comparator order. `orderCreatedFields` puts them there after
 * the emulator's updaters ran (mingo's updater, writes.ts fastSetInc, update-arithmetic.ts
 * assignPath, all in document order).
 */
import type { Document } from 'bson';
import { isPlainObject } from './values';

/**
 * Two strings in the order of their UTF-8 bytes (std::string's operator<), without encoding them:
 * the first differing UTF-16 unit decides, except that a surrogate (code point >= 0x10000) ranks
 * above any BMP unit.
 */
export function compareBytes(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x === y) continue;
    const sx = x >= 0xd800 && x <= 0xdfff;
    const sy = y >= 0xd800 && y <= 0xdfff;
    // std::string's operator< compares UTF-8 bytes (char_traits<char>::lt compares as unsigned
    // char): code point order, which UTF-16 order matches except for surrogates.
    if (sx !== sy) return sx ? 1 : -1;
    return x - y;
  }
  return a.length - b.length;
}

function isDigit(c: number): boolean {
  return c >= 48 && c <= 57;
}

/**
 * pathsupport::cmpPathsAndArrayIndexes (src/mongo/db/update/path_support.h) as a three-way compare:
 * names that do not both start with a digit, or a zero-padded one ("0" followed by more), compare as
 * strings (bytes); otherwise the shorter is smaller ("9" < "10"), and equal lengths compare digit by
 * digit then as strings, which for equal lengths is the byte order again.
 */
export function compareFieldNames(a: string, b: string): number {
  if (a === b) return 0;
  const numeric =
    a.length > 0 && b.length > 0 && isDigit(a.charCodeAt(0)) && isDigit(b.charCodeAt(0)) && !(a.charCodeAt(0) === 48 && a.length > 1) && !(b.charCodeAt(0) === 48 && b.length > 1);
  if (numeric && a.length !== b.length) return a.length - b.length;
  return compareBytes(a, b);
}

/** Dotted paths in the tree's walk order: component by component (a path before the paths below it). */
export function comparePaths(a: string, b: string): number {
  if (a === b) return 0;
  const pa = a.split('.');
  const pb = b.split('.');
  const n = Math.min(pa.length, pb.length);
  for (let i = 0; i < n; i++) {
    const c = compareFieldNames(pa[i], pb[i]);
    if (c !== 0) return c;
  }
  return pa.length - pb.length;
}

/** Every path an update modifier touches: each operator's field names, and `$rename`'s targets. */
export function modifierPaths(modifier: Document): string[] {
  const paths: string[] = [];
  for (const [op, spec] of Object.entries(modifier)) {
    if (!isPlainObject(spec)) continue;
    for (const [path, v] of Object.entries(spec)) {
      paths.push(path);
      if (op === '$rename' && typeof v === 'string') paths.push(v);
    }
  }
  return paths;
}

type Tree = Map<string, Tree>;

function buildTree(paths: string[]): Tree {
  const root: Tree = new Map();
  for (const p of paths) {
    let node = root;
    for (const part of p.split('.')) {
      let next = node.get(part);
      if (!next) {
        next = new Map();
        node.set(part, next);
      }
      node = next;
    }
  }
  return root;
}

const hasOwn = (o: object, k: string): boolean => Object.prototype.hasOwnProperty.call(o, k);

function isSorted(keys: string[]): boolean {
  for (let i = 1; i < keys.length; i++) if (compareFieldNames(keys[i - 1], keys[i]) > 0) return false;
  return true;
}

/**
 * `next` (the update's result for `old`) with the fields the update created in each object it
 * reached put after that object's existing fields, in comparator order, as mongod's sorted walk
 * appends them. Containers are copied where something moves (never mutated: they may be shared
 * with `old`). A single path creates at most one field per object, so it needs nothing.
 */
export function orderCreatedFields(old: Document, next: Document, paths: string[]): Document {
  if (paths.length < 2 || next === old) return next;
  return reorder(old, next, buildTree(paths)) as Document;
}

function reorder(old: unknown, next: unknown, tree: Tree): unknown {
  if (Array.isArray(next)) {
    // An array's children are indexes; `$[]` / `$[<id>]` (and an unresolved `$`) reach every element.
    const oldArr = Array.isArray(old) ? old : undefined;
    let out: unknown[] | undefined;
    for (const [name, sub] of tree) {
      if (sub.size === 0) continue;
      const indexes = name.startsWith('$') ? next.keys() : /^(0|[1-9][0-9]*)$/.test(name) ? [Number(name)] : [];
      for (const i of indexes) {
        if (i >= next.length) continue;
        const r = reorder(oldArr?.[i], next[i], sub);
        if (r !== next[i]) {
          out ??= next.slice();
          out[i] = r;
        }
      }
    }
    return out ?? next;
  }
  if (!isPlainObject(next)) return next;
  const oldObj = isPlainObject(old) ? old : undefined;
  let out: Document | undefined;
  for (const [name, sub] of tree) {
    if (sub.size === 0 || !hasOwn(next, name)) continue;
    const r = reorder(oldObj && hasOwn(oldObj, name) ? oldObj[name] : undefined, next[name], sub);
    if (r !== next[name]) {
      out ??= { ...next };
      out[name] = r;
    }
  }
  if (tree.size < 2) return out ?? next;
  const base = out ?? next;
  const keys = Object.keys(base);
  const created = oldObj ? keys.filter((k) => !hasOwn(oldObj, k)) : keys;
  if (created.length < 2 || isSorted(created)) return base;
  const createdSet = new Set(created);
  const rebuilt: Document = {};
  for (const k of keys) if (!createdSet.has(k)) rebuilt[k] = base[k];
  for (const k of created.slice().sort(compareFieldNames)) rebuilt[k] = base[k];
  return rebuilt;
}
