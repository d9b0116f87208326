/**
 * The independent record of the stall tests: every change event of a database or collection from
 * the moment the stream is open, collected in the background until `stop()`. The first `tryNext`
 * opens the stream (the driver sends `aggregate` with `$changeStream` and gets a cursor), so what
 * is written after this resolves is captured. Needs a replica set (change streams).
 */
import { mongo } from 'mongoose';
import { sleep } from './db';

export interface ChangeRecord {
  events: mongo.ChangeStreamDocument[];
  /** Waits `settleMs` for the last events to arrive, then closes the stream (and its client). */
  stop(settleMs?: number): Promise<void>;
}

/** Records the changes of `target` (a database or a collection) matching `pipeline`. */
export async function recordChanges(target: mongo.Db | mongo.Collection, pipeline: mongo.Document[] = [], onStop?: () => Promise<void>): Promise<ChangeRecord> {
  const stream: mongo.ChangeStream = target.watch(pipeline);
  const events: mongo.ChangeStreamDocument[] = [];
  const first = await stream.tryNext();
  if (first) events.push(first);
  const collecting = (async () => {
    try {
      for (;;) events.push(await stream.next());
    } catch {
      // closed
    }
  })();
  return {
    events,
    async stop(settleMs = 500) {
      await sleep(settleMs);
      await stream.close();
      await collecting;
      await onStop?.();
    },
  };
}

/**
 * The same through a client of its own at `uri` (no fail point aimed at a test's connections can
 * hold its getMores), closed by `stop()`. `collection` narrows the stream to one collection.
 */
export async function recordChangesOf(uri: string, dbName: string, options: { collection?: string; pipeline?: mongo.Document[] } = {}): Promise<ChangeRecord> {
  const watcher = new mongo.MongoClient(uri);
  await watcher.connect();
  const database = watcher.db(dbName);
  return recordChanges(options.collection ? database.collection(options.collection) : database, options.pipeline ?? [], () => watcher.close());
}
