/**
 * find / findAndModify projections made of field inclusions and exclusions, `$slice`, `$elemMatch`
 * and the positional `<array>.$`, computed as mongod computes them; projections holding aggregation
 * expressions go to mingo's $project (projectionSupportsMingo below decides).
 *
 * Sources (manual, "Projection" / db.collection.find() "Projection"; projection_ast + projection
 * executor in src/mongo/db/exec/projection_executor*.cpp):
 *  - an inclusion projection returns the included fields in the order they have in the document,
 *    `_id` included unless excluded; an exclusion projection removes the named fields;
 *  - a dotted path projects inside embedded documents, and inside arrays of embedded documents
 *    element by element (non-document elements are dropped by an inclusion);
 *  - `{ f: { $slice: n } }` returns the first n elements (last -n for negative n) and
 *    `{ $slice: [skip, n] }` a window; alone it does not turn the projection into an inclusion;
 *  - `{ f: { $elemMatch: cond } }` returns `f` holding only the first matching element, or no `f`
 *    when none matches;
 *  - `{ 'f.$': 1 }` returns `f` holding the first element that matched the query's condition on `f`.
 */
import type { Document } from 'bson';
import { Codes, MongoCommandError, unsupported } from './errors';
import { makeQuery } from './mingo-context';
import { clone, formatValue, isPlainObject } from './values';

type Spec =
  | { kind: 'include' }
  | { kind: 'exclude' }
  | { kind: 'slice'; skip: number; limit: number | undefined; neg: boolean }
  | { kind: 'elemMatch'; cond: Document }
  | { kind: 'positional' };

function isFlag(v: unknown): boolean {
  return typeof v === 'boolean' || typeof v === 'number' || (isPlainObject(v) === false && (v as { _bsontype?: string })?._bsontype !== undefined && ['Int32', 'Double', 'Long'].includes((v as { _bsontype: string })._bsontype));
}

function truthy(v: unknown): boolean {
  if (typeof v === 'boolean') return v;
  return Number((v as { valueOf(): unknown }).valueOf()) !== 0;
}

/** Whether the projection is one this module computes (no aggregation expressions, no $meta). */
export function projectionIsSimple(projection: Document): boolean {
  for (const [k, v] of Object.entries(projection)) {
    if (k.startsWith('$')) return false;
    if (isFlag(v)) continue;
    if (isPlainObject(v)) {
      const keys = Object.keys(v);
      if (keys.length === 1 && (keys[0] === '$slice' || keys[0] === '$elemMatch')) continue;
    }
    return false;
  }
  return true;
}

function parse(projection: Document): { specs: Map<string, Spec>; inclusion: boolean; idExcluded: boolean } {
  const specs = new Map<string, Spec>();
  let includes = 0;
  let excludes = 0;
  let idExcluded = false;
  for (const [path, v] of Object.entries(projection)) {
    if (path.endsWith('.$')) {
      specs.set(path.slice(0, -2), { kind: 'positional' });
      includes++;
      continue;
    }
    if (isFlag(v)) {
      const inc = truthy(v);
      if (path === '_id') {
        idExcluded = !inc;
        if (inc) specs.set('_id', { kind: 'include' });
        continue;
      }
      specs.set(path, { kind: inc ? 'include' : 'exclude' });
      if (inc) includes++;
      else excludes++;
      continue;
    }
    const op = v as Document;
    if ('$slice' in op) {
      const s = op.$slice as unknown;
      if (Array.isArray(s)) {
        if (s.length !== 2) throw new MongoCommandError(Codes.BadValue, '$slice takes an array of 2 numbers');
        const limit = Number(s[1]);
        if (!(limit > 0)) throw new MongoCommandError(Codes.BadValue, '$slice limit must be positive');
        specs.set(path, { kind: 'slice', skip: Number(s[0]), limit, neg: false });
      } else {
        const n = Number(s);
        specs.set(path, { kind: 'slice', skip: 0, limit: Math.abs(n), neg: n < 0 });
      }
    } else {
      specs.set(path, { kind: 'elemMatch', cond: op.$elemMatch as Document });
      includes++;
    }
  }
  // Mixed inclusion/exclusion is refused with mongod's errors by checkProjectionSpec before any
  // projection runs; this is a guard for callers that skip it.
  if (includes && excludes) throw unsupported('a projection mixing inclusions and exclusions (other than _id)');
  // `{ _id: 1 }` alone is an inclusion projection (only _id); `{ _id: 0 }` alone an exclusion.
  const idOnlyInclusion = !includes && !excludes && specs.get('_id')?.kind === 'include' && ![...specs.values()].some((x) => x.kind === 'slice');
  return { specs, inclusion: includes > 0 || idOnlyInclusion, idExcluded };
}

