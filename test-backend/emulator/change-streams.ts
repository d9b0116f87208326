/**
 * Change streams (`aggregate` whose first stage is `$changeStream`), shaped as mongod's.
 *
 * Public interface (the core uses it, see hooks.ts):
 *   createChangeStreams(source, { historyLimit? }): ChangeStreams
 *   changeStreams.openCursor({ db, coll?, options, pipeline, command }) -> ChangeStreamCursor
 *     a CursorSource: nextBatch(batchSize, { maxAwaitTimeMS }), postBatchResumeToken(), close(), ns,
 *     plus `exhausted` (true once the stream returned its `invalidate` event: mongod then closes
 *     the cursor, i.e. answers cursor id 0)
 *   changeStreams.close()   detaches from storage and closes every open stream
 *
 * How it works: every committed change the storage publishes is numbered (`seq`) and kept in a
 * bounded in-memory history (default 10,000 events). A stream is a position in that history: it
 * has consumed every event up to `position`. A resume token encodes a position (plus the event's
 * cluster time and an id of this emulator instance), so resuming after token T yields exactly
 * the events after T. A position older than the history answers ChangeStreamHistoryLost (286),
 * as mongod does when the oplog no longer reaches back that far.
 *
 * Events are built when they are read, not when they happen, because `fullDocument: 'updateLookup'`
 * must show the document as it is at read time (or null once deleted).
 *
 * Supported: collection, database (`aggregate: 1`) and whole-cluster (`allChangesForCluster` on
 * admin) streams; insert/update/replace/delete/drop/rename/dropDatabase/invalidate events, and with
 * showExpandedEvents create/createIndexes/dropIndexes/modify, collectionUUID, operationDescription
 * and disambiguatedPaths; fullDocument 'default' | 'updateLookup' | 'whenAvailable' | 'required' and
 * fullDocumentBeforeChange 'off' | 'whenAvailable' | 'required' (images exist for collections with
 * changeStreamPreAndPostImages); updateDescription from mongod's $v:2 diff (update-description.ts);
 * resumeAfter, startAfter, startAtOperationTime; the stages mongod allows after $changeStream, run
 * by mingo.
 * Rejected loudly: $changeStreamSplitLargeEvent, unknown options, stages mongod forbids in a change
 * stream, and events whose exact shape is not reproduced (`ChangeEvent.unsupported`).
 */
import { randomBytes } from 'node:crypto';
import { calculateObjectSize, Timestamp, type Document } from 'bson';
import type { Aggregator } from 'mingo';
import { makeAggregator } from './mingo-context';
import { MongoCommandError } from './errors';
import type { ChangeEvent, ChangeSource, ChangeStreamsHook, CursorSource, OpenChangeStreamArgs } from './hooks';
import { describeUpdate, type UpdateOutcome } from './update-description';
import { clone, isPlainObject } from './values';

export const DEFAULT_HISTORY_LIMIT = 10_000;
/** mongod's default wait of an awaitData getMore that gives no maxTimeMS. */
const DEFAULT_AWAIT_MS = 1000;
/** A batch stops growing once its events reach this many bytes (mongod's 16 MiB reply limit). */
const MAX_BATCH_BYTES = 16 * 1024 * 1024 - 64 * 1024;
const MAX_BATCH_EVENTS = 100_000;

const Code = {
  BadValue: 2,
  FailedToParse: 9,
  TypeMismatch: 14,
  IllegalOperation: 20,
  InvalidNamespace: 73,
  NotImplemented: 238,
  InvalidResumeToken: 260,
  ChangeStreamFatalError: 280,
  ChangeStreamHistoryLost: 286,
  UnknownField: 40415,
  MultipleResumeOptions: 40674,
  NoMatchingDocument: 47,
} as const;

const CODE_NAMES: Record<number, string> = {
  40323: 'Location40323',
  40324: 'Location40324',
  2: 'BadValue',
  9: 'FailedToParse',
  14: 'TypeMismatch',
  20: 'IllegalOperation',
  73: 'InvalidNamespace',
  238: 'NotImplemented',
  260: 'InvalidResumeToken',
  280: 'ChangeStreamFatalError',
  286: 'ChangeStreamHistoryLost',
  47: 'NoMatchingDocument',
};

