/**
 * Snapshot reads outside transactions (readConcern `{level: 'snapshot'}`, optionally with
 * `atClusterTime`; MongoDB 5.0+, driver spec sessions/snapshot-sessions.md).
 *
 * Order of the checks, as mongod makes them:
 *  1. ReadConcernArgs::parse (src/mongo/db/repl/read_concern_args.cpp): afterClusterTime with
 *     atClusterTime, afterOpTime with snapshot, atClusterTime without snapshot, null timestamps
 *     (InvalidOptions, that file's messages).
 *  2. _extractReadConcern (src/mongo/db/service_entry_point_common.cpp): the command must support
 *     the level outside a transaction, else InvalidOptions "Command <name> does not support
 *     <readConcernArgs.toString()> :: caused by :: <the command's reason>". find, aggregate and
 *     distinct support snapshot (supportsReadConcern in find_cmd.cpp, run_aggregate /
 *     LiteParsedPipeline, distinct.cpp `allSupportedAndDefaultPermitted`; jstest
 *     noPassthrough/readConcern_snapshot.js, jstests/libs/override_methods
 *     read_and_write_concern_helpers.js `kCommandsSupportingSnapshot`); count answers "read concern
 *     snapshot not supported" (count_cmd.cpp `kSnapshotNotSupported`).
 *  3. waitForReadConcernImpl (src/mongo/db/read_concern_mongod.cpp): a standalone answers
 *     NotAReplicaSet "node needs to be a replica set member to use readConcern: snapshot"; an
 *     afterClusterTime / atClusterTime above the current cluster time answers InvalidOptions
 *     "readConcern <name> value must not be greater than the current clusterTime. ..."; without
 *     atClusterTime the read uses the majority-committed snapshot (here: the latest commit) and
 *     records it as the command's atClusterTime (setArgsAtClusterTimeForSnapshot).
 *  4. The storage engine: a time below the oldest kept timestamp fails with SnapshotTooOld
 *     "Read timestamp <ts> is older than the oldest available timestamp."
 *     (WiredTigerRecoveryUnit::_txnOpen) — see storage/snapshot-history.ts for the window.
 * The reply carries the time read at: `cursor.atClusterTime` for find and aggregate
 * (CursorResponseBuilder::done, src/mongo/db/query/cursor_response.cpp, after `ns`; also on every
 * getMore of the cursor), top-level `atClusterTime` after `values` for distinct (distinct.cpp).
 * A getMore continues at the same point in time: the emulator materializes a cursor's result when
 * the command runs, so later batches are the snapshot's.
 */
import { Timestamp, type Document, type Long } from 'bson';
import type { CommandCtx, ServerState } from './context';
import { Codes, MongoCommandError, unsupported } from './errors';
import { getColl } from './namespaces';
import { View } from './query';
import { compareTs, fmt, HISTORY_WINDOW_SECONDS, NOOP_INTERVAL_SECONDS } from './storage/snapshot-history';
import { isPlainObject } from './values';

/** A snapshot read's point in time. */
export interface SnapshotRead {
  /** The commit sequence read at (View's snapshot). */
  seq: number;
  /** The cluster time read at, echoed in the reply. */
  atClusterTime: Timestamp;
  /** Whether the read picked the latest state (no atClusterTime given). */
  latest: boolean;
}

/** Commands that support readConcern snapshot outside a transaction (see header, step 2). */
const SNAPSHOT_COMMANDS = new Set(['find', 'aggregate', 'distinct']);

const invalid = (msg: string): MongoCommandError => new MongoCommandError(Codes.InvalidOptions, msg);

/** LogicalTime::toString (src/mongo/db/logical_time.cpp): its BSON, `{ ts: Timestamp(s, i) }`. */
function logicalTime(ts: Timestamp): string {
  return `{ ts: ${fmt(ts)} }`;
}

/**
 * ReadConcernArgs::toString as the "does not support" message shows it: the `readConcern` document
 * with the fields in _appendInfoInner's order and the provenance _extractReadConcern set
 * ("clientSupplied": the client sent a non-empty readConcern).
 */
