/**
 * A change stream's `updateDescription`, built the way mongod builds it: from the $v:2 delta ("diff")
 * the update writes to the oplog (change_stream_event_transform.cpp calls
 * change_stream_document_diff_parser::parseDiff on `o.diff`).
 *
 * Which diff mongod writes depends on the kind of update:
 * - a pipeline update: `doc_diff::computeOplogDiff(pre, post, kSizeOfDeltaOplogEntryMetadata = 15)`
 *   (src/mongo/db/update/pipeline_executor.cpp, PipelineExecutor::applyUpdate;
 *   document_diff_calculator.cpp computeDocDiff / computeArrayDiff). That diff compares the two
 *   documents field by field in order, descends into objects and arrays of the same type, records a
 *   shrunk array as a resize (`l`, reported as `truncatedArrays`), and gives up on a sub-diff that is
 *   not smaller than the value it describes (the whole value is then an update). When the whole diff
 *   is not smaller than the new document, the update is logged as a replacement: the change stream
 *   reports a `replace` event.
 * - a modifier update (`$set`...): each modifier node logs its own entries through the V2 log
 *   builder (ModifierNode::logUpdate, modifier_node.cpp: the whole new value at the path taken, or
 *   an insert of a created field; UnsetNode::logUpdate a delete). This module reproduces that for
 *   `$set`, `$unset`, `$inc`, `$mul`, `$min`, `$max`, `$currentDate`, `$pull`, `$pullAll`, `$pop`
 *   and `$bit` (none of which override logUpdate) on plain dotted paths, and for `$push`, whose
 *   PushNode::logUpdate (push_node.cpp) logs only the appended elements (`arr.<n>`) when the push
 *   appended to a non-empty array (kArrayAppendUpdate: no `$position` or one past the end, no
 *   `$sort`, no `$slice` that trimmed) and the whole array otherwise. The V2 log builder has no
 *   resize entry, so a modifier update never reports truncation. Everything else is refused when a
 *   stream reads the event (`unsupported`): positional paths (`$`, `$[]`, `$[<id>]`, whose path
 *   taken is only known to the update system), `$rename`, and `$addToSet` adding to an existing
 *   array (AddToSetNode::logUpdate logs appended elements in current releases; the 7.0 node was
 *   not read, so which description 7.0 gives is not known here).
 *
 * The size estimates follow diff_tree's ApproxBSONSizeTracker (document_diff_serialization.h/.cpp:
 * kSizeOfEmptyDocumentDiffBuilder 5, kSizeOfEmptyArrayDiffBuilder 9, an entry's field name + 2 plus
 * its value size, 8 for each section's wrapper, 1 for a sub-diff's 's' prefix, 7 for a resize) and
 * computeDocDiff / computeArrayDiff / computeOplogDiff (document_diff_calculator.cpp). That code was
 * compared at a 7.0-era commit (6805bd38: diff_tree nodes, anyIndexesMightBeAffected;
 * document_diff_serialization at 501b2dc9) and at current master (045f9d0f): the size computation
 * and the decisions (a sub-diff is kept when strictly smaller than the value it describes, the
 * whole diff when its serialized size is strictly smaller than the post-image) are identical; the
 * only addition on master, binary ('b') entries, is never produced by computeDocDiff. The emulator
 * reports wire version 21 (7.0), so the decision here is exact and follows 7.0 (= 8.0 and master).
 * 6.0's DiffBuilder-based estimator was not read; the emulator does not claim to be 6.0.
 *
 * `disambiguatedPaths` (6.1+, with showExpandedEvents): DeltaUpdateDescriptionBuilder in
 * change_stream_document_diff_parser.cpp — a path becomes ambiguous at a field name (not the first
 * one) that is a numeric string (FieldRef::isNumericPathComponentStrict) or at one holding a dot, and
 * stays so; array indices are recorded as integers but do not make a path ambiguous.
 */
import { calculateObjectSize, type Document } from 'bson';
import type { UpdateDescription } from './hooks';
import { clone, isPlainObject, typedKeyOf } from './values';
import { compareBytes, comparePaths } from './update-order';