/**
 * ChangeStreamFatalError (280) and ChangeStreamHistoryLost (286) are in the NonResumableChangeStreamError
 * category (src/mongo/base/error_codes.yml), and every reply with such a code carries that label
 * (ErrorLabelBuilder::isNonResumableChangeStreamError / build, src/mongo/db/error_labels.cpp).
 */
const NON_RESUMABLE = new Set<number>([Code.ChangeStreamFatalError, Code.ChangeStreamHistoryLost]);

function fail(code: number, errmsg: string): never {
  throw new MongoCommandError(code, errmsg, NON_RESUMABLE.has(code) ? { errorLabels: ['NonResumableChangeStreamError'] } : {}, CODE_NAMES[code] ?? `Location${code}`);
}

/** Stages mongod accepts after $changeStream; they keep one output per event, so resuming stays exact. */
const ALLOWED_STAGES = new Set(['$match', '$project', '$addFields', '$set', '$unset', '$replaceRoot', '$replaceWith', '$redact']);
/** Stage names mongod knows (the ones mingo implements plus the ones the emulator refuses). */
// eslint-disable-next-line @typescript-eslint/no-require-imports
const KNOWN_STAGES = new Set([...Object.keys(require('mingo/operators/pipeline') as object), '$out', '$merge', '$geoNear', '$search', '$searchMeta', '$collStats', '$indexStats', '$currentOp', '$listSessions', '$planCacheStats', '$changeStreamSplitLargeEvent', '$documents', '$unionWith', '$lookup', '$graphLookup', '$facet']);
const KNOWN_OPTIONS = new Set(['fullDocument', 'fullDocumentBeforeChange', 'resumeAfter', 'startAfter', 'startAtOperationTime', 'allChangesForCluster', 'showExpandedEvents']);
const FULL_DOCUMENT = ['default', 'updateLookup', 'whenAvailable', 'required'] as const;
const FULL_DOCUMENT_BEFORE = ['off', 'whenAvailable', 'required'] as const;
/** Databases a whole-cluster stream does not report, as mongod. */
const INTERNAL_DBS = new Set(['admin', 'config', 'local']);

// ---------------------------------------------------------------------------------------------
// Resume tokens

type TokenKind = 'event' | 'highWaterMark' | 'invalidate';
const KIND_BYTE: Record<TokenKind, number> = { event: 1, highWaterMark: 2, invalidate: 3 };
const BYTE_KIND: Record<number, TokenKind> = { 1: 'event', 2: 'highWaterMark', 3: 'invalidate' };

interface TokenData {
  clusterTime: Timestamp;
  /** Every event with seq <= position has been consumed. */
  position: number;
  kind: TokenKind;
  instance: string;
}

/**
 * `_data` is upper-case hex, like mongod's: 0x82, cluster time (t, i), kind, position, instance.
 * Leading with the cluster time keeps tokens ordered the way mongod's are. The events of one
 * transaction share its cluster time (one applyOps entry); mongod tells them apart and orders them
 * by the token's txnOpIndex (ResumeTokenData, resume_token.cpp; set by
 * DocumentSourceChangeStreamUnwindTransaction), the emulator by the position, which grows with it.
 */
function encodeToken(d: TokenData): Document {
  const hex = (n: number, width: number): string => n.toString(16).padStart(width, '0');
  const data = `82${hex(d.clusterTime.t, 8)}${hex(d.clusterTime.i, 8)}${hex(KIND_BYTE[d.kind], 2)}${hex(d.position, 16)}${d.instance}`;
  return { _data: data.toUpperCase() };
}

function decodeToken(token: unknown, option: string): TokenData {
  const data = isPlainObject(token) ? token._data : undefined;
  if (typeof data !== 'string') fail(Code.FailedToParse, `$changeStream.${option} must be a resume token document { _data: <string> }`);
  const m = /^82([0-9A-F]{8})([0-9A-F]{8})([0-9A-F]{2})([0-9A-F]{16})([0-9A-F]{8})$/.exec(data);
  const kind = m ? BYTE_KIND[parseInt(m[3], 16)] : undefined;
  if (!m || !kind) fail(Code.InvalidResumeToken, `$changeStream.${option}: ${JSON.stringify(data)} is not a resume token issued by this emulator`);
  return {
    clusterTime: new Timestamp({ t: parseInt(m[1], 16), i: parseInt(m[2], 16) }),
    kind,
    position: parseInt(m[4], 16),
    instance: m[5],
  };
}

