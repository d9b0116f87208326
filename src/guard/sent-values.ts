/**
 * The parts of a write the guard reads, replaced by what the driver will send for them.
 *
 * The driver serializes a command with js-bson, which calls a value's own `toBSON()` and reads
 * its fields (getters, Proxies included) at that moment (id-value.ts). So a filter `_id` that
 * passes `instanceof ObjectId` can reach the server as `{ $ne: null }`, a `Map` as a document, a
 * stateful value as one thing when the guard looks and another when the write is sent. The guard
 * therefore reads, and sends, fresh copies: every structure it walks (the filter, its `$and` /
 * `$or` / `$nor` lists, an upsert's update operators and pipeline stages, a replacement) is
 * copied into plain objects and arrays, and every value it judges (an `_id` condition, an `_id`
 * an update sets, a `$rename` target, a `$project` of `_id`) is serialized once and replaced by
 * the value decoded from those bytes (bsonRoundTrip, exact: it serializes to the same bytes
 * again). What the guard checked is then exactly what reaches the server. Values it does not
 * judge stay the caller's own objects (they sit under keys the copy fixes, so they cannot turn
 * into an `_id` condition; the guard's narrowing to checked `_id`s covers the rest).
 */
import { mongo } from 'mongoose';
import { IdRefusal, NOT_SENT, bsonRoundTrip } from '../id-value';

type Document = mongo.Document;

/** The driver's serialization options that change what a value is sent as. */
export interface SerializeSettings {
  ignoreUndefined: boolean;
  serializeFunctions: boolean;
}

/** The settings a write is serialized with: its own options, else its collection's (resolveBSONOptions in the driver). */
export function serializeSettings(options: Record<string, unknown>, collection: { bsonOptions?: { ignoreUndefined?: boolean; serializeFunctions?: boolean } } | undefined): SerializeSettings {
  const inherited = collection?.bsonOptions ?? {};
  return {
    ignoreUndefined: typeof options.ignoreUndefined === 'boolean' ? options.ignoreUndefined : inherited.ignoreUndefined === true,
    serializeFunctions: typeof options.serializeFunctions === 'boolean' ? options.serializeFunctions : inherited.serializeFunctions === true,
  };
}

/** What a value is sent as: a fresh value, left out of the command, or unreadable (see sentValue). */
export type Sent = { value: unknown } | 'omitted' | 'unreadable';

/** Whether a decoded value holds a DBRef (js-bson decodes `{ $ref, $id }` into one and re-serializes its fields in its own order). */
function holdsDbRef(value: unknown): boolean {
  if (value === null || typeof value !== 'object') return false;
  if ((value as { _bsontype?: unknown })._bsontype === 'DBRef') return true;
  if ((value as { _bsontype?: unknown })._bsontype !== undefined) return false;
  return Object.values(value).some(holdsDbRef);
}

/**
 * `value` as the driver will send it (serialized once, decoded exactly), `'omitted'` when the
 * driver leaves it out (a function, a symbol, `undefined` with ignoreUndefined), or
 * `'unreadable'` when the guard cannot send the decoded value in its place (it cannot be
 * serialized, which the driver reports itself, or it holds a DBRef).
 */
export function sentValue(value: unknown, settings: SerializeSettings): Sent {
  const read = bsonRoundTrip(value, { exact: true, ...settings });
  if (read === NOT_SENT) return 'omitted';
  if (read instanceof IdRefusal || holdsDbRef(read.value)) return 'unreadable';
  return { value: withNumbers(read.value) };
}

/**
 * An exactly decoded value with its Int32s as plain numbers (a JS number that fits 32 bits is sent
 * as an int32 again); Double, Long and the other wrappers stay, so the bytes do not change.
 */
function withNumbers(value: unknown): unknown {
  if (value === null || typeof value !== 'object') return value;
  const type = (value as { _bsontype?: unknown })._bsontype;
  if (type === 'Int32') return (value as mongo.Int32).valueOf();
  if (type !== undefined || value instanceof Date) return value;
  if (Array.isArray(value)) return value.map(withNumbers);
  return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, withNumbers(v)]));
}

/** A plain object the serializer writes key by key (not a Map, a class instance or one with toBSON). */
export function isPlainObject(value: unknown): value is Document {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  if (proto !== Object.prototype && proto !== null) return false;
  return typeof (value as { toBSON?: unknown }).toBSON !== 'function';
}

/** A copy of `source` (own enumerable keys, read once) with `key` replaced as `sent` says. */
function withSent(copy: Document, key: string, sent: Sent, original: unknown): void {
  if (sent === 'omitted') delete copy[key];
  else if (sent === 'unreadable') copy[key] = original;
  else copy[key] = sent.value;
}