/** mongod's update_oplog_entry::kSizeOfDeltaOplogEntryMetadata (update_oplog_entry_serialization.h). */
const DELTA_METADATA = 15;

type Leaf = { t: 'update'; value: unknown } | { t: 'insert'; value: unknown } | { t: 'delete' };
interface DocNode {
  t: 'doc';
  size: number;
  deletes: string[];
  updates: Array<[string, unknown]>;
  inserts: Array<[string, unknown]>;
  subs: Array<[string, Internal]>;
  names: Set<string>;
}
interface ArrNode {
  t: 'array';
  size: number;
  children: Map<number, Leaf | Internal>;
  resize?: number;
}
type Internal = DocNode | ArrNode;

export interface UpdateOutcome {
  /** The update event's description; absent when mongod logs the update as a replacement. */
  description?: UpdateDescription;
  /** mongod logs this pipeline update as a replacement: the event is `replace`. */
  replace?: boolean;
  /** What is not reproduced (the stream refuses the event). */
  unsupported?: string;
}

/** The source of an update, as the write path knows it. */
export type UpdateSource = { kind: 'pipeline' } | { kind: 'modifier'; spec: Document };

/** Modifiers whose node logs through ModifierNode::logUpdate (or UnsetNode's delete): the value at the path. */
const MODIFIER_PATH_OPS = new Set(['$set', '$unset', '$inc', '$mul', '$min', '$max', '$currentDate', '$setOnInsert', '$pull', '$pullAll', '$pop', '$bit', '$push', '$addToSet']);

export function describeUpdate(before: Document, after: Document, source: UpdateSource | undefined): UpdateOutcome {
  if (source?.kind === 'pipeline') return pipelineDiff(before, after);
  if (source?.kind === 'modifier') {
    const tree = modifierDiff(before, after, source.spec);
    if (typeof tree === 'string') return { unsupported: `the updateDescription of a modifier update with ${tree}` };
    return { description: parseDiff(tree) };
  }
  return { description: legacyDiff(before, after) };
}

// ---------------------------------------------------------------------------------------------
// Sizes (ApproxBSONSizeTracker)

/** BSONElement::valuesize(): the value's bytes, without type byte and field name. */
function valueSize(v: unknown): number {
  return calculateObjectSize({ x: v }) - 8;
}

function utf8Length(s: string): number {
  return Buffer.byteLength(s, 'utf8');
}

function newDoc(padding: number): DocNode {
  return { t: 'doc', size: padding + 5, deletes: [], updates: [], inserts: [], subs: [], names: new Set() };
}

function newArr(): ArrNode {
  return { t: 'array', size: 9, children: new Map() };
}

function entrySize(fieldBytes: number, node: Leaf | Internal): number {
  const base = fieldBytes + 2;
  if (node.t === 'doc' || node.t === 'array') return base + node.size;
  if (node.t === 'delete') return base + 1;
  return base + valueSize(node.value);
}

function docAdd(doc: DocNode, field: string, node: Leaf | Internal): void {
  doc.size += entrySize(utf8Length(field), node);
  doc.names.add(field);
  switch (node.t) {
    case 'doc':
    case 'array':
      doc.size += 1;
      doc.subs.push([field, node]);
      return;
    case 'insert':
      if (!doc.inserts.length) doc.size += 8;
      doc.inserts.push([field, node.value]);
      return;
    case 'delete':
      if (!doc.deletes.length) doc.size += 8;
      doc.deletes.push(field);
      return;
    case 'update':
      if (!doc.updates.length) doc.size += 8;
      doc.updates.push([field, node.value]);
  }
}

function arrAdd(arr: ArrNode, idx: number, node: Leaf | Internal): void {
  arr.size += entrySize(1 + String(idx).length, node);
  arr.children.set(idx, node);
}

// ---------------------------------------------------------------------------------------------
// Pipeline updates: computeOplogDiff