function compareTimestamps(a: Timestamp, b: Timestamp): number {
  return a.t !== b.t ? a.t - b.t : a.i - b.i;
}

// ---------------------------------------------------------------------------------------------
// History

interface Recorded {
  seq: number;
  ev: ChangeEvent;
  wallTime: Date;
}

/** The last `limit` committed changes, numbered from 1 in commit order. */
class ChangeHistory {
  private entries: Recorded[] = [];
  private lastSeq = 0;
  /** Cluster time of the newest event already dropped from the history, if any. */
  lostUpTo: Timestamp | undefined;

  constructor(readonly limit: number) {}

  add(ev: ChangeEvent): void {
    this.entries.push({ seq: ++this.lastSeq, ev, wallTime: new Date() });
    // Trim in chunks so adding stays O(1) amortised; the history never exceeds 1.1 x limit.
    if (this.entries.length > this.limit + Math.max(1, Math.floor(this.limit / 10))) {
      const dropped = this.entries.splice(0, this.entries.length - this.limit);
      this.lostUpTo = dropped[dropped.length - 1].ev.clusterTime;
    }
  }

  get latest(): number {
    return this.lastSeq;
  }

  /** Whether the events after `position` are all still here. */
  reaches(position: number): boolean {
    const first = this.entries.length ? this.entries[0].seq : this.lastSeq + 1;
    return position + 1 >= first;
  }

  at(seq: number): Recorded | undefined {
    const first = this.entries.length ? this.entries[0].seq : this.lastSeq + 1;
    return this.entries[seq - first];
  }

  /** Position just before the first retained event at or after `time`. */
  positionBefore(time: Timestamp): number {
    const found = this.entries.find((r) => compareTimestamps(r.ev.clusterTime, time) >= 0);
    return found ? found.seq - 1 : this.lastSeq;
  }
}

// ---------------------------------------------------------------------------------------------
// Streams

type FullDocumentMode = (typeof FULL_DOCUMENT)[number];
type BeforeChangeMode = (typeof FULL_DOCUMENT_BEFORE)[number];
type Scope = { kind: 'collection'; db: string; coll: string } | { kind: 'database'; db: string } | { kind: 'cluster' };

interface StreamSpec {
  scope: Scope;
  /** showExpandedEvents: DDL events, collectionUUID, operationDescription, disambiguatedPaths. */
  expanded: boolean;
  fullDocument: FullDocumentMode;
  fullDocumentBeforeChange: BeforeChangeMode;
  position: number;
  minClusterTime?: Timestamp;
  /** The resume point is a drop that invalidates this stream: its next event is `invalidate`. */
  invalidateDue: boolean;
  stages: Document[];
}

function enumOption<T extends string>(options: Document, name: string, allowed: readonly T[], dflt: T): T {
  const v = options[name];
  if (v === undefined) return dflt;
  if (typeof v !== 'string') fail(Code.TypeMismatch, `BSON field '$changeStream.${name}' is the wrong type '${typeof v}', expected type 'string'`);
  if (!(allowed as readonly string[]).includes(v)) fail(Code.BadValue, `Enumeration value '${v}' for field '$changeStream.${name}' is not a valid value.`);
  return v as T;
}

function parseScope(args: OpenChangeStreamArgs): Scope {
  const cluster = args.options.allChangesForCluster;
  if (cluster !== undefined && typeof cluster !== 'boolean') fail(Code.TypeMismatch, "BSON field '$changeStream.allChangesForCluster' must be a boolean");
  if (cluster) {
    if (args.db !== 'admin' || args.coll !== undefined) {
      fail(Code.InvalidNamespace, "A $changeStream with 'allChangesForCluster:true' may only be opened on the 'admin' database, and with no collection name");
    }
    return { kind: 'cluster' };
  }
  if (INTERNAL_DBS.has(args.db)) fail(Code.InvalidNamespace, `$changeStream may not be opened on the internal ${args.db} database`);
  if (args.coll === undefined) return { kind: 'database', db: args.db };
  if (args.coll.startsWith('system.')) fail(Code.InvalidNamespace, `$changeStream may not be opened on the internal ${args.db}.${args.coll} collection`);
  return { kind: 'collection', db: args.db, coll: args.coll };
}

