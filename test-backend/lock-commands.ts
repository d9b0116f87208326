/**
 * The lock-command record: which commands the tests send to lock collections, reduced to their
 * shape, and the committed list of shapes each traced to a section of
 * docs/mongodb-compatibility.md (docs/lock-commands.json).
 *
 * - Test connections call `recordShape` for every command they send to a lock collection, plus
 *   `hello`, `commitTransaction` and `abortTransaction` (see __tests__/support/command-recorder.ts).
 *   Each process appends the shapes it has not written yet to its own file in the directory named
 *   by MPL_LOCK_COMMANDS_DIR (set by Jest's global setup).
 * - Jest's global teardown collects them (`collectRecordedShapes`), saves them as the last run
 *   (`LAST_RUN_FILE`) and fails the run if a shape is not in the committed list (`unlistedShapes`).
 * - `npm run compat:update` merges the last run into the list, keeping ids and anchors.
 *
 * A shape is the command with every caller value replaced by a tag: the command name, its key
 * structure, operators, field paths (`'$expiresAt'`), variables (`'$$NOW'`) and the constants of
 * the plugin's own expressions stay; `$literal` arguments, filter values, ids, owners, tokens and
 * options such as `batchSize` become type tags; arrays whose elements all have the same shape
 * collapse to one element; the envelope (session, transaction number, cluster time, `$db`,
 * read/write concern, read preference) is dropped, and `inTransaction: true` says the command ran
 * inside a multi-document transaction.
 */