/**
 * computeDocDiff / computeArrayDiff keep a diff only when `postObjSize > diffNode->getObjSize()`,
 * and computeOplogDiff only when `diff.objsize() < post.objsize()`: strictly smaller.
 */
function smaller(diffSize: number, limit: number): boolean {
  return diffSize < limit;
}

function pipelineDiff(before: Document, after: Document): UpdateOutcome {
  const post = calculateObjectSize(after);
  const root = docDiff(before, after, DELTA_METADATA);
  if (!root) return { replace: true };
  const serialized = calculateObjectSize(serialize(root));
  if (!smaller(serialized, post)) return { replace: true };
  return { description: parseDiff(root) };
}

/** computeDocDiff: null when the diff is not smaller than `post` (the caller logs the whole value). */
function docDiff(pre: Document, post: Document, padding: number): DocNode | null {
  const node = newDoc(padding);
  const preKeys = Object.keys(pre);
  const postKeys = Object.keys(post);
  const deletes = new Set<string>();
  let i = 0;
  let j = 0;
  while (i < preKeys.length && j < postKeys.length) {
    const pk = preKeys[i];
    const qk = postKeys[j];
    if (pk === qk) {
      const a = pre[pk];
      const b = post[qk];
      if (typedKeyOf(a) !== typedKeyOf(b)) {
        if (sameContainerType(a, b)) subDiff(node, pk, a, b);
        else docAdd(node, pk, { t: 'update', value: b });
      }
      i++;
      j++;
    } else {
      deletes.add(pk);
      i++;
    }
  }
  for (; i < preKeys.length; i++) docAdd(node, preKeys[i], { t: 'delete' });
  for (; j < postKeys.length; j++) {
    docAdd(node, postKeys[j], { t: 'insert', value: post[postKeys[j]] });
    deletes.delete(postKeys[j]);
  }
  // A std::set<StringData>: removals of fields that moved are added in byte order.
  for (const k of [...deletes].sort(compareBytes)) docAdd(node, k, { t: 'delete' });
  return smaller(node.size, calculateObjectSize(post)) ? node : null;
}

function arrayDiff(pre: unknown[], post: unknown[]): ArrNode | null {
  const node = newArr();
  let n = 0;
  for (; n < pre.length && n < post.length; n++) {
    const a = pre[n];
    const b = post[n];
    if (typedKeyOf(a) === typedKeyOf(b)) continue;
    if (sameContainerType(a, b)) subDiff(node, n, a, b);
    else arrAdd(node, n, { t: 'update', value: b });
  }
  for (; n < post.length; n++) arrAdd(node, n, { t: 'update', value: post[n] });
  if (pre.length > post.length) {
    node.resize = post.length;
    node.size += 7;
  }
  return smaller(node.size, valueSize(post)) ? node : null;
}

function sameContainerType(a: unknown, b: unknown): boolean {
  return (Array.isArray(a) && Array.isArray(b)) || (isPlainObject(a) && isPlainObject(b));
}

function subDiff(parent: Internal, key: string | number, a: unknown, b: unknown): void {
  const sub = Array.isArray(a) ? arrayDiff(a, b as unknown[]) : docDiff(a as Document, b as Document, 0);
  const node: Leaf | Internal = sub ?? { t: 'update', value: b };
  if (parent.t === 'doc') docAdd(parent, key as string, node);
  else arrAdd(parent, key as number, node);
}

/** The $v:2 diff document (document_diff_serialization.cpp, DocumentSubDiffFrame / ArrayFrame). */
function serialize(node: Internal): Document {
  const out: Document = {};
  if (node.t === 'array') {
    out.a = true;
    if (node.resize !== undefined) out.l = node.resize;
    for (const [idx, child] of [...node.children.entries()].sort((x, y) => x[0] - y[0])) {
      if (child.t === 'doc' || child.t === 'array') out[`s${idx}`] = serialize(child);
      else if (child.t !== 'delete') out[`u${idx}`] = child.value;
    }
    return out;
  }
  if (node.deletes.length) out.d = Object.fromEntries(node.deletes.map((k) => [k, false]));
  if (node.updates.length) out.u = Object.fromEntries(node.updates);
  if (node.inserts.length) out.i = Object.fromEntries(node.inserts);
  for (const [k, sub] of node.subs) out[`s${k}`] = serialize(sub);
  return out;
}

