/**
 * Secondary indexes of one collection: specs as mongod lists them, unique
 * enforcement (Map entry -> owning _id key) and, for single-field indexes,
 * an equality lookup map used by the query planner. The `_id` index is the
 * collection's primary Map itself and is not stored here.
 */
import type { Document } from 'bson';
import type { Query } from 'mingo';
import { makeQuery } from './mingo-context';
import { Codes, MongoCommandError, unsupported } from './errors';
import { formatValue, getPath, keyOf } from './values';

export interface IndexSpec {
  v: number;
  key: Document;
  name: string;
  unique?: boolean;
  sparse?: boolean;
  expireAfterSeconds?: number;
  partialFilterExpression?: Document;
  [k: string]: unknown;
}

const SUPPORTED_OPTIONS = new Set(['key', 'name', 'unique', 'sparse', 'expireAfterSeconds', 'partialFilterExpression', 'background', 'v', 'collation', 'hidden']);

export function indexNameFor(key: Document): string {
  return Object.entries(key).map(([k, v]) => `${k}_${String(v)}`).join('_');
}

/** Validates a createIndexes entry, failing loudly on options the emulator does not implement. */
export function normalizeSpec(raw: Document): IndexSpec {
  if (!raw || typeof raw.key !== 'object' || Object.keys(raw.key as Document).length === 0) {
    throw new MongoCommandError(Codes.BadValue, "Error in specification: 'key' must be a non-empty object");
  }
  // Loud where unsupported: options and index types the emulator does not implement answer
  // NotImplemented naming the feature (geo '2d'/'2dsphere', 'text', 'hashed', collation...).
  for (const opt of Object.keys(raw)) {
    if (!SUPPORTED_OPTIONS.has(opt)) throw unsupported(`createIndexes option '${opt}'`);
  }
  if (raw.collation !== undefined) throw unsupported("createIndexes option 'collation'");
  for (const [field, dir] of Object.entries(raw.key as Document)) {
    if (dir !== 1 && dir !== -1) {
      const feature = dir === '2d' || dir === '2dsphere' || dir === 'geoHaystack' ? 'geo' : dir === 'text' ? 'text search' : String(dir);
      throw unsupported(`index type ${JSON.stringify(dir)} (${feature}) on field '${field}'`);
    }
  }
  const spec: IndexSpec = { v: 2, key: { ...(raw.key as Document) }, name: typeof raw.name === 'string' ? raw.name : indexNameFor(raw.key as Document) };
  if (raw.unique) spec.unique = true;
  if (raw.sparse) spec.sparse = true;
  if (raw.hidden) spec.hidden = true;
  if (raw.expireAfterSeconds !== undefined) {
    // mongod refuses TTL on _id, on compound keys (5.0+; older servers ignored the option) and
    // out-of-range values; the exact codes and messages differ between releases and the emulator
    // has not pinned them to a source, so it refuses them as NotImplemented rather than guess.
    const s = raw.expireAfterSeconds;
    const keys = Object.keys(raw.key as Document);
    if (keys.length === 1 && keys[0] === '_id') throw unsupported('a TTL index on _id (mongod refuses it)');
    if (keys.length > 1) throw unsupported('a TTL option on a compound index (mongod refuses or ignores it, depending on the release)');
    if (typeof s !== 'number' || !Number.isInteger(s) || s < 0 || s > 2147483647) throw unsupported(`expireAfterSeconds ${JSON.stringify(s)} (mongod refuses values that are not integers between 0 and 2147483647)`);
    spec.expireAfterSeconds = s;
  }
  if (raw.partialFilterExpression) spec.partialFilterExpression = raw.partialFilterExpression as Document;
  return spec;
}

/** Options compared when an index of the same name or key already exists. */
export function sameIndex(a: IndexSpec, b: IndexSpec): boolean {
  return keyOf(a.key) === keyOf(b.key) && !!a.unique === !!b.unique && !!a.sparse === !!b.sparse &&
    a.expireAfterSeconds === b.expireAfterSeconds && keyOf(a.partialFilterExpression ?? null) === keyOf(b.partialFilterExpression ?? null);
}

export class Index {
  readonly spec: IndexSpec;
  readonly fields: string[];
  /** unique: entry -> _id key owning it. */
  private readonly owners = new Map<string, string>();
  /** single-field: entry -> set of _id keys (equality lookups). */
  private readonly lookup: Map<string, Set<string>> | undefined;
  private readonly partial: Query | undefined;

