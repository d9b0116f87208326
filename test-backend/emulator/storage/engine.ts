/**
 * The storage engine: databases of collections, the commit sequence, the
 * committed write path (indexes, history for snapshots, journal, change
 * events) and document-level locks held by running transactions.
 *
 * Every method is synchronous: a command's read-check-write happens within
 * one turn of the event loop, which is what makes single statements atomic.
 */
import { EventEmitter } from 'events';
import { Timestamp, type Document } from 'bson';
import type { ChangeEvent, ChangeSource } from '../hooks';
import { Codes, MongoCommandError } from '../errors';
import { compareIndexOptions, normalizeSpec, type IndexSpec } from '../indexes';
import { formatValue, keyOf } from '../values';
import { Collection } from './collection';
import type { UpdateSource } from '../update-description';
import { collectionEvents } from './catalog-events';
import { HISTORY_WINDOW_SECONDS, SnapshotHistory } from './snapshot-history';

export type WriteKind = 'insert' | 'update' | 'replace' | 'delete';

/** A committed (or to-be-committed) change of one document. */
export interface DocWrite {
  coll: Collection;
  key: string;
  before: Document | null;
  after: Document | null;
  kind: WriteKind;
  /** update: a pipeline or a modifier document (the change event's updateDescription depends on it). */
  source?: UpdateSource;
}

/** Persistence sink (the journal); all calls are synchronous so a reply always follows durable data. */
export interface WriteSink {
  putDoc(ns: string, doc: Document): void;
  deleteDoc(ns: string, id: unknown): void;
  createCollection(db: string, name: string, options: Document): void;
  dropCollection(db: string, name: string): void;
  createIndex(db: string, name: string, spec: IndexSpec): void;
  dropIndex(db: string, name: string, indexName: string): void;
  /** An index's options changed (collMod). */
  updateIndex(db: string, name: string, spec: IndexSpec): void;
  /** renameCollection within a database (the target, if any, was dropped first). */
  renameCollection(db: string, from: string, to: string): void;
  /** A collection's options changed (collMod: validators, changeStreamPreAndPostImages). */
  updateCollectionOptions(db: string, name: string, options: Document): void;
  /** A view was created or modified (views.ts). */
  putView(view: ViewDef): void;
  dropView(db: string, name: string): void;
}

/** A view definition (views.ts): a name in `db` reading `viewOn` through `pipeline`. */
export interface ViewDef {
  db: string;
  name: string;
  viewOn: string;
  pipeline: Document[];
}

/** What a lock holder (a transaction) must offer to a waiting writer. */
export interface LockHolder {
  readonly id: string;
  /** Resolves when the transaction commits or aborts. */
  readonly finished: Promise<void>;
}

/** Thrown by the write path when a non-transactional write must wait for a transaction. */
export class WaitForLock {
  constructor(readonly holder: LockHolder) {}
}

export interface CommitMeta {
  txnNumber?: unknown;
  lsid?: Document;
}

export class Storage implements ChangeSource {
  readonly changes = new EventEmitter();
  private readonly dbs = new Map<string, Map<string, Collection>>();
  /** View definitions by namespace (views.ts); journaled like collections. */
  private readonly viewDefs = new Map<string, ViewDef>();
  /** ns + '\0' + key -> transaction holding the document. */
  readonly locks = new Map<string, LockHolder>();
  seq = 0;
  private lastTs = new Timestamp({ t: Math.floor(Date.now() / 1000), i: 0 });
  sink: WriteSink | undefined;
  /** Smallest snapshot still in use by a running transaction (undefined: none). */
  oldestSnapshot: () => number | undefined = () => undefined;
  /**
   * History for snapshot reads outside transactions (snapshot-history.ts); undefined until the
   * first snapshot read, so the plain write path keeps no history for them before.
   */
  snapshots: SnapshotHistory | undefined;
  /** Set while atOneTime runs: the cluster time its writes share, once the first one took it. */
  private oneTime: { ts?: Timestamp } | undefined;
  /** True while commitAll replays a transaction: its writes form one commit boundary. */
  private inCommitAll = false;
  /** The bound of the last pruneHistory sweep (undefined: everything was dropped). */
  private prunedTo: number | undefined;