// ---------------------------------------------------------------------------------------------
// Modifier updates: the V2 log builder's entries for plain paths

/** The diff tree, or (a string) what is not reproduced: the stream refuses the event. */
function modifierDiff(before: Document, after: Document, spec: Document): DocNode | string {
  const entries: Array<{ op: string; path: string; arg: unknown }> = [];
  for (const [op, fields] of Object.entries(spec)) {
    if (!MODIFIER_PATH_OPS.has(op) || !isPlainObject(fields)) return `the ${op} operator`;
    // $setOnInsert does nothing to an existing document.
    if (op === '$setOnInsert') continue;
    for (const [path, arg] of Object.entries(fields)) {
      // The path a positional ($, $[], $[<id>]) update takes is only known to the update system.
      if (path.split('.').some((c) => c === '' || c.startsWith('$'))) return `a positional or empty path component (${op} ${JSON.stringify(path)})`;
      entries.push({ op, path, arg });
    }
  }
  // The nodes log in the order UpdateObjectNode::apply walks them: the paths sorted by
  // pathsupport::cmpPathsAndArrayIndexes component by component, whatever the operator (update-order.ts).
  entries.sort((x, y) => comparePaths(x.path, y.path));
  const root = newDoc(0);
  for (const { op, path, arg } of entries) {
    const refused = logPath(root, before, after, path.split('.'), leafFor(op, arg));
    if (refused) return `${op} on ${JSON.stringify(path)}: ${refused}`;
  }
  return root;
}

/**
 * How a modifier logs an existing value it changed (`pre` and `post` both present): undefined for
 * ModifierNode::logUpdate's whole new value, an internal node for the entries it logs instead, or a
 * string naming what is not reproduced.
 */
type LeafLogger = (pre: unknown, post: unknown) => Internal | string | undefined;

function leafFor(op: string, arg: unknown): LeafLogger | undefined {
  if (op === '$push') return (pre, post) => pushLog(arg, pre, post);
  if (op === '$addToSet') {
    // AddToSetNode::updateExistingElement only appends (kArrayAppendUpdate); which entries 7.0's
    // AddToSetNode::logUpdate writes for that was not read (current releases log the appended elements).
    return () => '$addToSet adding to an existing array (its oplog entries differ between releases; 7.0\'s add_to_set_node.cpp was not read)';
  }
  return undefined;
}

/**
 * PushNode::performPush / insertElementsWithPosition / logUpdate (push_node.cpp): the result is
 * kArrayAppendUpdate when the array was not empty and the first value went after its end (no
 * $position, or $position > size), unless $sort ran or $slice removed elements (kNormalUpdate);
 * then only the appended values are logged, at `<path>.<size - n + k>` (logCreatedField of an
 * array index: an update entry `u<idx>` of the array's sub-diff).
 */
function pushLog(arg: unknown, pre: unknown, post: unknown): Internal | string | undefined {
  if (!Array.isArray(pre) || !Array.isArray(post)) return undefined;
  const each = isPlainObject(arg) && Object.prototype.hasOwnProperty.call(arg, '$each');
  const values = each ? ((arg as Document).$each as unknown[]) : [arg];
  if (!Array.isArray(values)) return 'a $push whose $each is not an array';
  const clauses = each ? (arg as Document) : {};
  const position = clauses.$position === undefined ? undefined : toInteger(clauses.$position);
  const slice = clauses.$slice === undefined ? undefined : toInteger(clauses.$slice);
  if (position === null || slice === null) return 'a $push whose $position or $slice is not an integer';
  const size = pre.length;
  const n = values.length;
  if (n === 0 || size === 0) return undefined;
  if (position !== undefined && !(position > size)) return undefined;
  if (clauses.$sort !== undefined) return undefined;
  if (slice !== undefined && size + n > Math.abs(slice)) return undefined;
  if (post.length !== size + n) return 'a $push whose result does not match its append';
  const node = newArr();
  for (let k = 0; k < n; k++) arrAdd(node, size + k, { t: 'update', value: clone(post[size + k]) });
  return node;
}