import { appendFileSync, existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { dirname, join } from 'node:path';

export const ROOT = join(__dirname, '..');
export const LIST_FILE = join(ROOT, 'docs', 'lock-commands.json');
export const RECORD_FILE = join(ROOT, 'docs', 'mongodb-compatibility.md');
/** Where the teardown keeps the shapes of the last run, for `npm run compat:update`. */
export const LAST_RUN_FILE = join(ROOT, '.test-output', 'lock-commands.last-run.json');
export const DIR_ENV = 'MPL_LOCK_COMMANDS_DIR';
/** Anchor given to shapes that `compat:update` adds: it exists in no record, so a test fails until someone documents them. */
export const UNDOCUMENTED_ANCHOR = '#undocumented';

export type Shape = unknown;

export interface ListedCommand {
  id: string;
  /** `#anchor` of the section of docs/mongodb-compatibility.md that justifies this command. */
  anchor: string;
  shape: Shape;
}

export interface CommandList {
  $comment?: string;
  commands: ListedCommand[];
}

/** Envelope fields: where and how a command runs, not what it asks. */
const ENVELOPE = new Set([
  'lsid',
  'txnNumber',
  'autocommit',
  'startTransaction',
  '$clusterTime',
  '$db',
  'writeConcern',
  'readConcern',
  '$readPreference',
  'readPreference',
  'apiVersion',
  'apiStrict',
  'apiDeprecationErrors',
  'recoveryToken',
  'comment',
]);

/** Commands recorded whatever their target: the deployment probe and the transaction outcome. */
export const ALWAYS_RECORDED = new Set(['hello', 'commitTransaction', 'abortTransaction']);

/** The collection a command addresses, if it addresses one. */
export function targetCollection(commandName: string, command: Record<string, unknown>): string | undefined {
  if (commandName === 'getMore') return typeof command.collection === 'string' ? command.collection : undefined;
  const target = command[commandName];
  return typeof target === 'string' ? target : undefined;
}

type Context = 'command' | 'query' | 'expression';

function typeTag(value: unknown): string {
  if (value === null) return '<null>';
  if (value === undefined) return '<undefined>';
  switch (typeof value) {
    case 'string':
      return '<string>';
    case 'number':
      return '<number>';
    case 'bigint':
      return '<long>';
    case 'boolean':
      return '<bool>';
  }
  const bsonType = (value as { _bsontype?: unknown })._bsontype;
  if (typeof bsonType === 'string') {
    if (bsonType === 'Int32' || bsonType === 'Double') return '<number>';
    return `<${bsonType.charAt(0).toLowerCase()}${bsonType.slice(1)}>`;
  }
  const kind = Object.prototype.toString.call(value);
  if (kind === '[object Date]') return '<date>';
  if (kind === '[object RegExp]') return '<regex>';
  if (kind === '[object Uint8Array]' || Buffer.isBuffer(value)) return '<binary>';
  return '<object>';
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  if (typeof (value as { _bsontype?: unknown })._bsontype === 'string') return false;
  const proto = Object.getPrototypeOf(value) as { constructor?: { name?: string } } | null;
  // Objects from another realm (Jest's sandbox) have another Object.prototype: compare names.
  return proto === null || proto === Object.prototype || proto.constructor?.name === 'Object';
}

function isMap(value: unknown): value is Map<string, unknown> {
  return value instanceof Map || (typeof value === 'object' && value !== null && (value as { constructor?: { name?: string } }).constructor?.name === 'Map');
}

/** Shape of a scalar in a context. */
function scalar(value: unknown, context: Context): Shape {
  if (context === 'expression') {
    // The plugin's own expression constants (1, 0, 1000, true, null) and field paths/variables
    // are part of the shape; every caller value reaches an expression only inside $literal.
    if (typeof value === 'number' || typeof value === 'boolean' || value === null) return value;
    if (typeof value === 'string') return value.startsWith('$') ? value : '<string>';
    return typeTag(value);
  }
  if (context === 'command' && typeof value === 'boolean') return value;
  return typeTag(value);
}

/** A shape and its `shapeKey`, built in one pass (the recorder runs on every command). */
interface Walked {
  shape: Shape;
  key: string;
}

/** The `shapeKey` of an object from its fields' keys (sorted, as `shapeKey` does). */
function objectKey(parts: Map<string, string>): string {
  const names = [...parts.keys()].sort();
  return `{${names.map((name) => `${JSON.stringify(name)}:${parts.get(name)}`).join(',')}}`;
}

const LITERAL: Walked = { shape: '<literal>', key: JSON.stringify('<literal>') };

function walkArray(values: unknown[], context: Context, key: string | undefined): Walked {
  const children = values.map((value) => walk(value, context, key));
  if (children.length > 1 && children.every((child) => child.key === children[0].key)) {
    return { shape: [children[0].shape], key: `[${children[0].key}]` };
  }
  return { shape: children.map((child) => child.shape), key: `[${children.map((child) => child.key).join(',')}]` };
}

/** The context of the value under `key`, inside an object in `context`. */
function childContext(key: string, context: Context, parentKey: string | undefined): Context {
  if (context === 'query') return key === '$expr' ? 'expression' : 'query';
  if (context === 'expression') return 'expression';
  // Command-level keys that hold filters, updates, projections and pipelines.
  switch (key) {
    case 'filter':
    case 'query':
    case 'q':
    case '$match':
    case 'partialFilterExpression':
      return 'query';
    case 'update':
    case 'u':
    case 'fields':
    case 'projection':
    case 'sort':
    case 'key':
      return 'expression';
    default:
      // A pipeline stage other than $match / $changeStream computes expressions.
      if (parentKey === 'pipeline' && key.startsWith('$') && key !== '$changeStream') return 'expression';
      return 'command';
  }
}

function walkObject(value: Record<string, unknown>, context: Context, key: string | undefined): Walked & { parts: Map<string, string> } {
  const shape: Record<string, Shape> = {};
  const parts = new Map<string, string>();
  const names = Object.keys(value);
  if (context === 'command') names.sort();
  for (const name of names) {
    const child = name === '$literal' ? LITERAL : walk(value[name], childContext(name, context, key), name);
    shape[name] = child.shape;
    parts.set(name, child.key);
  }
  return { shape, key: objectKey(parts), parts };
}

function walk(value: unknown, context: Context, key: string | undefined): Walked {
  if (Array.isArray(value)) return walkArray(value, context, key);
  // The driver sends index keys as Maps (ordered).
  if (isMap(value)) return walk(Object.fromEntries(value), context, key);
  if (!isPlainObject(value)) {
    const shape = scalar(value, context);
    return { shape, key: JSON.stringify(shape) };
  }
  return walkObject(value, context, key);
}

// --- the key alone, without building the shape (what the recorder computes for every command) ---

const stringKeys = new Map<string, string>();
function quoted(text: string): string {
  let key = stringKeys.get(text);
  if (key === undefined) {
    key = JSON.stringify(text);
    if (stringKeys.size < 10_000) stringKeys.set(text, key);
  }
  return key;
}

const TAG_KEYS = new Map<string, string>();
function tagKey(value: unknown): string {
  const tag = typeTag(value);
  let key = TAG_KEYS.get(tag);
  if (key === undefined) TAG_KEYS.set(tag, (key = JSON.stringify(tag)));
  return key;
}

function scalarKey(value: unknown, context: Context): string {
  if (context === 'expression') {
    if (typeof value === 'number') return Number.isFinite(value) ? String(value) : 'null';
    if (typeof value === 'boolean') return value ? 'true' : 'false';
    if (value === null) return 'null';
    if (typeof value === 'string') return value.startsWith('$') ? quoted(value) : '"<string>"';
    return tagKey(value);
  }
  if (context === 'command' && typeof value === 'boolean') return value ? 'true' : 'false';
  return tagKey(value);
}

function keyOf(value: unknown, context: Context, parentKey: string | undefined): string {
  if (Array.isArray(value)) {
    if (value.length === 0) return '[]';
    const first = keyOf(value[0], context, parentKey);
    const keys = [first];
    let same = true;
    for (let i = 1; i < value.length; i++) {
      const next = keyOf(value[i], context, parentKey);
      keys.push(next);
      if (next !== first) same = false;
    }
    return same ? `[${first}]` : `[${keys.join(',')}]`;
  }
  if (isMap(value)) return keyOf(Object.fromEntries(value), context, parentKey);
  if (!isPlainObject(value)) return scalarKey(value, context);
  const names = Object.keys(value).sort();
  let out = '{';
  for (let i = 0; i < names.length; i++) {
    const name = names[i];
    if (i > 0) out += ',';
    out += `${quoted(name)}:${name === '$literal' ? LITERAL.key : keyOf(value[name], childContext(name, context, parentKey), name)}`;
  }
  return `${out}}`;
}

/** The `shapeKey` of a command's shape, computed without building the shape. */
export function commandKey(commandName: string, command: Record<string, unknown>, target = '<collection>'): string {
  const targetField = commandName === 'getMore' ? 'collection' : commandName;
  const names = Object.keys(command).filter((name) => !ENVELOPE.has(name));
  if (command.autocommit === false) names.push('inTransaction');
  names.sort();
  let out = '{';
  for (let i = 0; i < names.length; i++) {
    const name = names[i];
    if (i > 0) out += ',';
    let key: string;
    if (name === 'inTransaction') key = 'true';
    else if (name === targetField && typeof command[name] === 'string') key = quoted(target);
    else key = keyOf(command[name], childContext(name, 'command', undefined), name);
    out += `${quoted(name)}:${key}`;
  }
  return `${out}}`;
}

/**
 * The shape of one command and its `shapeKey`. `target` is what the command's own key (or
 * getMore's `collection`) is replaced with, e.g. `'<lock collection>'`.
 */
export function commandShapeAndKey(commandName: string, command: Record<string, unknown>, target = '<collection>'): Walked {
  const body: Record<string, unknown> = {};
  for (const [name, value] of Object.entries(command)) {
    if (!ENVELOPE.has(name)) body[name] = value;
  }
  const { shape, parts } = walkObject(body, 'command', undefined);
  const root = shape as Record<string, Shape>;
  const targetField = commandName === 'getMore' ? 'collection' : commandName;
  if (typeof command[targetField] === 'string') {
    root[targetField] = target;
    parts.set(targetField, JSON.stringify(target));
  }
  if (command.autocommit === false) {
    root.inTransaction = true;
    parts.set('inTransaction', 'true');
  }
  // The command name first, then its fields in order, so the JSON reads like the command.
  const { [commandName]: head, ...rest } = root;
  return { shape: { [commandName]: head, ...rest }, key: objectKey(parts) };
}

export function commandShape(commandName: string, command: Record<string, unknown>, target = '<collection>'): Shape {
  return commandShapeAndKey(commandName, command, target).shape;
}

/** A stable string for comparing shapes (object keys sorted at every level). */
export function shapeKey(shape: Shape): string {
  return JSON.stringify(shape, (_key, value: unknown) => {
    if (!isPlainObject(value)) return value;
    const sorted: Record<string, unknown> = {};
    for (const name of Object.keys(value).sort()) sorted[name] = value[name];
    return sorted;
  });
}

// --- recording (one file per process) ---

const written = new Set<string>();
let fileName: string | undefined;

/** Whether this process already wrote the shape with this key. */
export function isRecorded(key: string): boolean {
  return written.has(key);
}

/** Appends the shape to this process's file the first time it is seen; no-op outside a recorded run. */
export function recordShape(shape: Shape, key = shapeKey(shape)): void {
  const dir = process.env[DIR_ENV];
  if (!dir) return;
  if (written.has(key)) return;
  written.add(key);
  fileName ??= join(dir, `shapes-${process.pid}-${process.env.JEST_WORKER_ID ?? 'x'}.jsonl`);
  appendFileSync(fileName, `${JSON.stringify(shape)}\n`);
}

/** Every distinct shape the processes of this run recorded, in a stable order. */
export function collectRecordedShapes(dir: string): Shape[] {
  const byKey = new Map<string, Shape>();
  if (!existsSync(dir)) return [];
  for (const name of readdirSync(dir)) {
    if (!name.endsWith('.jsonl')) continue;
    for (const line of readFileSync(join(dir, name), 'utf8').split('\n')) {
      if (!line.trim()) continue;
      const shape = JSON.parse(line) as Shape;
      byKey.set(shapeKey(shape), shape);
    }
  }
  return [...byKey.entries()].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0)).map(([, shape]) => shape);
}

