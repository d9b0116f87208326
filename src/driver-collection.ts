/**
 * The driver's collection behind a Mongoose collection, for the lock call's own commands, when
 * Mongoose's wrapper would hand the call to it unchanged (issue 16, Performance: the wrapper's
 * bookkeeping, measured in the lock + unlock cycle, cost several microseconds per command).
 *
 * What a method of Mongoose's collection does before it calls the driver's (NativeCollection,
 * lib/drivers/node-mongodb-native/collection.js, `iter`; Mongoose 8.24 and 9.12):
 *  1. throws when the connection was force-closed (`conn.$wasForceClosed`);
 *  2. queues the call while `_shouldBufferCommands() && this.buffer` (`buffer` is true until the
 *     connection first opened, lib/collection.js constructor and onOpen, which sets it false);
 *  3. prints it when the connection's `debug` option is set, else Mongoose's (`debug` of
 *     `conn.options`, else of `conn.base.options`);
 *  4. emits 'operation-start' on the connection (9.x: only when it has a listener of
 *     'operation-start' or 'operation-end'; 8.x always, seen only by such listeners);
 *  5. refuses when it has no driver collection (`_getCollection()`: `this.collection`, else one
 *     made from `conn.db`);
 * then calls the driver's method with the same arguments and returns its promise through a `.then`
 * that only emits 'operation-end' and hands the result or error on unchanged.
 * So when the driver collection exists, `buffer` is false, the connection was not force-closed,
 * no `debug` applies and nobody listens to either event, the wrapper's call is the driver's call,
 * and this returns the driver's collection; otherwise Mongoose's own, which does all of the above.
 * Also Mongoose's own when the method called is not the one Mongoose's collection class gives
 * (`conn.base.Collection.prototype[method]`): one set on the collection object itself (code that
 * wraps a model's collection to observe it) runs as before. (A patch of that prototype method
 * itself is not told apart from Mongoose's; instrumentation of the driver's own Collection, as
 * APM agents do, sees the call either way.) Checked on every call: each of these can change at
 * run time.
 */
import type { mongo } from 'mongoose';

/** What of Mongoose's collection and connection the check reads (the fields `iter` reads). */
interface MongooseCollectionInternals {
  [method: string]: unknown;
  collection?: mongo.Collection<mongo.Document> | null;
  buffer?: unknown;
  conn?: {
    $wasForceClosed?: unknown;
    options?: { debug?: unknown } | null;
    base?: { options?: { debug?: unknown } | null; Collection?: { prototype: Record<string, unknown> } } | null;
    listenerCount?: (event: string) => number;
  } | null;
}

/** The methods the lock call sends its commands with. */
export type DirectMethod = 'findOne' | 'findOneAndUpdate' | 'updateOne';

export function driverCollection<T extends mongo.Document>(collection: mongo.Collection<T>, method: DirectMethod): mongo.Collection<T> {
  const wrapper = collection as unknown as MongooseCollectionInternals;
  const driver = wrapper.collection;
  const conn = wrapper.conn;
  if (driver == null || wrapper.buffer !== false || conn == null || conn.$wasForceClosed) return collection;
  if (wrapper[method] !== conn.base?.Collection?.prototype[method] || Object.prototype.hasOwnProperty.call(wrapper, method)) return collection;
  const debug = conn.options?.debug ?? conn.base?.options?.debug;
  if (debug) return collection;
  if (typeof conn.listenerCount !== 'function' || conn.listenerCount('operation-start') > 0 || conn.listenerCount('operation-end') > 0) return collection;
  return driver as unknown as mongo.Collection<T>;
}