  constructor() {
    this.changes.setMaxListeners(0);
  }

  // ---- cluster time -------------------------------------------------------
  /** A fresh, strictly increasing cluster time for a write (inside atOneTime: the shared one). */
  tick(): Timestamp {
    if (this.oneTime) return (this.oneTime.ts ??= this.advance());
    return this.advance();
  }

  /**
   * Runs `fn` with every write it commits at one cluster time: a transaction's commit writes one
   * applyOps oplog entry, so all its events share its optime (change_stream_filter_helpers.cpp,
   * buildTransactionFilter: "All events in a transaction share the same clusterTime, lsid, and
   * txnNumber values"). The time is taken at the first write, so a commit with no writes takes none.
   */
  atOneTime<T>(fn: () => T): T {
    const outer = this.oneTime;
    if (!outer) this.oneTime = {};
    try {
      return fn();
    } finally {
      if (!outer) this.oneTime = undefined;
    }
  }

  private advance(): Timestamp {
    const t = Math.floor(Date.now() / 1000);
    const last = this.lastTs;
    this.lastTs = t > last.t ? new Timestamp({ t, i: 1 }) : new Timestamp({ t: last.t, i: last.i + 1 });
    return this.lastTs;
  }

  currentClusterTime(): Timestamp {
    return this.lastTs;
  }

  // ---- namespaces ---------------------------------------------------------
  databaseNames(): string[] {
    const names = [...this.dbs.entries()].filter(([, c]) => c.size > 0).map(([n]) => n);
    // A database holding only views exists on mongod (its system.views collection).
    for (const v of this.viewDefs.values()) if (!names.includes(v.db)) names.push(v.db);
    return names;
  }

  // ---- views (views.ts decides; the storage keeps and journals) ------------------
  getView(db: string, name: string): ViewDef | undefined {
    return this.viewDefs.size ? this.viewDefs.get(`${db}.${name}`) : undefined;
  }

  views(db: string): ViewDef[] {
    return [...this.viewDefs.values()].filter((v) => v.db === db);
  }

  /** Creates or replaces a view definition (journaled). */
  putView(view: ViewDef): void {
    validateNamespace(view.db, view.name);
    this.viewDefs.set(`${view.db}.${view.name}`, view);
    this.sink?.putView(view);
  }

  dropView(db: string, name: string): boolean {
    if (!this.viewDefs.delete(`${db}.${name}`)) return false;
    this.sink?.dropView(db, name);
    return true;
  }

  /** collMod's validator options (journaled); `options` replaces the collection's options. */
  setCollectionOptions(coll: Collection, options: Document): void {
    for (const k of Object.keys(coll.options)) delete coll.options[k];
    Object.assign(coll.options, options);
    this.sink?.updateCollectionOptions(coll.db, coll.name, coll.options);
  }

  collections(db: string): Collection[] {
    return [...(this.dbs.get(db)?.values() ?? [])];
  }

  getCollection(db: string, name: string): Collection | undefined {
    return this.dbs.get(db)?.get(name);
  }

  /** Creates the collection if missing (implicit creation on first write / createIndexes). */
  ensureCollection(db: string, name: string, options: Document = {}): Collection {
    validateNamespace(db, name);
    let colls = this.dbs.get(db);
    if (!colls) this.dbs.set(db, (colls = new Map()));
    let c = colls.get(name);
    if (!c) {
      c = new Collection(db, name, options);
      c.createdAt = this.lastTs;
      colls.set(name, c);
      this.sink?.createCollection(db, name, options);
      this.emitCatalog(collectionEvents.created(c));
    }
    return c;
  }