function sliceArray(arr: unknown[], s: Extract<Spec, { kind: 'slice' }>): unknown[] {
  if (s.neg) return s.limit === 0 ? [] : arr.slice(-s.limit!);
  if (s.limit === undefined) return arr;
  let start = s.skip;
  if (start < 0) start = Math.max(0, arr.length + start);
  return arr.slice(start, start + s.limit);
}

/** Applies a sub-tree of specs (paths relative to `doc`) in inclusion or exclusion mode. */
function applyTree(doc: Document, tree: Map<string, Spec | Map<string, unknown>>, inclusion: boolean, ctx: { filter?: Document; root: Document }, prefix: string): Document {
  const out: Document = {};
  for (const k of Object.keys(doc)) {
    const node = tree.get(k) as Spec | Map<string, Spec | Map<string, unknown>> | undefined;
    const v = doc[k];
    if (node === undefined) {
      if (!inclusion) out[k] = clone(v);
      continue;
    }
    if (node instanceof Map) {
      const sub = (x: unknown): unknown => (isPlainObject(x) ? applyTree(x, node, inclusion, ctx, `${prefix}${k}.`) : inclusion ? undefined : clone(x));
      if (Array.isArray(v)) out[k] = v.map(sub).filter((x) => x !== undefined);
      else if (isPlainObject(v)) out[k] = sub(v);
      else if (!inclusion) out[k] = clone(v);
      continue;
    }
    switch (node.kind) {
      case 'include':
        out[k] = clone(v);
        break;
      case 'exclude':
        break;
      case 'slice':
        out[k] = Array.isArray(v) ? clone(sliceArray(v, node)) : clone(v);
        break;
      case 'elemMatch': {
        if (!Array.isArray(v)) break;
        const q = makeQuery({ x: { $elemMatch: node.cond } });
        const hit = v.find((el) => q.test({ x: [el] }));
        if (hit !== undefined) out[k] = [clone(hit)];
        break;
      }
      case 'positional': {
        if (!Array.isArray(v)) break;
        const i = positionalIndex(`${prefix}${k}`, v, ctx.filter ?? {});
        out[k] = [clone(v[i])];
        break;
      }
    }
  }
  return out;
}

/** The first index of `arr` (the array at `path`) satisfying the query's conditions on that array. */
function positionalIndex(path: string, arr: unknown[], filter: Document): number {
  const conds = Object.entries(filter).filter(([k]) => k === path || k.startsWith(`${path}.`));
  if (!conds.length) throw unsupported(`a positional projection of '${path}.$' without a query condition on '${path}'`);
  for (let i = 0; i < arr.length; i++) {
    const probe: Document = {};
    setIn(probe, path, [arr[i]]);
    if (conds.every(([k, c]) => makeQuery({ [k]: c }).test(probe))) return i;
  }
  throw unsupported('a positional projection whose array element cannot be located from the query');
}

function setIn(doc: Document, path: string, value: unknown): void {
  const parts = path.split('.');
  let cur = doc;
  for (let i = 0; i < parts.length - 1; i++) cur = cur[parts[i]] = {};
  cur[parts[parts.length - 1]] = value;
}

function buildTree(specs: Map<string, Spec>): Map<string, Spec | Map<string, unknown>> {
  const root = new Map<string, Spec | Map<string, unknown>>();
  for (const [path, spec] of specs) {
    const parts = path.split('.');
    let cur = root;
    for (let i = 0; i < parts.length - 1; i++) {
      let next = cur.get(parts[i]);
      if (!(next instanceof Map)) cur.set(parts[i], (next = new Map()));
      cur = next as Map<string, Spec | Map<string, unknown>>;
    }
    cur.set(parts[parts.length - 1], spec);
  }
  return root;
}