function parseStages(pipeline: Document[]): Document[] {
  for (const stage of pipeline) {
    const names = isPlainObject(stage) ? Object.keys(stage) : [];
    // LiteParsedDocumentSource::parse (lite_parsed_document_source.cpp, re-read): 40323.
    if (names.length !== 1) fail(40323, 'A pipeline stage specification object must contain exactly one field.');
    const name = names[0];
    if (name === '$changeStreamSplitLargeEvent') fail(Code.NotImplemented, '$changeStreamSplitLargeEvent is not supported by the mongoose-pessimistic-lock emulator');
    // A second $changeStream: refused by mongod (pipeline.cpp validateCommon, 40602), errmsg not sourced (see crud.ts).
    if (name === '$changeStream') fail(Code.NotImplemented, '$changeStream after the first stage (mongod refuses it; its errmsg is not sourced here) is not supported by the mongoose-pessimistic-lock emulator');
    // An unknown stage name fails as in any pipeline (LiteParsedDocumentSource::parse,
    // src/mongo/db/pipeline/lite_parsed_document_source.cpp, re-read: 40324 "Unrecognized
    // pipeline stage name"; change-streams spec test change-streams.json expects 40324 for
    // '$unsupported'); a known stage that a change stream does not allow is IllegalOperation.
    if (!ALLOWED_STAGES.has(name) && !KNOWN_STAGES.has(name)) fail(40324, `Unrecognized pipeline stage name: '${name}'`);
    if (!ALLOWED_STAGES.has(name)) fail(Code.IllegalOperation, `${name} is not permitted in a $changeStream pipeline`);
  }
  return pipeline;
}

/** DDL events shown only with showExpandedEvents (manual, "Change Events"; jstests/change_streams/show_expanded_events.js). */
const EXPANDED_TYPES = new Set<string>(['create', 'createIndexes', 'dropIndexes', 'modify']);

/**
 * Does this event belong to the stream, and does it end (invalidate) the stream?
 * change_stream_filter_helpers.cpp: buildOperationFilter (a rename is seen by the streams of its
 * source and of its target: `o.renameCollection` or `o.to` matches) and buildInvalidationFilter (a
 * collection stream ends at the drop of its collection, a rename from or to it, its database's drop;
 * a database stream at its database's drop; a cluster stream never). A view's create comes from
 * system.views, which only database and cluster streams read (ChangeStreamEventTransformer::getBuilder).
 */
function classify(spec: Pick<StreamSpec, 'scope' | 'expanded'>, ev: ChangeEvent): { visible: boolean; invalidates: boolean } {
  const scope = spec.scope;
  const { db, coll } = ev.ns;
  const shown = spec.expanded || !EXPANDED_TYPES.has(ev.operationType);
  switch (scope.kind) {
    case 'collection': {
      if (db !== scope.db) return { visible: false, invalidates: false };
      if (ev.operationType === 'dropDatabase') return { visible: false, invalidates: true };
      if (ev.viewDefinition) return { visible: false, invalidates: false };
      const renamedOnto = ev.operationType === 'rename' && ev.to?.db === scope.db && ev.to.coll === scope.coll;
      const mine = coll === scope.coll || renamedOnto;
      return { visible: mine && shown, invalidates: mine && (ev.operationType === 'drop' || ev.operationType === 'rename') };
    }
    case 'database': {
      if (db !== scope.db || coll?.startsWith('system.')) return { visible: false, invalidates: false };
      return { visible: shown, invalidates: ev.operationType === 'dropDatabase' };
    }
    case 'cluster':
      return { visible: shown && !INTERNAL_DBS.has(db) && !coll?.startsWith('system.'), invalidates: false };
  }
}

export class ChangeStreams implements ChangeStreamsHook {
  private readonly history: ChangeHistory;
  /** Identifies tokens of this emulator run: the history is in memory and dies with it. */
  readonly instance = randomBytes(4).toString('hex').toUpperCase();
  private readonly wakers = new Set<() => void>();
  private readonly open = new Set<ChangeStreamCursor>();
  private readonly listener = (ev: ChangeEvent): void => this.record(ev);

