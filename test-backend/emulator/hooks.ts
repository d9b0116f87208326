/**
 * Hook interfaces shared between the emulator core and the parallel modules
 * `failpoints.ts` and `change-streams.ts`. Kept dependency-free on purpose, so
 * either side can compile against it while the other is still being written.
 */
import type { Document, Timestamp } from 'bson';

/** What the dispatcher tells the fail-point module about each command, after parsing and before executing it. */
export interface CommandContext {
  commandName: string;
  appName?: string;
  connectionId: number;
  lsid?: Document;
  inTransaction: boolean;
  // integration: failpoints — retryable-write labels need txnNumber; `data.namespace` needs db + command.
  txnNumber?: unknown;
  db?: string;
  command?: Document;
}

/** A fail point's verdict on one command. `undefined` from `intercept` means "proceed". */
export type FailPointAction =
  | { kind: 'error'; reply: Document }
  | { kind: 'close' }
  | { kind: 'block'; ms: number; then?: { kind: 'error'; reply: Document } | { kind: 'close' } }; // integration: failpoints (mongod blocks, then closes or fails)

export interface FailPointsHook {
  intercept(ctx: CommandContext): FailPointAction | undefined;
  /** Handles the whole `configureFailPoint` command document; returns the reply. */
  configure(cmd: Document): Document;
  /** integration: failpoints — after the command ran: adds a fail point's writeConcernError (and labels) to its reply. */
  afterCommand?(ctx: CommandContext, reply: Document): Document;
  /** onPrimaryTransactionalWrite / failGetMoreAfterCursorCheckout (write-failpoints.ts). */
  readonly writes?: import('./write-failpoints').WriteFailPoints;
}

/** A committed change, emitted synchronously in commit order on `storage.changes`. */
export interface ChangeEvent {
  operationType: 'insert' | 'update' | 'replace' | 'delete' | 'drop' | 'dropDatabase' | 'invalidate' | 'rename' | ExpandedOperationType;
  ns: { db: string; coll?: string };
  documentKey?: { _id: unknown };
  fullDocument?: Document;
  updateDescription?: UpdateDescription;
  clusterTime: Timestamp;
  txnNumber?: unknown;
  lsid?: Document;
  // integration: change-stream events (change-stream-events.ts) — the fields below are set by the
  // storage only where mongod's oplog entry carries them (change_stream_event_transform.cpp).
  /** The collection's UUID (every event but dropDatabase/invalidate); shown with showExpandedEvents. */
  collectionUUID?: import('bson').UUID;
  /** rename: the target namespace (top-level `to`, and `operationDescription.to`). */
  to?: { db: string; coll: string };
  /** DDL events: mongod's `operationDescription` (shown with showExpandedEvents only). */
  operationDescription?: Document;
  /** modify: `stateBeforeChange` ({ collectionOptions, indexOptions? }). */
  stateBeforeChange?: Document;
  /** A view's create (an insert into system.views): seen by database and cluster streams only. */
  viewDefinition?: boolean;
  /**
   * update/replace/delete on a collection with changeStreamPreAndPostImages enabled: the document
   * before the write (mongod's config.system.preimages entry). Absent: no pre-image was recorded.
   */
  preImage?: Document;
  /** update on such a collection: the document after the write (mongod computes it from the pre-image). */
  postImage?: Document;
  /** update: what the event's updateDescription is computed from, when a stream reads it. */
  update?: { before: Document; after: Document; source?: import('./update-description').UpdateSource };
  /** The event's shape is not reproduced here: a stream that would return it refuses (NotImplemented). */
  unsupported?: string;
}

/** DDL events a change stream shows only with `showExpandedEvents` (manual, "Change Events"). */
export type ExpandedOperationType = 'create' | 'createIndexes' | 'dropIndexes' | 'modify';

/** updateDescription as mongod builds it from the $v:2 diff (change_stream_document_diff_parser.cpp). */
export interface UpdateDescription {
  updatedFields: Document;
  removedFields: string[];
  truncatedArrays: Document[];
  /** Paths whose dotted form is ambiguous (numeric or dotted field names), as arrays of parts. */
  disambiguatedPaths?: Document;
}

/** The subset of storage the change-stream module needs. */
export interface ChangeSource {
  /** Node EventEmitter: `changes.on('change', (ev: ChangeEvent) => ...)`. */
  readonly changes: import('events').EventEmitter;
  /** Current committed version of a document (for `fullDocument: 'updateLookup'`), or null if absent. */
  lookupDocument(db: string, coll: string, id: unknown): Document | null;
  /** The cluster time of the latest committed write (or now if none yet). */
  currentClusterTime(): Timestamp;
}

/**
 * A cursor whose batches are produced asynchronously (change streams). The
 * cursor registry calls `nextBatch` for the first batch of `aggregate` and for
 * every `getMore`, and adds `postBatchResumeToken` to the reply when present.
 */
export interface CursorSource {
  nextBatch(batchSize: number, opts: { maxAwaitTimeMS?: number }): Promise<Document[]>;
  postBatchResumeToken?(): Document;
  close(): void;
  readonly ns: string;
  /** integration: change streams — true once the source will produce nothing more (after `invalidate`): the cursor is closed, id 0. */
  readonly exhausted?: boolean;
}

/** What `aggregate` passes to the change-stream module when the first stage is `$changeStream`. */
export interface OpenChangeStreamArgs {
  db: string;
  /** Collection name, or undefined for a database-wide (`aggregate: 1`) stream. */
  coll?: string;
  /** The `$changeStream` stage's options document. */
  options: Document;
  /** The remaining pipeline stages after `$changeStream`. */
  pipeline: Document[];
  /** The full aggregate command, for anything else needed (collation, comment...). */
  command: Document;
}

export interface ChangeStreamsHook {
  /** Throws an Error with a `code` property (or returns a rejected promise) to fail the aggregate. */
  openCursor(args: OpenChangeStreamArgs): CursorSource | Promise<CursorSource>;
  /** Called on emulator stop. */
  close?(): void;
}

/**
 * Factories the emulator looks for (in failpoints.ts / change-streams.ts):
 *   export function createFailPoints(): FailPointsHook
 *   export function createChangeStreams(source: ChangeSource): ChangeStreamsHook
 * If a module is missing, the emulator answers configureFailPoint / $changeStream
 * with an error naming the missing feature.
 */
export type CreateFailPoints = () => FailPointsHook;
export type CreateChangeStreams = (source: ChangeSource) => ChangeStreamsHook;
