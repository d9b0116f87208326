/**
 * The ordered form of one index (the `_id` index or a secondary one): its keys in index order
 * (index-keys.ts, sorted-keys.ts), kept in step with the collection's committed documents, and
 * what the planner needs to know about it (multikey fields, whether its keys are modelled at all).
 *
 * Like mongod's multikey flag (manual, "Multikey Indexes"; explain's `isMultiKey` and
 * `multiKeyPaths`, plan_explainer_impl.cpp), `multikeyFields` only grows: a field stays multikey
 * after its last array is gone. An index that ever saw a document whose keys the emulator does
 * not model (index-keys.ts) is `unplannable` for good: its ordered keys are dropped and the
 * planner no longer uses it.
 */
import type { Document } from 'bson';
import { entryComparator, fieldKeys, type IndexEntry } from './index-keys';
import { SortedKeys } from './sorted-keys';
import { toNumber } from './numbers';

export interface OrderedIndexSpec {
  key: Document;
  name: string;
  unique?: boolean;
  sparse?: boolean;
  partialFilterExpression?: Document;
  hidden?: boolean;
  v?: number;
  collation?: unknown;
}

/** The keys a document contributes to an index, and which fields held arrays. */
export interface DocKeys {
  entries: IndexEntry[];
  arrayFields: string[];
}

export class OrderedIndex {
  readonly fields: string[];
  readonly dirs: number[];
  readonly keys: SortedKeys<IndexEntry>;
  readonly multikeyFields = new Set<string>();
  unplannable = false;
  readonly compare: (a: IndexEntry, b: IndexEntry) => number;

  constructor(
    readonly spec: OrderedIndexSpec,
    private readonly ridOf: (key: string) => number,
    /** The partial filter, when the index has one: only matching documents are indexed. */
    private readonly partial?: { test(doc: Document): boolean },
  ) {
    this.fields = Object.keys(spec.key);
    this.dirs = this.fields.map((f) => (toNumber(spec.key[f]) < 0 ? -1 : 1));
    this.compare = entryComparator(this.dirs);
    this.keys = new SortedKeys(this.compare);
  }

  get name(): string {
    return this.spec.name;
  }

  get isId(): boolean {
    return this.fields.length === 1 && this.fields[0] === '_id';
  }

  /**
   * The entries `doc` (stored under `_id` key `k`, record id `rid`) contributes: none when a
   * sparse index has none of its fields (manual, "Sparse Indexes": a sparse index holds "entries
   * for documents that have the indexed field, even if the index field contains a null value") or
   * the partial filter does not match; undefined for a shape whose keys are not modelled.
   */
  keysOf(doc: Document, k: string, rid: number): DocKeys | undefined {
    if (this.partial && !this.partial.test(doc)) return { entries: [], arrayFields: [] };
    const perField: unknown[][] = [];
    const arrayFields: string[] = [];
    let present = false;
    for (const f of this.fields) {
      const fk = fieldKeys(doc, f);
      if (!fk) return undefined;
      if (fk.array) arrayFields.push(f);
      if (!fk.missing) present = true;
      perField.push(fk.keys);
    }
    if (this.spec.sparse && !present) return { entries: [], arrayFields: [] };
    // Two array fields in one compound key: mongod refuses the document ("cannot index parallel
    // arrays", btree_key_generator.cpp); the emulator accepted it, so the index stops planning.
    if (arrayFields.length > 1) return undefined;
    let combos: unknown[][] = [[]];
    for (const keys of perField) {
      if (keys.length === 1) {
        for (const c of combos) c.push(keys[0]);
        continue;
      }
      const next: unknown[][] = [];
      for (const c of combos) for (const key of keys) next.push([...c, key]);
      combos = next;
    }
    return { entries: combos.map((v) => ({ v, rid, k })), arrayFields };
  }

  add(doc: Document, k: string): void {
    if (this.unplannable) return;
    const keys = this.keysOf(doc, k, this.ridOf(k));
    if (!keys) {
      this.unplannable = true;
      this.keys.clear();
      return;
    }
    for (const f of keys.arrayFields) this.multikeyFields.add(f);
    for (const e of keys.entries) this.keys.insert(e);
  }

  remove(doc: Document, k: string): void {
    if (this.unplannable) return;
    const keys = this.keysOf(doc, k, this.ridOf(k));
    if (keys) for (const e of keys.entries) this.keys.remove(e);
  }

  clear(): void {
    this.keys.clear();
  }
}