  constructor(
    readonly source: ChangeSource,
    opts: { historyLimit?: number } = {},
  ) {
    this.history = new ChangeHistory(opts.historyLimit ?? DEFAULT_HISTORY_LIMIT);
    // Listen from the start, not from the first stream: a later resume must find earlier events.
    source.changes.on('change', this.listener);
  }

  openCursor(args: OpenChangeStreamArgs): ChangeStreamCursor {
    const spec = this.parse(args);
    const cursor = new ChangeStreamCursor(this, spec, this.nsOf(spec.scope, args));
    this.open.add(cursor);
    return cursor;
  }

  close(): void {
    this.source.changes.off('change', this.listener);
    for (const c of [...this.open]) c.close();
    this.wake();
  }

  // ---- used by cursors --------------------------------------------------------------------

  get historyView(): ChangeHistory {
    return this.history;
  }

  /** Resolves at the next committed change, after `ms`, or when `cancel` is called. */
  waitForChange(ms: number): { done: Promise<void>; cancel: () => void } {
    let cancel!: () => void;
    const done = new Promise<void>((resolve) => {
      const timer = setTimeout(() => cancel(), ms);
      cancel = () => {
        clearTimeout(timer);
        this.wakers.delete(cancel);
        resolve();
      };
      this.wakers.add(cancel);
    });
    return { done, cancel };
  }

  forget(cursor: ChangeStreamCursor): void {
    this.open.delete(cursor);
  }

  token(clusterTime: Timestamp, position: number, kind: TokenKind): Document {
    return encodeToken({ clusterTime, position, kind, instance: this.instance });
  }

  // ---- internals --------------------------------------------------------------------------

  private record(ev: ChangeEvent): void {
    this.history.add(ev);
    this.wake();
  }

  private wake(): void {
    for (const w of [...this.wakers]) w();
  }

  private nsOf(scope: Scope, args: OpenChangeStreamArgs): string {
    return scope.kind === 'collection' ? `${scope.db}.${scope.coll}` : `${args.db}.$cmd.aggregate`;
  }

  private parse(args: OpenChangeStreamArgs): StreamSpec {
    const options = args.options;
    if (!isPlainObject(options)) fail(Code.TypeMismatch, "the $changeStream stage specification must be an object, e.g. { $changeStream: {} }");
    const unknown = Object.keys(options).filter((k) => !KNOWN_OPTIONS.has(k));
    if (unknown.length) fail(Code.UnknownField, `BSON field '$changeStream.${unknown[0]}' is an unknown field.`);
    const expanded = options.showExpandedEvents;
    // The IDL's TypeMismatch message for a non-boolean is not sourced here.
    if (expanded !== undefined && typeof expanded !== 'boolean') fail(Code.NotImplemented, '$changeStream.showExpandedEvents with a non-boolean value is not supported by the mongoose-pessimistic-lock emulator');
    const scope = parseScope(args);
    const fullDocument = enumOption(options, 'fullDocument', FULL_DOCUMENT, 'default');
    const fullDocumentBeforeChange = enumOption(options, 'fullDocumentBeforeChange', FULL_DOCUMENT_BEFORE, 'off');
    const stages = parseStages(args.pipeline);

    const resumeOptions = ['resumeAfter', 'startAfter', 'startAtOperationTime'].filter((k) => options[k] !== undefined);
    if (resumeOptions.length > 1) fail(Code.MultipleResumeOptions, 'Only one type of resume option is allowed, but multiple were found.');
    const spec: StreamSpec = { scope, expanded: expanded === true, fullDocument, fullDocumentBeforeChange, position: this.history.latest, invalidateDue: false, stages };

    const which = resumeOptions[0];
    if (which === 'startAtOperationTime') {
      const at = options.startAtOperationTime as unknown;
      if ((at as { _bsontype?: string } | null)?._bsontype !== 'Timestamp') fail(Code.TypeMismatch, "BSON field '$changeStream.startAtOperationTime' must be a Timestamp");
      const time = at as Timestamp;
      const lost = this.history.lostUpTo;
      if (lost && compareTimestamps(lost, time) >= 0) this.historyLost('startAtOperationTime');
      spec.position = this.history.positionBefore(time);
      spec.minClusterTime = time;
    } else if (which === 'resumeAfter' || which === 'startAfter') {
      const token = decodeToken(options[which], which);
      if (token.instance !== this.instance) {
        fail(Code.ChangeStreamHistoryLost, `cannot resume this change stream: its resume token comes from another run of the emulator, whose change history (kept in memory only) is gone`);
      }
      if (token.position > this.history.latest) fail(Code.ChangeStreamFatalError, 'cannot resume stream; the resume token was not found');
      if (!this.history.reaches(token.position)) this.historyLost(which);
      if (token.kind === 'invalidate' && which === 'resumeAfter') {
        fail(Code.InvalidResumeToken, "Attempting to resume a change stream using 'resumeAfter' is not allowed from an invalidate notification.");
      }
      spec.position = token.position;
      // Only an event token can sit on an invalidating event the stream returned; a high-water mark's
      // position was consumed before the stream existed (e.g. the collection's earlier drop).
      if (token.kind === 'event') {
        const at = this.history.at(token.position);
        spec.invalidateDue = at !== undefined && classify(spec, at.ev).invalidates;
      }
    }
    return spec;
  }