/** parseIntegerElementToLong's accepted values (a number with no fraction); null otherwise. */
function toInteger(v: unknown): number | null {
  const n = typeof v === 'number' ? v : typeof (v as { toNumber?: unknown } | null)?.toNumber === 'function' ? (v as { toNumber(): number }).toNumber() : typeof (v as { valueOf?: unknown } | null)?.valueOf === 'function' ? Number((v as { valueOf(): unknown }).valueOf()) : NaN;
  return Number.isInteger(n) ? n : null;
}

/** Logs one modified path; a string names what is not reproduced. */
function logPath(root: DocNode, before: Document, after: Document, parts: string[], leaf?: LeafLogger): string | undefined {
  const NOT_REPRODUCED = 'a path through an array index past its end (padding)';
  let node: Internal = root;
  let pre: unknown = before;
  let post: unknown = after;
  for (let k = 0; k < parts.length; k++) {
    const part = parts[k];
    const last = k === parts.length - 1;
    let idx: number | undefined;
    if (node.t === 'array') {
      if (!/^(0|[1-9][0-9]*)$/.test(part)) return 'a non-numeric field of an array';
      idx = Number(part);
    }
    const a = readAt(pre, part);
    const b = readAt(post, part);
    if (node.t === 'array' && (idx! >= (pre as unknown[]).length || idx! >= (post as unknown[]).length)) return NOT_REPRODUCED;
    const existing: Leaf | Internal | undefined = node.t === 'doc' ? findChild(node, part) : node.children.get(idx!);
    if (a === undefined) {
      if (b === undefined) return undefined;
      if (node.t === 'array') return NOT_REPRODUCED;
      // A new field (with the documents created on the way): one insert of its new value.
      if (!existing) docAdd(node, part, { t: 'insert', value: clone(b) });
      return undefined;
    }
    if (last) {
      if (existing) return 'two modifiers on one path';
      if (b === undefined) {
        if (node.t === 'array') return 'an array element removed';
        docAdd(node, part, { t: 'delete' });
      } else if (typedKeyOf(a) !== typedKeyOf(b)) {
        const own = leaf?.(a, b);
        if (typeof own === 'string') return own;
        const entry: Leaf | Internal = own ?? { t: 'update', value: clone(b) };
        if (node.t === 'doc') docAdd(node, part, entry);
        else arrAdd(node, idx!, entry);
      }
      return undefined;
    }
    if (b === undefined || !sameContainerType(a, b)) return 'a path whose container changed type';
    let child: Leaf | Internal | undefined = existing;
    if (!child) {
      child = Array.isArray(a) ? newArr() : newDoc(0);
      // Sizes are irrelevant for modifier diffs (no replacement fallback): add without re-counting.
      if (node.t === 'doc') docAdd(node, part, child);
      else arrAdd(node, idx!, child);
    }
    if (child.t !== 'doc' && child.t !== 'array') return 'two modifiers on overlapping paths';
    node = child;
    pre = a;
    post = b;
  }
  return undefined;
}

function readAt(container: unknown, part: string): unknown {
  if (Array.isArray(container)) return /^(0|[1-9][0-9]*)$/.test(part) ? container[Number(part)] : undefined;
  if (isPlainObject(container)) return Object.prototype.hasOwnProperty.call(container, part) ? container[part] : undefined;
  return undefined;
}

function findChild(doc: DocNode, field: string): Leaf | Internal | undefined {
  if (!doc.names.has(field)) return undefined;
  const sub = doc.subs.find(([k]) => k === field);
  if (sub) return sub[1];
  if (doc.deletes.includes(field)) return { t: 'delete' };
  const u = doc.updates.find(([k]) => k === field);
  if (u) return { t: 'update', value: u[1] };
  const i = doc.inserts.find(([k]) => k === field);
  return i ? { t: 'insert', value: i[1] } : undefined;
}

