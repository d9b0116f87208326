/**
 * One collection's committed state: documents keyed by the canonical
 * encoding of `_id` (O(1) lookups) with the `_id` index's keys in order,
 * secondary indexes, and the before-images that running transactions need to
 * read their snapshot.
 */
import { UUID, type Document, type Timestamp } from 'bson';
import { Index, type IndexSpec } from '../indexes';
import { OrderedIndex } from '../ordered-index';
import { keyOf } from '../values';

export interface DocRecord {
  doc: Document;
  /** Commit sequence number of the write that produced this version. */
  seq: number;
}

/** Before-image of the write committed at `until` (null: the document did not exist). */
export interface HistoryEntry {
  until: number;
  doc: Document | null;
}

/**
 * The documents by `_id` key. Every write of the map (the storage's commit, the journal's replay,
 * $out's temporary collection) keeps the `_id` index's ordered keys and the record ids in step:
 * a record id is given when a key first enters (or is first indexed) and kept while it stays, as
 * WiredTiger keeps a document's RecordId across updates, so the map's (insertion) order is the
 * record id order.
 */
export class DocMap extends Map<string, DocRecord> {
  private readonly rids = new Map<string, number>();
  private nextRid = 1;
  /** The `_id` index in order. */
  readonly idIndex = new OrderedIndex(Collection.idSpec(), (k) => this.ridOf(k));

  /** The record id of `key`, given now if it has none yet (secondary indexes are written before the map). */
  ridOf(key: string): number {
    let r = this.rids.get(key);
    if (r === undefined) this.rids.set(key, (r = this.nextRid++));
    return r;
  }

  /** The record id of `key` if it has one (never gives one). */
  peekRid(key: string): number | undefined {
    return this.rids.get(key);
  }

  override set(key: string, rec: DocRecord): this {
    // idIndex exists once the constructor ran (Map's constructor calls set only with an iterable).
    if (!super.has(key)) this.idIndex?.add(rec.doc, key);
    return super.set(key, rec);
  }

  override delete(key: string): boolean {
    const prev = super.get(key);
    if (!prev) return false;
    this.idIndex.remove(prev.doc, key);
    this.rids.delete(key);
    return super.delete(key);
  }

  override clear(): void {
    this.idIndex.clear();
    this.rids.clear();
    super.clear();
  }
}

export class Collection {
  readonly docs = new DocMap();
  readonly history = new Map<string, HistoryEntry[]>();
  readonly indexes: Index[] = [];
  readonly uuid = new UUID();
  /**
   * The cluster time when the collection was registered (no tick of its own: a snapshot read at
   * exactly this time cannot tell whether it was created before or after, see snapshot-reads.ts).
   */
  createdAt: Timestamp | undefined;
  /**
   * The cluster time of the latest index build or drop (same convention as createdAt): a snapshot
   * read at or before it would resolve a hint against indexes the collection did not have then
   * (snapshot-reads.ts refuses it).
   */
  indexesChangedAt: Timestamp | undefined;

  constructor(
    readonly db: string,
    private _name: string,
    readonly options: Document = {},
  ) {}

  get name(): string {
    return this._name;
  }

  /** renameCollection within the database: same documents, indexes and UUID (Storage.renameCollection). */
  rename(to: string): void {
    this._name = to;
  }

  get ns(): string {
    return `${this.db}.${this.name}`;
  }

  static idSpec(): IndexSpec {
    return { v: 2, key: { _id: 1 }, name: '_id_' };
  }

  allSpecs(): IndexSpec[] {
    return [Collection.idSpec(), ...this.indexes.map((i) => i.spec)];
  }

  findIndex(name: string): Index | undefined {
    return this.indexes.find((i) => i.name === name);
  }

  /** Builds a new index over existing documents; throws the DuplicateKey error if they violate it. */
  addIndex(spec: IndexSpec): void {
    const idx = new Index(spec, (k) => this.docs.ridOf(k));
    for (const [key, rec] of this.docs) {
      const owner = idx.conflictOwner(idx.entries(rec.doc), key);
      if (owner !== undefined) throw idx.duplicateKeyError(this.ns, rec.doc);
      idx.add(rec.doc, key);
    }
    this.indexes.push(idx);
  }

  dropIndex(name: string): void {
    const i = this.indexes.findIndex((x) => x.name === name);
    if (i >= 0) this.indexes.splice(i, 1);
  }

  /** Committed document as of snapshot `seq` (undefined if absent then). */
  getAt(key: string, snapshot: number | undefined): Document | undefined {
    const rec = this.docs.get(key);
    if (snapshot === undefined) return rec?.doc;
    if (rec && rec.seq <= snapshot) return rec.doc;
    const hist = this.history.get(key);
    if (hist) {
      for (const h of hist) if (h.until > snapshot) return h.doc ?? undefined;
    }
    return rec && rec.seq <= snapshot ? rec.doc : undefined;
  }

  /** Last commit sequence that touched `key` (insert, update or delete). */
  lastWriteSeq(key: string): number {
    const rec = this.docs.get(key);
    const hist = this.history.get(key);
    const h = hist && hist.length ? hist[hist.length - 1].until : 0;
    return Math.max(rec?.seq ?? 0, h);
  }

  /** Keys to visit when reading the snapshot: current docs plus ones deleted since. */
  *snapshotKeys(): Iterable<string> {
    yield* this.docs.keys();
    for (const k of this.history.keys()) if (!this.docs.has(k)) yield k;
  }

  static key(id: unknown): string {
    return keyOf(id);
  }
}