  private historyLost(option: string): never {
    return fail(Code.ChangeStreamHistoryLost, `Resume of change stream was not possible (${option}), as the resume point may no longer be in the emulator's change history (it keeps the last ${this.history.limit} events in memory)`);
  }
}

export class ChangeStreamCursor implements CursorSource {
  private position: number;
  private invalidateDue: boolean;
  private done = false;
  private closed = false;
  private pbrt: Document;
  private readonly pipeline: Aggregator | undefined;
  private pendingWait: { cancel: () => void } | undefined;

  constructor(
    private readonly hub: ChangeStreams,
    private readonly spec: StreamSpec,
    readonly ns: string,
  ) {
    this.position = spec.position;
    this.invalidateDue = spec.invalidateDue;
    this.pipeline = spec.stages.length ? makeAggregator(spec.stages) : undefined;
    this.pbrt = this.highWaterMark();
  }

  /** True once the `invalidate` event was returned: the server closes such a cursor. */
  get exhausted(): boolean {
    return this.done;
  }

  postBatchResumeToken(): Document {
    return this.pbrt;
  }

  async nextBatch(batchSize: number, opts: { maxAwaitTimeMS?: number }): Promise<Document[]> {
    const limit = batchSize > 0 ? Math.min(batchSize, MAX_BATCH_EVENTS) : MAX_BATCH_EVENTS;
    const out = this.collect(limit);
    if (out.length > 0 || this.done || this.closed) return out;
    // awaitData: wait for the next committed change, re-scan, until something passes or time is up.
    const deadline = Date.now() + (opts.maxAwaitTimeMS ?? DEFAULT_AWAIT_MS);
    for (let left = deadline - Date.now(); left > 0 && !this.closed; left = deadline - Date.now()) {
      const wait = this.hub.waitForChange(left);
      this.pendingWait = wait;
      await wait.done;
      this.pendingWait = undefined;
      if (this.closed) break;
      out.push(...this.collect(limit));
      if (out.length > 0 || this.done) break;
    }
    // Time passed without events: the high-water mark moves on to the current cluster time.
    if (out.length === 0 && !this.done && !this.closed) this.pbrt = this.highWaterMark();
    return out;
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.pendingWait?.cancel();
    this.hub.forget(this);
  }