// ---------------------------------------------------------------------------------------------
// parseDiff (change_stream_document_diff_parser.cpp)

interface Part {
  name: string;
  index: boolean;
  ambiguous: boolean;
}

class DescriptionBuilder {
  readonly updatedFields: Document = {};
  readonly removedFields: string[] = [];
  readonly truncatedArrays: Document[] = [];
  readonly disambiguatedPaths: Document = {};
  private readonly path: Part[] = [];

  push(name: string, index: boolean): void {
    const prev = this.path[this.path.length - 1];
    if (prev?.ambiguous) {
      this.path.push({ name, index, ambiguous: true });
      return;
    }
    const numeric = !index && this.path.length > 0 && /^(0|[1-9][0-9]*)$/.test(name);
    const dotted = !index && !numeric && name.includes('.');
    this.path.push({ name, index, ambiguous: numeric || dotted });
  }

  pop(): void {
    this.path.pop();
  }

  private dotted(): string {
    return this.path.map((p) => p.name).join('.');
  }

  private noteAmbiguity(): void {
    const lastPart = this.path[this.path.length - 1];
    if (!lastPart?.ambiguous) return;
    this.disambiguatedPaths[this.dotted()] = this.path.map((p) => (p.index ? Number(p.name) : p.name));
  }

  updated(name: string, index: boolean, value: unknown): void {
    this.push(name, index);
    this.updatedFields[this.dotted()] = clone(value);
    this.noteAmbiguity();
    this.pop();
  }

  removed(name: string): void {
    this.push(name, false);
    this.removedFields.push(this.dotted());
    this.noteAmbiguity();
    this.pop();
  }

  truncated(newSize: number): void {
    this.truncatedArrays.push({ field: this.dotted(), newSize });
    this.noteAmbiguity();
  }
}

function parseDiff(root: DocNode): UpdateDescription {
  const b = new DescriptionBuilder();
  walk(root, b);
  return { updatedFields: b.updatedFields, removedFields: b.removedFields, truncatedArrays: b.truncatedArrays, disambiguatedPaths: b.disambiguatedPaths };
}

function walk(node: Internal, b: DescriptionBuilder): void {
  if (node.t === 'doc') {
    for (const [k, v] of node.updates) b.updated(k, false, v);
    for (const [k, v] of node.inserts) b.updated(k, false, v);
    for (const k of node.deletes) b.removed(k);
    for (const [k, sub] of node.subs) {
      b.push(k, false);
      walk(sub, b);
      b.pop();
    }
    return;
  }
  if (node.resize !== undefined) b.truncated(node.resize);
  for (const [idx, child] of [...node.children.entries()].sort((x, y) => x[0] - y[0])) {
    if (child.t === 'doc' || child.t === 'array') {
      b.push(String(idx), true);
      walk(child, b);
      b.pop();
    } else if (child.t !== 'delete') b.updated(String(idx), true, child.value);
  }
}

// ---------------------------------------------------------------------------------------------
// The emulator's older description, kept for modifiers not reproduced above

/** Dotted paths into embedded documents; arrays and other values reported whole. */
export function legacyDiff(before: Document, after: Document): UpdateDescription {
  const b = new DescriptionBuilder();
  const walkDocs = (pre: Document, post: Document): void => {
    for (const k of Object.keys(post)) {
      if (!(k in pre)) b.updated(k, false, post[k]);
      else if (isPlainObject(pre[k]) && isPlainObject(post[k])) {
        b.push(k, false);
        walkDocs(pre[k] as Document, post[k] as Document);
        b.pop();
      } else if (typedKeyOf(pre[k]) !== typedKeyOf(post[k])) b.updated(k, false, post[k]);
    }
    for (const k of Object.keys(pre)) if (!(k in post)) b.removed(k);
  };
  walkDocs(before, after);
  return { updatedFields: b.updatedFields, removedFields: b.removedFields, truncatedArrays: [], disambiguatedPaths: b.disambiguatedPaths };
}