/**
 * The filter the guard reads and sends (see the module comment). A filter that is not a plain
 * object (a Map, one with toBSON, a class instance) is serialized and decoded whole; otherwise
 * it is copied, with its `_id` condition sent as it serializes and its `$and` / `$or` / `$nor`
 * lists copied clause by clause. `unreadable` is set when an `_id` condition (at any depth of
 * those lists) could not be replaced: it is then left as given, and nothing may be trusted
 * from it (the guard searches instead, and refuses an upsert it cannot read).
 */
export function sentFilter(filter: unknown, settings: SerializeSettings): { filter: unknown; unreadable: boolean } {
  if (filter === null || typeof filter !== 'object' || Array.isArray(filter)) return { filter, unreadable: false };
  if (!isPlainObject(filter)) {
    const whole = sentValue(filter, settings);
    if (whole === 'omitted' || whole === 'unreadable' || !isPlainObject(whole.value)) return { filter, unreadable: true };
    filter = whole.value;
  }
  let unreadable = false;
  const copy: Document = { ...(filter as Document) };
  for (const key of Object.keys(copy)) {
    const value = copy[key] as unknown;
    if (key === '_id') {
      const sent = sentValue(value, settings);
      if (sent === 'unreadable') unreadable = true;
      withSent(copy, key, sent, value);
    } else if ((key === '$and' || key === '$or' || key === '$nor') && Array.isArray(value)) {
      copy[key] = Array.from(value as unknown[], (clause) => {
        const inner = sentFilter(clause, settings);
        if (inner.unreadable) unreadable = true;
        return inner.filter;
      });
    }
  }
  return { filter: copy, unreadable };
}

/**
 * An upsert's update or replacement as the guard reads and sends it (see the module comment), or
 * undefined when it cannot be read (a form the serializer writes otherwise than key by key, or
 * an `_id` value that cannot be replaced): such an upsert is refused before anything is sent.
 *  - a replacement: copied, its own `_id` sent as it serializes;
 *  - a pipeline: each stage and its argument copied, a `$project` of `_id` sent as it serializes;
 *  - modifiers: each operator's argument copied (a Map as its entries), the value of an `_id`
 *    path and every `$rename` target sent as they serialize.
 */
export function sentUpsertUpdate(update: unknown, kind: 'update' | 'replacement', settings: SerializeSettings): unknown {
  if (update === null || typeof update !== 'object') return update; // the driver refuses it
  if (kind === 'replacement') {
    if (!isPlainObject(update)) return undefined;
    const copy: Document = { ...update };
    return Object.prototype.hasOwnProperty.call(copy, '_id') && !replaced(copy, '_id', settings) ? undefined : copy;
  }
  if (Array.isArray(update)) {
    const stages: unknown[] = [];
    for (const stage of Array.from(update as unknown[])) {
      const entries = entriesOf(stage);
      if (entries === undefined) return undefined;
      const copy: Document = {};
      for (const [name, spec] of entries) {
        const fields = entriesOf(spec);
        if (fields === undefined) {
          copy[name] = spec; // a `$unset` string or list: it may remove `_id`, which only makes the server generate one
          continue;
        }
        const specCopy: Document = Object.fromEntries(fields);
        if (name === '$project' && Object.prototype.hasOwnProperty.call(specCopy, '_id') && !replaced(specCopy, '_id', settings)) return undefined;
        copy[name] = specCopy;
      }
      stages.push(copy);
    }
    return stages;
  }
  const operators = entriesOf(update);
  if (operators === undefined) return undefined;
  const copy: Document = {};
  for (const [op, spec] of operators) {
    const fields = entriesOf(spec);
    if (fields === undefined) {
      copy[op] = spec; // not an operator's document: the driver or mongod refuses it
      continue;
    }
    const specCopy: Document = Object.fromEntries(fields);
    for (const [path] of fields) {
      if ((path === '_id' || op === '$rename') && !replaced(specCopy, path, settings)) return undefined;
    }
    copy[op] = specCopy;
  }
  return copy;
}

/** Replaces `holder[key]` by what it is sent as; false when it cannot be read. An omitted value is removed, as the driver leaves it out. */
function replaced(holder: Document, key: string, settings: SerializeSettings): boolean {
  const sent = sentValue(holder[key], settings);
  if (sent === 'unreadable') return false;
  withSent(holder, key, sent, undefined);
  return true;
}

/** The entries of a document the serializer writes key by key (a Map too, in its order), or undefined. */
function entriesOf(value: unknown): [string, unknown][] | undefined {
  if (value instanceof Map && typeof (value as { toBSON?: unknown }).toBSON !== 'function') return [...(value as Map<unknown, unknown>).entries()].map(([k, v]) => [String(k), v]);
  if (!isPlainObject(value)) return undefined;
  return Object.entries(value);
}