  /**
   * Registers a collection a transaction created (at its commit); false if another one of the same
   * name appeared meanwhile.
   */
  adoptCollection(coll: Collection, meta: CommitMeta = {}): boolean {
    let colls = this.dbs.get(coll.db);
    if (!colls) this.dbs.set(coll.db, (colls = new Map()));
    if (colls.has(coll.name)) return false;
    coll.createdAt = this.lastTs;
    colls.set(coll.name, coll);
    this.sink?.createCollection(coll.db, coll.name, coll.options);
    for (const idx of coll.indexes) this.sink?.createIndex(coll.db, coll.name, idx.spec);
    // The transaction's applyOps entry holds the create and index builds: their events carry its lsid and txnNumber.
    const txnFields = { ...(meta.lsid ? { lsid: meta.lsid } : {}), ...(meta.txnNumber !== undefined ? { txnNumber: meta.txnNumber } : {}) };
    this.emitCatalog({ ...collectionEvents.created(coll), ...txnFields });
    // Indexes built on the (then empty) new collection: one createIndexes entry each.
    for (const idx of coll.indexes) this.emitCatalog({ ...collectionEvents.indexesCreated(coll, [idx.spec]), ...txnFields });
    return true;
  }

  dropCollection(db: string, name: string): boolean {
    const colls = this.dbs.get(db);
    const c = colls?.get(name);
    if (!colls || !c) return false;
    colls.delete(name);
    for (const k of [...this.locks.keys()]) if (k.startsWith(`${c.ns}\0`)) this.locks.delete(k);
    this.sink?.dropCollection(db, name);
    const clusterTime = this.tick();
    this.snapshots?.noteDrop(c.ns, clusterTime);
    this.emit({ operationType: 'drop', ns: { db, coll: name }, clusterTime, collectionUUID: c.uuid });
    return true;
  }

  dropDatabase(db: string): void {
    for (const c of this.collections(db)) this.dropCollection(db, c.name);
    for (const v of this.views(db)) this.dropView(db, v.name);
    this.dbs.delete(db);
    this.emit({ operationType: 'dropDatabase', ns: { db }, clusterTime: this.tick() });
  }

  /**
   * Creates an index (or reports that it exists). `dryRun`: only decide; `pending`: the collection
   * belongs to a running transaction, so the index is not journaled until adoptCollection.
   */
  createIndex(coll: Collection, raw: Document, opts: { dryRun?: boolean; pending?: boolean } = {}): 'created' | 'exists' {
    const spec = normalizeSpec(raw);
    const isIdKey = keyOf(spec.key) === keyOf({ _id: 1 });
    // parseAndValidateIndexSpecs (src/mongo/db/catalog/index_key_validate.cpp).
    if (!isIdKey && spec.name === '_id_') {
      throw new MongoCommandError(Codes.BadValue, `The index name '_id_' is reserved for the _id index, which must have key pattern {_id: 1}, found key: ${formatValue(spec.key)}`);
    }
    // IndexCatalogImpl::_doesSpecConflictWithExisting (src/mongo/db/catalog/index_catalog_impl.cpp):
    // first an index of the same name, then one of the same key pattern and identifying options.
    const requested = formatValue(spec);
    const byName = coll.allSpecs().find((s) => s.name === spec.name);
    if (byName) {
      const cmp = compareIndexOptions(spec, byName);
      if (cmp === 'different') {
        throw new MongoCommandError(Codes.IndexKeySpecsConflict, `An existing index has the same name as the requested index. When index names are not specified, they are auto generated and can cause conflicts. Please refer to our documentation. Requested index: ${requested}, existing index: ${formatValue(byName)}`);
      }
      if (cmp === 'equivalent') {
        throw new MongoCommandError(Codes.IndexOptionsConflict, `An equivalent index already exists with the same name but different options. Requested index: ${requested}, existing index: ${formatValue(byName)}`);
      }
      return 'exists';
    }
    for (const existing of coll.allSpecs()) {
      const cmp = compareIndexOptions(spec, existing);
      if (cmp === 'different') continue;
      if (cmp === 'equivalent') {
        throw new MongoCommandError(Codes.IndexOptionsConflict, `An equivalent index already exists with a different name and options. Requested index: ${requested}, existing index: ${formatValue(existing)}`);
      }
      throw new MongoCommandError(Codes.IndexOptionsConflict, `Index already exists with a different name: ${existing.name}`);
    }
    if (opts.dryRun) return 'created';
    coll.addIndex(spec);
    coll.indexesChangedAt = this.lastTs;
    if (!opts.pending) this.sink?.createIndex(coll.db, coll.name, spec);
    return 'created';
  }