  /** Reads what is available now, advancing the position over every event it examined. */
  private collect(limit: number): Document[] {
    const out: Document[] = [];
    if (this.closed || this.done) return out;
    const history = this.hub.historyView;
    if (!history.reaches(this.position)) {
      fail(Code.ChangeStreamHistoryLost, `the change stream fell behind the emulator's change history (events before it were discarded); resume it is not possible from position ${this.position}`);
    }
    let bytes = 0;
    let lastReturnedAtPosition = false;
    while (out.length < limit) {
      if (this.invalidateDue) {
        const at = history.at(this.position);
        const clusterTime = at ? at.ev.clusterTime : this.hub.source.currentClusterTime();
        const token = this.hub.token(clusterTime, this.position, 'invalidate');
        this.invalidateDue = false;
        this.done = true;
        const doc = this.present({ _id: token, operationType: 'invalidate', clusterTime, wallTime: at?.wallTime ?? new Date() });
        if (doc) out.push(doc);
        this.pbrt = token;
        return out;
      }
      const next = history.at(this.position + 1);
      if (!next) break;
      this.position = next.seq;
      lastReturnedAtPosition = false;
      const { visible, invalidates } = classify(this.spec, next.ev);
      if (invalidates) this.invalidateDue = true;
      if (!visible) continue;
      if (this.spec.minClusterTime && compareTimestamps(next.ev.clusterTime, this.spec.minClusterTime) < 0) continue;
      const doc = this.present(this.build(next));
      if (!doc) continue;
      bytes += calculateObjectSize(doc);
      out.push(doc);
      lastReturnedAtPosition = true;
      if (bytes >= MAX_BATCH_BYTES) break;
    }
    // mongod's postBatchResumeToken: the last event's own token if the batch ends at it, else a high-water mark.
    this.pbrt = lastReturnedAtPosition ? this.hub.token(history.at(this.position)!.ev.clusterTime, this.position, 'event') : this.highWaterMark();
    return out;
  }

  private highWaterMark(): Document {
    return this.hub.token(this.hub.source.currentClusterTime(), this.position, 'highWaterMark');
  }

  /**
   * The event document, built at read time so that updateLookup sees the current document. Field
   * order as ChangeStreamDefaultEventTransformation::applyTransformation (change_stream_event_transform.cpp)
   * adds them: a rename's `to` first, then _id, operationType, clusterTime, collectionUUID (expanded),
   * wallTime, fullDocument, ns, documentKey, operationDescription (expanded), updateDescription,
   * stateBeforeChange; the pre-image stage then appends fullDocumentBeforeChange.
   */
  private build(r: Recorded): Document {
    const ev = r.ev;
    if (ev.unsupported) fail(Code.NotImplemented, `${ev.unsupported} is not supported by the mongoose-pessimistic-lock emulator`);
    const expanded = this.spec.expanded;
    let op: string = ev.operationType;
    let update: UpdateOutcome | undefined;
    // A source may give the description itself (`updateDescription`) or the update (`update`).
    if (op === 'update' && !ev.update && ev.updateDescription) update = { description: ev.updateDescription };
    if (op === 'update' && ev.update) {
      update = describeEventUpdate(ev);
      if (update.unsupported) fail(Code.NotImplemented, `${update.unsupported} is not supported by the mongoose-pessimistic-lock emulator`);
      // A pipeline update mongod logs as a replacement is a `replace` event.
      if (update.replace) op = 'replace';
    }
    // The pre-image stage runs before the post-image stage (DocumentSourceChangeStream::buildPipeline).
    const wantsPre = this.spec.fullDocumentBeforeChange !== 'off' && (op === 'update' || op === 'replace' || op === 'delete');
    const before = wantsPre ? this.preImage(ev, op) : undefined;
    const doc: Document = {};
    if (op === 'rename' && ev.to) doc.to = { ...ev.to };
    doc._id = this.hub.token(ev.clusterTime, r.seq, 'event');
    doc.operationType = op;
    doc.clusterTime = ev.clusterTime;
    if (expanded && ev.collectionUUID && !ev.viewDefinition) doc.collectionUUID = ev.collectionUUID;
    doc.wallTime = r.wallTime;
    if (op === 'insert') doc.fullDocument = clone(ev.fullDocument ?? null);
    else if (op === 'replace') doc.fullDocument = clone(ev.fullDocument ?? ev.update?.after ?? null);
    else if (op === 'update') doc.fullDocument = this.postImage(ev, op);
    doc.ns = ev.ns.coll === undefined ? { db: ev.ns.db } : { db: ev.ns.db, coll: ev.ns.coll };
    if (ev.documentKey) doc.documentKey = clone(ev.documentKey);
    if (expanded && ev.operationDescription) doc.operationDescription = clone(ev.operationDescription);
    if (op === 'update' && update?.description) {
      const d = update.description;
      doc.updateDescription = { updatedFields: clone(d.updatedFields), removedFields: [...d.removedFields], truncatedArrays: clone(d.truncatedArrays) };
      // disambiguatedPaths is reported with showExpandedEvents only (6.1+).
      if (expanded) doc.updateDescription.disambiguatedPaths = clone(d.disambiguatedPaths ?? {});
    }
    if (ev.stateBeforeChange) doc.stateBeforeChange = clone(ev.stateBeforeChange);
    if (before !== undefined) doc.fullDocumentBeforeChange = before;
    if (doc.fullDocument === undefined) delete doc.fullDocument;
    if (ev.lsid) doc.lsid = clone(ev.lsid);
    if (ev.txnNumber !== undefined) doc.txnNumber = ev.txnNumber;
    return doc;
  }