function readConcernString(rc: Document): string {
  const parts = [`level: "${String(rc.level)}"`];
  if (rc.afterClusterTime instanceof Timestamp) parts.push(`afterClusterTime: ${fmt(rc.afterClusterTime)}`);
  if (rc.atClusterTime instanceof Timestamp) parts.push(`atClusterTime: ${fmt(rc.atClusterTime)}`);
  parts.push('provenance: "clientSupplied"');
  return `{ readConcern: { ${parts.join(', ')} } }`;
}

const LEVELS = new Set(['local', 'majority', 'linearizable', 'available', 'snapshot']);
/** The fields ReadConcernArgs::parse knows that a client sends (others: refused, not guessed). */
const FIELDS = new Set(['level', 'afterClusterTime', 'atClusterTime', 'afterOpTime', 'provenance']);

/** ReadConcernArgs::parse's checks that concern snapshot reads, in its order. */
function checkParse(rc: Document): void {
  for (const f of ['atClusterTime', 'afterClusterTime'] as const) {
    // bsonExtractTimestampField's type error is not traced here: refused rather than guessed.
    if (rc[f] !== undefined && !(rc[f] instanceof Timestamp)) throw unsupported(`readConcern.${f} that is not a Timestamp`);
  }
  if (rc.level !== undefined && !LEVELS.has(rc.level as string)) throw unsupported(`readConcern.level ${JSON.stringify(rc.level)} with atClusterTime`);
  for (const k of Object.keys(rc)) if (!FIELDS.has(k)) throw unsupported(`readConcern option '${k}' with snapshot reads`);
  const at = rc.atClusterTime as Timestamp | undefined;
  const after = rc.afterClusterTime as Timestamp | undefined;
  if (rc.afterOpTime !== undefined) {
    if (after) throw invalid('Can not specify both afterClusterTime and afterOpTime');
    if (rc.level === 'snapshot') throw invalid('afterOpTime field cannot be set if level is equal to snapshot');
  }
  if (after && at) {
    throw invalid(
      'Specifying a timestamp for readConcern snapshot in a causally consistent session is not allowed. See https://docs.mongodb.com/manual/core/read-isolation-consistency-recency/#causal-consistency',
    );
  }
  if (at && rc.level !== 'snapshot') throw invalid('atClusterTime field can be set only if level is equal to snapshot');
  if (at && at.t === 0) throw invalid('atClusterTime cannot be a null timestamp');
  if (after && after.t === 0 && after.i === 0) throw invalid('afterClusterTime cannot be a null timestamp');
}

/** Stages whose behaviour under a snapshot read the emulator does not model. */
function checkPipeline(cmd: Document): void {
  const pipeline = cmd.pipeline;
  if (!Array.isArray(pipeline)) return;
  for (const stage of pipeline as unknown[]) {
    if (!isPlainObject(stage)) continue;
    for (const op of ['$changeStream', '$out', '$merge']) {
      if (op in stage) throw unsupported(`readConcern snapshot outside a transaction with ${op}`);
    }
  }
}

/**
 * The point in time a command reads at, or undefined if it is not a snapshot read outside a
 * transaction. Throws mongod's error for a snapshot read mongod refuses, NotImplemented for one the
 * emulator cannot answer.
 */