  /** collMod's TTL change: the index's `expireAfterSeconds` (journaled). */
  setIndexExpiry(coll: Collection, name: string, secs: number): void {
    const idx = coll.findIndex(name);
    if (!idx) return;
    idx.spec.expireAfterSeconds = secs;
    this.sink?.updateIndex(coll.db, coll.name, idx.spec);
  }

  dropIndex(coll: Collection, name: string): void {
    const spec = coll.findIndex(name)?.spec;
    coll.dropIndex(name);
    coll.indexesChangedAt = this.lastTs;
    this.sink?.dropIndex(coll.db, coll.name, name);
    if (spec) this.emitCatalog(collectionEvents.indexDropped(coll, spec));
  }

  // ---- catalog changes for change streams (change-stream events) ------------------------------
  /** createIndexes' change event(s), once its indexes are built (see collectionEvents.indexesCreated). */
  recordIndexesCreated(coll: Collection, specs: IndexSpec[], collectionWasEmpty: boolean): void {
    if (!specs.length) return;
    // OpObserverImpl::onCreateIndex logs one entry per index built on an empty collection;
    // a two-phase build on a non-empty one logs one commitIndexBuild entry with all of them.
    if (collectionWasEmpty) for (const s of specs) this.emitCatalog(collectionEvents.indexesCreated(coll, [s]));
    else this.emitCatalog(collectionEvents.indexesCreated(coll, specs));
  }

  /** collMod: new options (journaled) and the `modify` event (OpObserverImpl::onCollMod). */
  modifyCollection(coll: Collection, change: { options?: Document; description: Document; indexOptionsBefore?: Document }): void {
    const before = { ...coll.options };
    if (change.options) {
      for (const k of Object.keys(coll.options)) delete coll.options[k];
      Object.assign(coll.options, change.options);
      this.sink?.updateCollectionOptions(coll.db, coll.name, coll.options);
    }
    this.emitCatalog(collectionEvents.modified(coll, before, change.description, change.indexOptionsBefore));
  }

  /**
   * renameCollection within one database, keeping the collection (documents, indexes, UUID): drops
   * the target first when asked (renameCollectionAndDropTarget, rename_collection.cpp, logs no
   * separate drop), journals, and emits the one `rename` event.
   * For snapshot reads (snapshot-reads.ts) the rename counts as a drop of the source name and of a
   * dropped target, and as a creation under the new name: the emulator keeps no point-in-time
   * catalog (7.0's CollectionCatalog lookups at a read timestamp, jstests/noPassthrough/
   * point_in_time_lookups.js), so reads at a time before the rename are refused under either name.
   */
  renameCollection(coll: Collection, to: string, dropTarget: Collection | undefined): void {
    const colls = this.dbs.get(coll.db)!;
    const from = coll.name;
    const fromNs = coll.ns;
    if (dropTarget) {
      colls.delete(dropTarget.name);
      this.sink?.dropCollection(dropTarget.db, dropTarget.name);
    }
    colls.delete(from);
    coll.rename(to);
    coll.createdAt = this.lastTs;
    colls.set(to, coll);
    this.sink?.renameCollection(coll.db, from, to);
    this.emitCatalog(collectionEvents.renamed(coll, from, dropTarget));
    this.snapshots?.noteDrop(fromNs, this.lastTs);
    if (dropTarget) this.snapshots?.noteDrop(dropTarget.ns, this.lastTs);
  }

  /** A view's creation, for the views module: the change event of its system.views insert. */
  recordViewCreated(db: string, name: string, definition: { viewOn: string; pipeline: Document[]; collation?: Document }): void {
    this.emitCatalog(collectionEvents.viewCreated(db, name, definition));
  }

