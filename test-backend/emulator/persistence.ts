/**
 * Optional persistence to a directory: a snapshot file plus an append-only
 * journal. Every acknowledged write is appended synchronously before the reply
 * is sent, so it survives the process being killed right after. The journal
 * is folded into a fresh snapshot at startup and at clean shutdown.
 */
import * as fs from 'fs';
import * as path from 'path';
import { serialize, type Document } from 'bson';
import type { IndexSpec } from './indexes';
import type { Storage, ViewDef, WriteSink } from './storage/engine';
import { keyOf } from './values';
import { readDocument } from './wire';

const SNAPSHOT = 'snapshot.bson';
const JOURNAL = 'journal.bson';

function splitNs(ns: string): [string, string] {
  const i = ns.indexOf('.');
  return [ns.slice(0, i), ns.slice(i + 1)];
}

function* records(file: string): Iterable<Document> {
  if (!fs.existsSync(file)) return;
  const buf = fs.readFileSync(file);
  let pos = 0;
  while (pos + 4 <= buf.length) {
    const size = buf.readInt32LE(pos);
    if (size < 5 || pos + size > buf.length) break; // torn tail write: ignore
    yield readDocument(buf.subarray(pos, pos + size));
    pos += size;
  }
}

function viewRecord(v: ViewDef): Document {
  return { op: 'view', db: v.db, coll: v.name, viewOn: v.viewOn, pipeline: v.pipeline };
}

export class Persistence implements WriteSink {
  private fd: number | undefined;

  constructor(
    private readonly dir: string,
    private readonly storage: Storage,
  ) {}

  /** Loads snapshot + journal into storage, compacts, and starts journaling. */
  open(): void {
    fs.mkdirSync(this.dir, { recursive: true });
    this.storage.sink = undefined;
    for (const rec of records(path.join(this.dir, SNAPSHOT))) this.apply(rec);
    for (const rec of records(path.join(this.dir, JOURNAL))) this.apply(rec);
    this.compact();
    this.fd = fs.openSync(path.join(this.dir, JOURNAL), 'a');
    this.storage.sink = this;
  }

  private apply(r: Document): void {
    const s = this.storage;
    switch (r.op) {
      case 'coll':
        s.ensureCollection(r.db as string, r.coll as string, (r.options as Document) ?? {});
        break;
      case 'dropColl':
        if (s.getCollection(r.db as string, r.coll as string)) s.dropCollection(r.db as string, r.coll as string);
        break;
      case 'index': {
        const c = s.ensureCollection(r.db as string, r.coll as string);
        if (!c.findIndex((r.spec as IndexSpec).name)) c.addIndex(r.spec as IndexSpec);
        break;
      }
      case 'indexSpec': {
        const spec = r.spec as IndexSpec;
        const idx = s.getCollection(r.db as string, r.coll as string)?.findIndex(spec.name);
        if (idx) idx.spec.expireAfterSeconds = spec.expireAfterSeconds;
        break;
      }
      case 'rename': {
        const c = s.getCollection(r.db as string, r.coll as string);
        if (c) s.renameCollection(c, r.to as string, s.getCollection(r.db as string, r.to as string));
        break;
      }
      case 'dropIndex':
        s.getCollection(r.db as string, r.coll as string)?.dropIndex(r.name as string);
        break;
      case 'collOptions': {
        const c = s.getCollection(r.db as string, r.coll as string);
        if (c) s.setCollectionOptions(c, (r.options as Document) ?? {});
        break;
      }
      case 'view':
        s.putView({ db: r.db as string, name: r.coll as string, viewOn: r.viewOn as string, pipeline: (r.pipeline as Document[]) ?? [] });
        break;
      case 'dropView':
        s.dropView(r.db as string, r.coll as string);
        break;
      case 'put': {
        const [db, coll] = splitNs(r.ns as string);
        const c = s.ensureCollection(db, coll);
        const doc = r.doc as Document;
        const key = keyOf(doc._id);
        const prev = c.docs.get(key);
        if (prev) for (const idx of c.indexes) idx.remove(prev.doc, key);
        c.docs.set(key, { doc, seq: 0 });
        for (const idx of c.indexes) idx.add(doc, key);
        break;
      }
      case 'del': {
        const [db, coll] = splitNs(r.ns as string);
        const c = s.getCollection(db, coll);
        const key = keyOf(r.id);
        const prev = c?.docs.get(key);
        if (c && prev) {
          for (const idx of c.indexes) idx.remove(prev.doc, key);
          c.docs.delete(key);
        }
        break;
      }
    }
  }

  /** Writes the whole state as a new snapshot (atomic rename) and empties the journal. */
  compact(): void {
    const tmp = path.join(this.dir, `${SNAPSHOT}.tmp`);
    const fd = fs.openSync(tmp, 'w');
    const chunks: Uint8Array[] = [];
    let size = 0;
    const flush = (): void => {
      if (chunks.length) fs.writeSync(fd, Buffer.concat(chunks, size));
      chunks.length = 0;
      size = 0;
    };
    const put = (d: Document): void => {
      const b = serialize(d);
      chunks.push(b);
      size += b.length;
      if (size > 4 * 1024 * 1024) flush();
    };
    for (const db of this.storage.databaseNames()) {
      for (const c of this.storage.collections(db)) {
        put({ op: 'coll', db, coll: c.name, options: c.options });
        for (const idx of c.indexes) put({ op: 'index', db, coll: c.name, spec: idx.spec });
        for (const rec of c.docs.values()) put({ op: 'put', ns: c.ns, doc: rec.doc });
      }
      for (const v of this.storage.views(db)) put(viewRecord(v));
    }
    flush();
    fs.fsyncSync(fd);
    fs.closeSync(fd);
    fs.renameSync(tmp, path.join(this.dir, SNAPSHOT));
    if (this.fd !== undefined) fs.ftruncateSync(this.fd, 0);
    else fs.writeFileSync(path.join(this.dir, JOURNAL), Buffer.alloc(0));
  }

  private append(r: Document): void {
    if (this.fd === undefined) return;
    fs.writeSync(this.fd, serialize(r));
  }

  putDoc(ns: string, doc: Document): void {
    this.append({ op: 'put', ns, doc });
  }
  deleteDoc(ns: string, id: unknown): void {
    this.append({ op: 'del', ns, id });
  }
  createCollection(db: string, coll: string, options: Document): void {
    this.append({ op: 'coll', db, coll, options });
  }
  dropCollection(db: string, coll: string): void {
    this.append({ op: 'dropColl', db, coll });
  }
  createIndex(db: string, coll: string, spec: IndexSpec): void {
    this.append({ op: 'index', db, coll, spec });
  }
  dropIndex(db: string, coll: string, name: string): void {
    this.append({ op: 'dropIndex', db, coll, name });
  }
  updateIndex(db: string, coll: string, spec: IndexSpec): void {
    this.append({ op: 'indexSpec', db, coll, spec });
  }
  renameCollection(db: string, coll: string, to: string): void {
    this.append({ op: 'rename', db, coll, to });
  }
  updateCollectionOptions(db: string, coll: string, options: Document): void {
    this.append({ op: 'collOptions', db, coll, options });
  }
  putView(view: ViewDef): void {
    this.append(viewRecord(view));
  }
  dropView(db: string, coll: string): void {
    this.append({ op: 'dropView', db, coll });
  }

  close(): void {
    if (this.fd === undefined) return;
    this.storage.sink = undefined;
    this.compact();
    fs.closeSync(this.fd);
    this.fd = undefined;
  }
}