export function resolveSnapshotRead(state: ServerState, cmd: Document, name: string, inTransaction: boolean): SnapshotRead | undefined {
  const rc = cmd.readConcern;
  if (!isPlainObject(rc)) return undefined;
  if (inTransaction) {
    // A transaction reads at its own snapshot (transactions.ts); one at a chosen time is not modelled.
    if (rc.atClusterTime !== undefined) throw unsupported('readConcern atClusterTime in a transaction');
    return undefined;
  }
  if (rc.level !== 'snapshot' && rc.atClusterTime === undefined) return undefined;
  checkParse(rc);
  // Step 2: the command's support for the level.
  if (name === 'count') {
    throw invalid(`Command count does not support ${readConcernString(rc)} :: caused by :: read concern snapshot not supported`);
  }
  if (!SNAPSHOT_COMMANDS.has(name)) {
    // mongod answers InvalidOptions for these (jstests core/txns/no_snapshot_writes_outside_txn.js,
    // noPassthrough/readConcern_snapshot.js), with each command's own reason, not traced here.
    throw unsupported(`readConcern snapshot outside a transaction for '${name}'`);
  }
  // Step 3.
  if (state.topology === 'standalone') {
    throw new MongoCommandError(123, 'node needs to be a replica set member to use readConcern: snapshot', {}, 'NotAReplicaSet');
  }
  if (name === 'aggregate') checkPipeline(cmd);
  const storage = state.storage;
  const current = storage.currentClusterTime();
  const after = rc.afterClusterTime as Timestamp | undefined;
  const at = rc.atClusterTime as Timestamp | undefined;
  const target = at ?? after;
  if (target && compareTs(current, target) < 0) {
    throw invalid(
      `readConcern ${at ? 'atClusterTime' : 'afterClusterTime'} value must not be greater than the current clusterTime. Requested clusterTime: ${logicalTime(target)}; current clusterTime: ${logicalTime(current)}`,
    );
  }
  const history = storage.enableSnapshotHistory();
  if (!at) return { seq: storage.seq, atClusterTime: current, latest: true };
  // Step 4. mongod's oldest timestamp trails the stable timestamp by the window; the stable
  // timestamp trails the wall clock by at most the no-op writer's interval.
  const nowSecs = Math.floor(Date.now() / 1000);
  if (at.t < nowSecs - HISTORY_WINDOW_SECONDS - NOOP_INTERVAL_SECONDS) {
    throw new MongoCommandError(239, `Read timestamp ${fmt(at)} is older than the oldest available timestamp.`, {}, 'SnapshotTooOld');
  }
  if (at.t < nowSecs - HISTORY_WINDOW_SECONDS) {
    throw unsupported(`a snapshot read at ${fmt(at)}, within ${NOOP_INTERVAL_SECONDS} s of the end of minSnapshotHistoryWindowInSeconds (whether mongod still has it depends on its no-op writer)`);
  }
  const r = history.resolve(at);
  if (r.kind !== 'ok') throw unsupported(`a snapshot read at ${fmt(at)} (${r.reason})`);
  return { seq: r.seq, atClusterTime: at, latest: false };
}

/**
 * The view of collection `name` at the command's snapshot. A collection dropped after the snapshot
 * (its data at that time is gone here) or created at or after it (7.0's point-in-time catalog
 * behaviour is not modelled) is refused; a rename counts as both (Storage.renameCollection).
 */
export function snapshotView(ctx: CommandCtx, read: SnapshotRead, name: string): View {
  const coll = getColl(ctx.exec, ctx.db, name);
  const ns = `${ctx.db}.${name}`;
  if (!read.latest) {
    if (ctx.state.storage.snapshots?.droppedAfter(ns, read.atClusterTime)) {
      throw unsupported(`a snapshot read of ${ns} at ${fmt(read.atClusterTime)}, dropped since`);
    }
    if (coll?.createdAt && compareTs(coll.createdAt, read.atClusterTime) >= 0) {
      throw unsupported(`a snapshot read of ${ns} at ${fmt(read.atClusterTime)}, created at or after that time`);
    }
    // point_in_time_lookups.js: a hint is resolved against the indexes of the read time (one built
    // since fails with BadValue, one dropped since is usable); the emulator keeps only the current
    // indexes, so a hint is refused when they changed at or after the read time.
    const hint: unknown = ctx.cmd.hint;
    const hinted = hint !== undefined && hint !== null && !(isPlainObject(hint) && '$natural' in hint);
    if (hinted && ctx.cmd[ctx.name] === name && coll?.indexesChangedAt && compareTs(coll.indexesChangedAt, read.atClusterTime) >= 0) {
      throw unsupported(`a hint in a snapshot read of ${ns} at ${fmt(read.atClusterTime)}, its indexes changed at or after that time`);
    }
  }
  return new View(coll, undefined, read.seq);
}

/** Adds the time read at to a snapshot read's reply (see header). */
export function withAtClusterTime(state: ServerState, name: string, read: SnapshotRead, reply: Document): Document {
  if (reply.ok !== 1) return reply;
  if (name === 'distinct') {
    const { values, ...rest } = reply;
    return { values, atClusterTime: read.atClusterTime, ...rest };
  }
  const cursor = reply.cursor as Document | undefined;
  if (!isPlainObject(cursor)) return reply;
  cursor.atClusterTime = read.atClusterTime;
  state.cursors.setAtClusterTime(cursor.id as Long, read.atClusterTime);
  return reply;
}