  private emitCatalog(ev: Omit<ChangeEvent, 'clusterTime'>): void {
    const clusterTime = this.tick();
    this.emit({ ...ev, clusterTime } as ChangeEvent);
  }

  // ---- reads --------------------------------------------------------------
  lookupDocument(db: string, coll: string, id: unknown): Document | null {
    return this.getCollection(db, coll)?.docs.get(keyOf(id))?.doc ?? null;
  }

  // ---- committed write path -------------------------------------------------
  lockKey(coll: Collection, key: string): string {
    return `${coll.ns}\0${key}`;
  }

  /** Throws WaitForLock if a running transaction (other than `self`) holds the document. */
  checkUnlocked(coll: Collection, key: string, self?: LockHolder): void {
    const holder = this.locks.get(this.lockKey(coll, key));
    if (holder && holder !== self) throw new WaitForLock(holder);
  }

  /** Unique-index check against committed state for `after` replacing the document at `key`. */
  checkUnique(coll: Collection, key: string, after: Document): void {
    // _id uniqueness is the primary map; callers check it because insert and update differ.
    for (const idx of coll.indexes) {
      if (!idx.spec.unique) continue;
      if (idx.conflictOwner(idx.entries(after), key) !== undefined) throw idx.duplicateKeyError(coll.ns, after);
    }
  }

  /**
   * Applies one committed document write: index maintenance, before-image for
   * running snapshots, journal, change event. Callers have already validated it.
   */
  commit(w: DocWrite, meta: CommitMeta = {}): void {
    const { coll, key, before, after } = w;
    const seq = ++this.seq;
    const snapshots = this.snapshots;
    let oldest: number | undefined;
    if (snapshots || ((oldest = this.oldestSnapshot()) !== undefined && oldest < seq)) {
      let hist = coll.history.get(key);
      if (!hist) coll.history.set(key, (hist = []));
      hist.push({ until: seq, doc: before });
    }
    const prev = coll.docs.get(key);
    if (prev && after) {
      for (const idx of coll.indexes) idx.replace(prev.doc, after, key);
    } else if (prev) {
      for (const idx of coll.indexes) idx.remove(prev.doc, key);
    } else if (after) {
      for (const idx of coll.indexes) idx.add(after, key);
    }
    if (after) {
      coll.docs.set(key, { doc: after, seq });
      this.sink?.putDoc(coll.ns, after);
    } else {
      coll.docs.delete(key);
      if (before) this.sink?.deleteDoc(coll.ns, before._id);
    }
    const clusterTime = this.tick();
    if (snapshots && !this.inCommitAll) this.snapshotBoundary(snapshots, clusterTime, seq);
    // Building the event (and the update's diff) is only worth it when a change stream listens.
    if (this.changes.listenerCount('change') === 0) return;
    const id = (after ?? before)?._id;
    const ev: ChangeEvent = {
      operationType: w.kind,
      ns: { db: coll.db, coll: coll.name },
      documentKey: { _id: id },
      clusterTime,
      collectionUUID: coll.uuid,
    };
    if (w.kind === 'insert' || w.kind === 'replace') ev.fullDocument = after ?? undefined;
    // The update's description is computed when a stream reads the event (change-streams.ts).
    if (w.kind === 'update' && before && after) ev.update = { before, after, source: w.source };
    // changeStreamPreAndPostImages: mongod records the pre-image of every update, replace and
    // delete (config.system.preimages) and derives the post-image from it; only for such collections.
    if (before && w.kind !== 'insert' && (coll.options.changeStreamPreAndPostImages as Document | undefined)?.enabled === true) {
      ev.preImage = before;
      if (w.kind === 'update' && after) ev.postImage = after;
    }
    if (meta.txnNumber !== undefined) ev.txnNumber = meta.txnNumber;
    if (meta.lsid) ev.lsid = meta.lsid;
    this.emit(ev);
  }