export function readList(): CommandList {
  return JSON.parse(readFileSync(LIST_FILE, 'utf8')) as CommandList;
}

/** Shapes recorded but not in the list. */
export function unlistedShapes(recorded: Shape[], list: CommandList): Shape[] {
  const listed = new Set(list.commands.map((entry) => shapeKey(entry.shape)));
  return recorded.filter((shape) => !listed.has(shapeKey(shape)));
}

export interface LastRun {
  recordedAt: string;
  /** True when the run selected a subset of the test files or tests. */
  partial: boolean;
  shapes: Shape[];
}

export function writeLastRun(shapes: Shape[], partial: boolean): void {
  mkdirSync(dirname(LAST_RUN_FILE), { recursive: true });
  const run: LastRun = { recordedAt: new Date().toISOString(), partial, shapes };
  writeFileSync(LAST_RUN_FILE, `${JSON.stringify(run, null, 2)}\n`);
}

export function readLastRun(): LastRun {
  return JSON.parse(readFileSync(LAST_RUN_FILE, 'utf8')) as LastRun;
}

/** The message that fails a run which sent shapes the list does not have. */
export function unlistedMessage(unlisted: Shape[]): string {
  const lines = unlisted.map((shape) => `  ${JSON.stringify(shape)}`);
  return [
    `The tests sent ${unlisted.length} command shape(s) to lock collections that docs/lock-commands.json does not list:`,
    ...lines,
    'Every command the plugin sends must be traced to mongod\'s rules in docs/mongodb-compatibility.md.',
    'Run `npm run compat:update` to add them to docs/lock-commands.json (anchor "#undocumented"), then document',
    'each one in docs/mongodb-compatibility.md and point its entry\'s anchor at that section.',
  ].join('\n');
}

/** `#anchor` ids of the headings of a Markdown file (GitHub's slug rules, plus explicit `<a id>`s). */
export function markdownAnchors(markdown: string): Set<string> {
  const anchors = new Set<string>();
  const seen = new Map<string, number>();
  let fenced = false;
  for (const line of markdown.split('\n')) {
    if (/^\s*```/.test(line)) fenced = !fenced;
    if (fenced) continue;
    for (const match of line.matchAll(/<a\s+(?:id|name)="([^"]+)"/g)) anchors.add(`#${match[1]}`);
    const heading = /^#{1,6}\s+(.*?)\s*#*\s*$/.exec(line);
    if (!heading) continue;
    const slug = heading[1]
      .toLowerCase()
      .replace(/<[^>]+>/g, '')
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .trim()
      .replace(/\s/g, '-');
    const count = seen.get(slug) ?? 0;
    seen.set(slug, count + 1);
    anchors.add(`#${count === 0 ? slug : `${slug}-${count}`}`);
  }
  return anchors;
}