  /**
   * fullDocument of an update event. updateLookup reads the document now; whenAvailable / required
   * use the recorded post-image (DocumentSourceChangeStreamAddPostImage::generatePostImage applies the
   * update to the pre-image, which exists only with changeStreamPreAndPostImages); 'required' without
   * one fails NoMatchingDocument (document_source_change_stream_add_post_image.cpp, doGetNext).
   */
  private postImage(ev: ChangeEvent, op: string): Document | null | undefined {
    const mode = this.spec.fullDocument;
    if (mode === 'updateLookup') return clone(ev.ns.coll ? this.hub.source.lookupDocument(ev.ns.db, ev.ns.coll, ev.documentKey?._id) : null);
    if (mode === 'default') return undefined;
    if (ev.postImage) return clone(ev.postImage);
    if (mode === 'required') {
      fail(Code.NoMatchingDocument, `Change stream was configured to require a post-image for all update events, but the post-image was not found for event: ${imageErrorContext(ev, op)}`);
    }
    return null;
  }

  /** fullDocumentBeforeChange (document_source_change_stream_add_pre_image.cpp, doGetNext). */
  private preImage(ev: ChangeEvent, op: string): Document | null {
    if (ev.preImage) return clone(ev.preImage);
    if (this.spec.fullDocumentBeforeChange === 'required') {
      fail(Code.NoMatchingDocument, `Change stream was configured to require a pre-image for all update, delete and replace events, but the pre-image was not found for event: ${imageErrorContext(ev, op)}`);
    }
    return null;
  }

  /** Runs the user's stages (mingo); null when they filter the event out. */
  private present(doc: Document): Document | null {
    if (!this.pipeline) return doc;
    const [result] = this.pipeline.run<Document>([doc]);
    if (!result) return null;
    const id = result._id as Document | undefined;
    const original = doc._id as Document;
    if (!isPlainObject(id) || Object.keys(id).length !== 1 || id._data !== original._data) {
      fail(
        Code.ChangeStreamFatalError,
        'Encountered an event whose _id field, which contains the resume token, was modified by the pipeline. Modifying the _id field of an event makes it impossible to resume the stream from that point. Only transformations that retain the unmodified _id field are allowed.',
      );
    }
    return result;
  }
}

/** The update event's description, computed once per event (only streams that read it pay for it). */
const describedUpdates = new WeakMap<ChangeEvent, UpdateOutcome>();
function describeEventUpdate(ev: ChangeEvent): UpdateOutcome {
  let out = describedUpdates.get(ev);
  if (!out) {
    const u = ev.update!;
    out = describeUpdate(u.before, u.after, u.source);
    describedUpdates.set(ev, out);
  }
  return out;
}

/**
 * DocumentSourceChangeStreamAddPreImage::makePreImageNotFoundErrorMsg: Document::toString() of
 * { operationType, ns, clusterTime, txnNumber } (missing fields skipped; strings quoted; a
 * Timestamp as Timestamp(t, i)).
 */
function imageErrorContext(ev: ChangeEvent, op: string): string {
  const ns = ev.ns;
  const nsText = ns.coll === undefined ? `{db: "${ns.db}"}` : `{db: "${ns.db}", coll: "${ns.coll}"}`;
  const parts = [`operationType: "${op}"`, `ns: ${nsText}`, `clusterTime: Timestamp(${ev.clusterTime.t}, ${ev.clusterTime.i})`];
  if (ev.txnNumber !== undefined) parts.push(`txnNumber: ${String(ev.txnNumber)}`);
  return `{${parts.join(', ')}}`;
}

export function createChangeStreams(source: ChangeSource, opts: { historyLimit?: number } = {}): ChangeStreams {
  return new ChangeStreams(source, opts);
}