  /**
   * Commits a transaction's writes in order as one commit boundary: a snapshot read outside the
   * transaction sees all of them or none (mongod commits a transaction at one timestamp).
   */
  commitAll(writes: DocWrite[], meta: CommitMeta): void {
    this.inCommitAll = true;
    try {
      // One applyOps entry: one cluster time for all the writes (see atOneTime).
      this.atOneTime(() => {
        for (const w of writes) this.commit(w, meta);
      });
    } finally {
      this.inCommitAll = false;
    }
    if (this.snapshots && writes.length) this.snapshotBoundary(this.snapshots, this.lastTs, this.seq);
  }

  // ---- snapshot reads outside transactions ------------------------------------
  /** Starts (or keeps) the history for snapshot reads; called by every snapshot read. */
  enableSnapshotHistory(): SnapshotHistory {
    let h = this.snapshots;
    if (!h) this.snapshots = h = new SnapshotHistory(this.lastTs, this.seq);
    h.lastUsed = Date.now();
    return h;
  }

  private snapshotBoundary(h: SnapshotHistory, ts: Timestamp, seq: number): void {
    h.record(ts, seq);
    // Trimming scans every collection's history: done every 1024 commits, so it costs O(1) a write.
    if (++h.commitsSinceMaintain < 1024) return;
    h.commitsSinceMaintain = 0;
    const now = Date.now();
    if (now - h.lastUsed > HISTORY_WINDOW_SECONDS * 1000) {
      // No snapshot read for a whole window: stop keeping history (the next one starts it again).
      this.snapshots = undefined;
      this.pruneHistory();
    } else if (h.trim(Math.floor(now / 1000), this.seq)) {
      this.pruneHistory();
    }
  }

  /** Drops before-images no running snapshot (transaction or snapshot read) can need any more. */
  pruneHistory(): void {
    const txnOldest = this.oldestSnapshot();
    const floor = this.snapshots?.floor.seq;
    const oldest = txnOldest === undefined ? floor : floor === undefined ? txnOldest : Math.min(txnOldest, floor);
    // Every transaction's commit and abort calls this; while snapshot reads keep history (up to
    // MAX_VERSIONS entries) a sweep that cannot drop anything is skipped: entries written since the
    // last sweep all lie above the same bound.
    if (oldest !== undefined && oldest === this.prunedTo) return;
    this.prunedTo = oldest;
    for (const colls of this.dbs.values()) {
      for (const c of colls.values()) {
        if (oldest === undefined) {
          c.history.clear();
          continue;
        }
        for (const [k, hist] of c.history) {
          while (hist.length && hist[0].until <= oldest) hist.shift();
          if (!hist.length) c.history.delete(k);
        }
      }
    }
  }

  /** While set, every event emitted is marked unsupported with this reason (see eventsUnsupported). */
  private unsupportedEvents: string | undefined;

  /**
   * Runs `fn` with every change event it causes marked `unsupported`: a stream that reaches one of
   * them (now, or later from an earlier resume point) refuses with NotImplemented instead of
   * reporting events mongod would not have logged (e.g. $out's drop/create/inserts, where mongod
   * logs inserts into its temporary collection and a renameCollection).
   */
  eventsUnsupported<T>(reason: string, fn: () => T): T {
    const before = this.unsupportedEvents;
    this.unsupportedEvents = reason;
    try {
      return fn();
    } finally {
      this.unsupportedEvents = before;
    }
  }

  private emit(ev: ChangeEvent): void {
    if (this.changes.listenerCount('change') === 0) return;
    if (this.unsupportedEvents !== undefined) ev = { ...ev, unsupported: this.unsupportedEvents };
    try {
      this.changes.emit('change', ev);
    } catch {
      // A faulty listener must not break the write that already happened.
    }
  }
}

export function validateNamespace(db: string, name: string): void {
  if (!db || /[/\\. "$]/.test(db)) throw new MongoCommandError(Codes.InvalidNamespace, `Invalid database name: '${db}'`);
  if (!name || name.includes('$') || name.startsWith('.') || name.includes('\0')) {
    throw new MongoCommandError(Codes.InvalidNamespace, `Invalid collection name: '${name}'`);
  }
}
