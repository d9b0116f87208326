/**
 * The TTL monitor: every `ttlMonitorSleepSecs` it deletes documents whose
 * indexed date plus `expireAfterSeconds` is in the past, through the normal
 * committed delete path (so change streams see the deletes). Documents
 * locked by a running transaction are skipped until a later pass.
 */
import type { Document } from 'bson';
import type { ServerState } from './context';
import { getPath } from './values';
import { numericValue } from './indexes';

export function expiryOf(value: unknown, expireAfterSeconds: number): number | undefined {
  const dates = (Array.isArray(value) ? value : [value]).filter((v): v is Date => v instanceof Date);
  if (!dates.length) return undefined; // non-date values never expire
  const earliest = Math.min(...dates.map((d) => d.getTime()));
  return earliest + expireAfterSeconds * 1000;
}

export class TtlMonitor {
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(private readonly state: ServerState) {}

  start(): void {
    this.schedule();
  }

  /** Called when ttlMonitorSleepSecs changes: the new period applies from now. */
  reschedule(): void {
    if (this.timer) clearTimeout(this.timer);
    this.schedule();
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      try {
        this.pass();
      } catch (e) {
        this.state.log(`TTL monitor pass failed: ${(e as Error).message}`);
      }
      this.schedule();
    }, this.state.params.ttlMonitorSleepSecs * 1000);
    this.timer.unref();
  }

  /** One pass over every TTL index. */
  pass(now = Date.now()): number {
    const { storage } = this.state;
    let deleted = 0;
    for (const db of storage.databaseNames()) {
      for (const coll of storage.collections(db)) {
        const ttl = coll.indexes.filter((i) => i.spec.expireAfterSeconds !== undefined && i.fields.length === 1);
        if (!ttl.length) continue;
        const expired: Array<[string, Document]> = [];
        for (const [key, rec] of coll.docs) {
          for (const idx of ttl) {
            const at = expiryOf(getPath(rec.doc, idx.fields[0]), numericValue(idx.spec.expireAfterSeconds)!);
            if (at !== undefined && at <= now) {
              expired.push([key, rec.doc]);
              break;
            }
          }
        }
        for (const [key, doc] of expired) {
          if (storage.locks.has(storage.lockKey(coll, key))) continue;
          if (coll.docs.get(key)?.doc !== doc) continue;
          storage.commit({ coll, key, before: doc, after: null, kind: 'delete' });
          deleted++;
        }
      }
    }
    return deleted;
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
  }
}