  constructor(spec: IndexSpec) {
    this.spec = spec;
    this.fields = Object.keys(spec.key);
    this.lookup = this.fields.length === 1 && !this.fields[0].includes('.') ? new Map() : undefined;
    this.partial = spec.partialFilterExpression ? makeQuery(spec.partialFilterExpression) : undefined;
  }

  get name(): string {
    return this.spec.name;
  }

  /** Entries the document contributes: one per element combination for array (multikey) fields. */
  entries(doc: Document): string[] {
    if (this.partial && !this.partial.test(doc)) return [];
    const perField = this.fields.map((f) => getPath(doc, f));
    if (this.spec.sparse && perField.every((v) => v === undefined)) return [];
    let combos: unknown[][] = [[]];
    for (const v of perField) {
      const options = Array.isArray(v) ? (v.length ? v : [undefined]) : [v];
      const next: unknown[][] = [];
      for (const c of combos) for (const o of options) next.push([...c, o]);
      combos = next;
    }
    return [...new Set(combos.map((c) => c.map(keyOf).join('|')))];
  }

  /** Lookup-only entries: like entries() plus the whole array value, so {f: [..]} equality also hits. */
  private lookupEntries(doc: Document): string[] {
    const v = doc[this.fields[0]];
    const keys = Array.isArray(v) ? [keyOf(v), ...v.map(keyOf)] : [keyOf(v)];
    return keys;
  }

  /** The _id key of another document already holding one of `entries`, if any. */
  conflictOwner(entries: string[], selfKey: string): string | undefined {
    if (!this.spec.unique) return undefined;
    for (const e of entries) {
      const owner = this.owners.get(e);
      if (owner !== undefined && owner !== selfKey) return owner;
    }
    return undefined;
  }

  add(doc: Document, idKey: string): void {
    if (this.spec.unique) for (const e of this.entries(doc)) this.owners.set(e, idKey);
    if (this.lookup) {
      for (const e of this.lookupEntries(doc)) {
        let set = this.lookup.get(e);
        if (!set) this.lookup.set(e, (set = new Set()));
        set.add(idKey);
      }
    }
  }

  remove(doc: Document, idKey: string): void {
    if (this.spec.unique) for (const e of this.entries(doc)) if (this.owners.get(e) === idKey) this.owners.delete(e);
    if (this.lookup) {
      for (const e of this.lookupEntries(doc)) {
        const set = this.lookup.get(e);
        if (set) {
          set.delete(idKey);
          if (!set.size) this.lookup.delete(e);
        }
      }
    }
  }

  /** Moves the document at `idKey` from `before` to `after`; a no-op when the indexed fields did not change. */
  replace(before: Document, after: Document, idKey: string): void {
    if (before === after) return;
    let same = true;
    for (const f of this.fields) {
      const top = f.includes('.') ? f.slice(0, f.indexOf('.')) : f;
      const a = before[top];
      const b = after[top];
      if (a !== b && keyOf(a) !== keyOf(b)) {
        same = false;
        break;
      }
    }
    // A partial filter may look at other fields, so only skip when it cannot change the outcome.
    if (same && !this.partial) return;
    this.remove(before, idKey);
    this.add(after, idKey);
  }

  /** _id keys whose field equals `value` (superset; callers re-check with the matcher). */
  lookupEqual(value: unknown): Set<string> | undefined {
    if (!this.lookup) return undefined;
    return this.lookup.get(keyOf(value)) ?? new Set();
  }

  canLookup(field: string): boolean {
    return !!this.lookup && this.fields[0] === field && !this.spec.partialFilterExpression && !this.spec.sparse;
  }

  duplicateKeyError(ns: string, doc: Document): MongoCommandError {
    return duplicateKeyError(ns, this.name, this.spec.key, Object.fromEntries(this.fields.map((f) => [f, firstScalar(getPath(doc, f))])));
  }
}

function firstScalar(v: unknown): unknown {
  return v === undefined ? null : v;
}

export function duplicateKeyError(ns: string, indexName: string, keyPattern: Document, keyValue: Document): MongoCommandError {
  const dup = `{ ${Object.entries(keyValue).map(([k, v]) => `${k}: ${formatValue(v)}`).join(', ')} }`;
  return new MongoCommandError(
    Codes.DuplicateKey,
    `E11000 duplicate key error collection: ${ns} index: ${indexName} dup key: ${dup}`,
    { keyPattern: { ...keyPattern }, keyValue },
  );
}
