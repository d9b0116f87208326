/**
 * Secondary indexes of one collection: specs as mongod lists them, unique enforcement (Map entry ->
 * owning _id key) and the index's keys in order (ordered-index.ts), which the query planner scans.
 * The `_id` index is the collection's primary Map with its own ordered keys (storage/collection.ts).
 */
import type { Document } from 'bson';
import type { Query } from 'mingo';
import { makeQuery } from './mingo-context';
import { Codes, MongoCommandError, unsupported } from './errors';
import { clone, formatValue, getPath, isPlainObject, keyOf, typedKeyOf } from './values';
import { OrderedIndex } from './ordered-index';
import { validateIndexSpec } from './index-spec';

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

/**
 * Validates a createIndexes entry, failing loudly on options the emulator does not implement, and
 * returns the spec as mongod stores and lists it: IndexCatalogImpl::_fixIndexSpec
 * (src/mongo/db/catalog/index_catalog_impl.cpp) rebuilds it as `v`, `unique: true` (when truthy,
 * else dropped), `hidden: true` (likewise), `key`, `name` (`_id_` for the `{_id: 1}` key), then the
 * remaining fields in the order sent (`dropDups` and `ns` dropped).
 */
export function normalizeSpec(raw: Document): IndexSpec {
  if (!isPlainObject(raw)) throw unsupported('an index specification that is not a document');
  // mongod's own refusals (index-spec.ts: index_key_validate::validateIndexSpec and
  // parseAndValidateIndexSpecs), then what the emulator does not implement.
  validateIndexSpec(raw);
  // Loud where unsupported: options and index types the emulator does not implement answer
  // NotImplemented naming the feature (geo '2d'/'2dsphere', 'text', 'hashed', collation...).
  for (const opt of Object.keys(raw)) {
    if (!SUPPORTED_OPTIONS.has(opt)) throw unsupported(`createIndexes option '${opt}'`);
  }
  if (raw.collation !== undefined) throw unsupported("createIndexes option 'collation'");
  for (const [field, dir] of Object.entries(raw.key as Document)) {
    // A '$**' key is a wildcard index (IndexNames::findPluginName), valid on mongod, not implemented here.
    if (field === '$**' || field.endsWith('.$**')) throw unsupported(`a wildcard index on '${field}'`);
    const n = numericValue(dir);
    if (n !== 1 && n !== -1) {
      const feature = dir === '2d' || dir === '2dsphere' || dir === 'geoHaystack' ? 'geo' : dir === 'text' ? 'text search' : String(dir);
      throw unsupported(`index type ${JSON.stringify(dir)} (${feature}) on field '${field}'`);
    }
  }
  const keys = Object.keys(raw.key as Document);
  const isId = keys.length === 1 && keys[0] === '_id' && numericValue((raw.key as Document)._id) === 1;
  if (isId) {
    // validateIdIndexSpec refuses other fields on an _id index; its list of allowed fields is not
    // sourced here, so anything beyond key, name and v is refused.
    for (const k of Object.keys(raw)) if (k !== 'key' && k !== 'name' && k !== 'v') throw unsupported(`the option '${k}' on an _id index`);
  }
  const v = raw.v === undefined ? 2 : numericValue(raw.v);
  if (v !== 1 && v !== 2) throw unsupported(`index version ${String(raw.v)}`);
  const spec: IndexSpec = { v } as IndexSpec;
  if (raw.unique) spec.unique = true;
  if (raw.hidden) spec.hidden = true;
  spec.key = isId ? { _id: 1 } : clone(raw.key as Document);
  spec.name = isId ? '_id_' : raw.name;
  for (const k of Object.keys(raw)) {
    if (['v', 'unique', 'hidden', 'prepareUnique', 'key', 'name', 'dropDups', 'ns', '_id'].includes(k) || raw[k] === undefined) continue;
    spec[k] = clone(raw[k]);
  }
  if (raw.expireAfterSeconds !== undefined) {
    // mongod refuses TTL on _id, on compound keys (5.0+; older servers ignored the option) and
    // out-of-range values; the exact codes and messages differ between releases and the emulator
    // has not pinned them to a source, so it refuses them as NotImplemented rather than guess.
    const s = numericValue(raw.expireAfterSeconds);
    if (keys.length > 1) throw unsupported('a TTL option on a compound index (mongod refuses or ignores it, depending on the release)');
    if (s === undefined || !Number.isInteger(s) || s < 0 || s > 2147483647) throw unsupported(`expireAfterSeconds ${JSON.stringify(raw.expireAfterSeconds)} (mongod refuses values that are not integers between 0 and 2147483647)`);
  }
  return spec;
}

/** The value of a number of any BSON numeric type (undefined for anything else). */
export function numericValue(v: unknown): number | undefined {
  if (typeof v === 'number') return v;
  if (typeof v === 'bigint') return Number(v);
  const t = (v as { _bsontype?: string } | null)?._bsontype;
  if (t === 'Int32' || t === 'Double') return (v as { valueOf(): number }).valueOf();
  if (t === 'Long') return (v as { toNumber(): number }).toNumber();
  if (t === 'Decimal128') return Number((v as { toString(): string }).toString());
  return undefined;
}