/** Projects `docs` with a simple projection (see projectionIsSimple). */
export function applyProjection(docs: Document[], projection: Document, filter?: Document): Document[] {
  const { specs, inclusion, idExcluded } = parse(projection);
  if (inclusion && !idExcluded && !specs.has('_id')) specs.set('_id', { kind: 'include' });
  if (!inclusion && idExcluded) specs.set('_id', { kind: 'exclude' });
  if (inclusion && idExcluded) specs.delete('_id');
  const tree = buildTree(specs);
  return docs.map((d) => applyTree(d, tree, inclusion, { filter, root: d }, ''));
}

/* eslint-disable @typescript-eslint/no-require-imports */
const MINGO_EXPRESSIONS = require('mingo/operators/expression') as Record<string, unknown>;
/* eslint-enable @typescript-eslint/no-require-imports */

type ProjectionPolicy = 'find' | 'aggregate';

/**
 * The inclusion/exclusion rules of projection_ast::parse (src/mongo/db/query/projection_parser.cpp,
 * re-read), checked before any document is read: elements are taken in order and the first
 * inclusion or exclusion other than a top-level `_id` fixes the projection's type; then
 *  - an inclusion (a true number or bool, or a positional path) in an exclusion projection: 31253
 *    "Cannot do inclusion on field <name> in exclusion projection";
 *  - an exclusion in an inclusion projection: 31254 "Cannot do exclusion on field <name> in
 *    inclusion projection";
 *  - an expression other than $meta in an exclusion projection: 31252 "Cannot use expression other
 *    than $meta in exclusion projection" (an expression makes the projection an inclusion);
 *  - a literal in an exclusion projection: 31310 "Cannot use an expression <element> in an exclusion
 *    projection" (a literal is an inclusion).
 * `<name>` is the element's own field name (a nested sub-projection's inner name). find's $slice and
 * $elemMatch leave the type open; in an aggregation projection $elemMatch is InvalidPipelineOperator
 * "Cannot use $elemMatch in this context" and a positional path 31324 "Cannot use positional
 * projection in aggregation projection". Expression names are taken from mingo's operator table
 * (a name mongod knows and mingo does not is left to the projection itself).
 */
export function checkProjectionSpec(spec: Document, policy: ProjectionPolicy): void {
  const state: { type?: 'inclusion' | 'exclusion' } = {};
  const element = (name: string, v: unknown, isRoot: boolean): void => {
    const positional = name.endsWith('.$') || name.includes('.$.') || name === '$';
    if (positional && policy === 'aggregate') throw new MongoCommandError(31324, 'Cannot use positional projection in aggregation projection');
    const topLevelId = isRoot && name === '_id';
    if (isPlainObject(v)) {
      const keys = Object.keys(v);
      if (keys.length === 1 && keys[0].startsWith('$')) {
        const op = keys[0];
        if (op === '$elemMatch' && policy === 'aggregate') throw new MongoCommandError(Codes.InvalidPipelineOperator, 'Cannot use $elemMatch in this context');
        if (policy === 'find' && (op === '$slice' || op === '$elemMatch')) return;
        if (op === '$meta') return;
        if (!(op in MINGO_EXPRESSIONS)) return;
        if (state.type === 'exclusion') throw new MongoCommandError(31252, 'Cannot use expression other than $meta in exclusion projection');
        state.type = 'inclusion';
        return;
      }
      for (const [k, sub] of Object.entries(v)) element(k, sub, false);
      return;
    }
    if (isFlag(v) || (v as { _bsontype?: string } | null)?._bsontype === 'Decimal128') {
      const include = (v as { _bsontype?: string })?._bsontype === 'Decimal128' ? !/^[+-]?0*(\.0*)?(E[+-]?\d+)?$/i.test(String(v)) : truthy(v);
      if (topLevelId && !positional) return;
      if (include) {
        if (state.type === 'exclusion') throw new MongoCommandError(31253, `Cannot do inclusion on field ${name} in exclusion projection`);
        state.type = 'inclusion';
      } else {
        if (state.type === 'inclusion') throw new MongoCommandError(31254, `Cannot do exclusion on field ${name} in inclusion projection`);
        state.type = 'exclusion';
      }
      return;
    }
    if (state.type === 'exclusion') throw new MongoCommandError(31310, `Cannot use an expression ${name}: ${formatValue(v)} in an exclusion projection`);
    state.type = 'inclusion';
  };
  for (const [k, v] of Object.entries(spec)) element(k, v, true);
}