/**
 * IndexDescriptor::compareIndexOptions (src/mongo/db/index/index_descriptor.cpp, 5.0+ form, where
 * unique, sparse, partialFilterExpression, collation and wildcardProjection identify an index):
 *  - 'different': the key pattern or an identifying option differs (unique and sparse by their
 *    truth value; partialFilterExpression present on one only, or not equivalent);
 *  - 'equivalent': identifying options match, other options (expireAfterSeconds, ...) differ;
 *  - 'identical': every option matches. `v`, `name`, `background`, `ns`, the text/2dsphere index
 *    versions and `dropDups` are never compared (populateOptionsMapForEqualityCheck).
 * Partial filters are compared as written; mongod compares the parsed, normalised expressions
 * (`MatchExpression::equivalent`), so `{a: 1}` and `{a: {$eq: 1}}` are equivalent there and
 * different here (documented in FIDELITY.md). `hidden` is left out of the comparison in 5.0 and
 * part of it in later releases: two specs differing only in `hidden` are refused (NotImplemented).
 */
export type IndexComparison = 'different' | 'equivalent' | 'identical';

const NOT_COMPARED = new Set(['key', 'ns', 'name', 'v', 'textIndexVersion', '2dsphereIndexVersion', 'background', 'dropDups', 'collation', 'partialFilterExpression', 'unique', 'sparse', 'wildcardProjection', 'hidden']);

export function compareIndexOptions(candidate: Document, existing: Document): IndexComparison {
  if (keyOf(candidate.key) !== keyOf(existing.key)) return 'different';
  const isId = (s: Document): boolean => keyOf(s.key) === keyOf({ _id: 1 });
  if ((isId(candidate) || !!candidate.unique) !== (isId(existing) || !!existing.unique)) return 'different';
  if (!!candidate.sparse !== !!existing.sparse) return 'different';
  if ((candidate.partialFilterExpression === undefined) !== (existing.partialFilterExpression === undefined)) return 'different';
  if (candidate.partialFilterExpression !== undefined && keyOf(candidate.partialFilterExpression) !== keyOf(existing.partialFilterExpression)) return 'different';
  const options = (s: Document): Map<string, string> => new Map(Object.keys(s).filter((k) => !NOT_COMPARED.has(k) && s[k] !== undefined).map((k) => [k, keyOf(s[k])]));
  const a = options(candidate);
  const b = options(existing);
  const identical = a.size === b.size && [...a].every(([k, v]) => b.get(k) === v);
  if (identical && !!candidate.hidden !== !!existing.hidden) throw unsupported("an index request differing from an existing index only in 'hidden' (compared or not depending on the release)");
  return identical ? 'identical' : 'equivalent';
}

export class Index {
  readonly spec: IndexSpec;
  readonly fields: string[];
  /** unique: entry -> _id key owning it. */
  private readonly owners = new Map<string, string>();
  private readonly partial: Query | undefined;
  /** The index's keys in index order, for the planner's index scans. */
  readonly ordered: OrderedIndex;

  /** `ridOf`: the record id of a document's `_id` key (the collection's; ties in the index order). */
  constructor(spec: IndexSpec, ridOf: (key: string) => number = localRids()) {
    this.spec = spec;
    this.fields = Object.keys(spec.key);
    this.partial = spec.partialFilterExpression ? makeQuery(spec.partialFilterExpression) : undefined;
    this.ordered = new OrderedIndex(spec, ridOf, this.partial);
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
    this.ordered.add(doc, idKey);
  }

  remove(doc: Document, idKey: string): void {
    if (this.spec.unique) for (const e of this.entries(doc)) if (this.owners.get(e) === idKey) this.owners.delete(e);
    this.ordered.remove(doc, idKey);
  }

  /** Moves the document at `idKey` from `before` to `after`; a no-op when the indexed fields did not change. */
  replace(before: Document, after: Document, idKey: string): void {
    if (before === after) return;
    let same = true;
    for (const f of this.fields) {
      const top = f.includes('.') ? f.slice(0, f.indexOf('.')) : f;
      const a = before[top];
      const b = after[top];
      // Typed: a change of type (1 to 1.0, missing to null) changes the keys a sparse index holds.
      if (a !== b && typedKeyOf(a) !== typedKeyOf(b)) {
        same = false;
        break;
      }
    }
    // A partial filter may look at other fields, so only skip when it cannot change the outcome.
    if (same && !this.partial) return;
    this.remove(before, idKey);
    this.add(after, idKey);
  }

  duplicateKeyError(ns: string, doc: Document): MongoCommandError {
    return duplicateKeyError(ns, this.name, this.spec.key, Object.fromEntries(this.fields.map((f) => [f, firstScalar(getPath(doc, f))])));
  }
}

/** Record ids for an index built outside a collection: numbered in the order keys are first seen. */
function localRids(): (key: string) => number {
  const rids = new Map<string, number>();
  return (key) => {
    let r = rids.get(key);
    if (r === undefined) rids.set(key, (r = rids.size + 1));
    return r;
  };
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
