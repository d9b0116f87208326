/**
 * Public entry point of the MongoDB wire-protocol emulator used as the
 * offline test backend. `startEmulator()` gives a URI the official driver and
 * Mongoose connect to as the primary of a one-node replica set, or, with
 * `{ topology: 'standalone' }`, as a standalone mongod.
 *
 * Rule: answer as mongod answers, refuse what mongod refuses (same code,
 * codeName, errmsg), and answer NotImplemented naming the feature for
 * anything not implemented. Each rule cites its source where it is coded; the
 * full list, the measured figures and the commands that reproduce them are in
 * FIDELITY.md next to this file.
 *
 * Modules: wire (framing), server (dispatch, transaction/session envelope
 * checks), commands/* (handlers), query (views, access paths, filters),
 * mingo-context (the one place mingo is configured: BSON-order comparisons,
 * query-operator overrides, let variables), bson-order, projection, hint,
 * let, namespaces (collections created in transactions), writes + update-rules
 * + rules/upsert (write path), query-operators, unsupported-features,
 * transactions, snapshot-reads (readConcern snapshot outside transactions, on
 * storage/snapshot-history), change-streams, failpoints + write-failpoints,
 * ttl, persistence, indexes, storage/*, views (read-only views), validation
 * (document validators), collectionless-aggregate ({aggregate: 1}).
 *
 * Known gaps (refused loudly unless stated):
 *  - Number types: Int32, Int64, Double and Decimal128 keep their BSON type
 *    (numbers.ts); update and aggregation arithmetic give mongod's types
 *    (update-arithmetic.ts, numeric-expressions.ts); operators that would
 *    meet a type they do not track are refused (NotImplemented).
 *  - Not implemented (NotImplemented naming the feature): collation; text
 *    search ($text, text indexes); geo ($near, $geoWithin, ..., 2d/2dsphere
 *    indexes); hashed indexes; $where; $jsonSchema validators and validators
 *    using operators without implemented error details (validation.ts);
 *    capped, time-series, clustered collections; views with a collation or
 *    reading other namespaces (views.ts); explain of $out/$merge, $out/$merge
 *    in sub-pipelines, $out into a database a change stream watches
 *    (aggregate-write.ts implements the rest of $out/$merge); collection-less
 *    aggregate other than $changeStream, $listLocalSessions and $documents;
 *    collMod options other than index TTL, changeStreamPreAndPostImages,
 *    validators and view definitions; renameCollection across databases;
 *    bulkWrite (8.0 client bulk write), mapReduce; change events whose exact
 *    shape is not sourced; sorting on a field holding an empty array;
 *    hinting a partial index; TTL options on _id, compound keys or out of
 *    range; request fields mongod accepts without the emulator implementing
 *    them (command-fields.ts).
 *  - Refused as mongod refuses them (code, codeName, errmsg): unknown command
 *    fields (command-fields.ts), the session envelope (session-options.ts),
 *    filter, sort and projection parse errors (query-parse.ts, sort.ts,
 *    projection.ts), index specs (index-spec.ts), PathNotViable updates
 *    (update-rules.ts); see FIDELITY.md.
 *  - Partially: the errmsg of a hint naming no index
 *    carries only mongod's key phrase, not the planner's description; the
 *    failGetMoreAfterCursorCheckout errmsg is the emulator's own;
 *    onPrimaryTransactionalWrite acts per command, not per document write;
 *    on a standalone `$$CLUSTER_TIME` is refused when the command binds its
 *    variables, also where mongod would evaluate it on no document; snapshot
 *    reads outside transactions have history from the first snapshot read on
 *    (bounded; older times and other cases refused, see snapshot-reads.ts).
 *  - Concurrency: commands run in arrival order (one connection's in order,
 *    different connections' interleaved by arrival). A change stream opened
 *    in the same tick as a write on another connection misses that write if
 *    the write arrived first; Mongoose's own tests see it on mongod. Modelling
 *    it from the client's $clusterTime was tried and reported writes mongod
 *    does not (other clients' earlier drops), so it was withdrawn: open gap.
 *  - Transactions vs. unique indexes: a non-transactional write whose unique
 *    key is held by a running transaction's uncommitted document waits for the
 *    transaction (as on mongod), then gets E11000 or succeeds. As a safety net
 *    a commit that would still clash fails with WriteConflict (the transaction
 *    is aborted) instead of overwriting the index entry.
 */
import * as fs from 'fs';
import * as path from 'path';
import { ObjectId } from 'bson';
import type { ServerState, Topology } from './context';
import { CursorRegistry } from './cursors';
import type { CreateChangeStreams, CreateFailPoints } from './hooks';
import { Persistence } from './persistence';
import { EmulatorServer } from './server';
import { Storage } from './storage/engine';
import { TransactionManager } from './transactions';
import { TtlMonitor } from './ttl';

export interface EmulatorOptions {
  /** 0 (default) picks an ephemeral port. */
  port?: number;
  /** Default 127.0.0.1. */
  host?: string;
  /** Persistence directory; in-memory only when absent. */
  dbpath?: string;
  setParameters?: { ttlMonitorSleepSecs?: number; transactionLifetimeLimitSeconds?: number };
  /** How long a command that creates a collection waits before it runs (default 20 ms; see server.ts). */
  collectionCreationLatencyMs?: number;
  /** 'replset' (default): primary of a one-node replica set; 'standalone': a mongod without --replSet. */
  topology?: Topology;
  /** Default 'rs0' (replset topology only). */
  replSetName?: string;
  log?: (line: string) => void;
}

export interface RunningEmulator {
  uri: string;
  topology: Topology;
  host: string;
  port: number;
  stop(): Promise<void>;
}

/** Loads an optional sibling module (failpoints / change-streams) if its file exists. */
function optionalModule<T>(name: string, factory: string): T | undefined {
  const exists = ['.ts', '.js'].some((ext) => fs.existsSync(path.join(__dirname, name + ext)));
  if (!exists) return undefined;
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const mod = require(`./${name}`) as Record<string, unknown>;
  return mod[factory] as T | undefined;
}

export async function startEmulator(opts: EmulatorOptions = {}): Promise<RunningEmulator> {
  const host = opts.host ?? '127.0.0.1';
  const topology: Topology = opts.topology ?? 'replset';
  if (topology !== 'replset' && topology !== 'standalone') throw new Error(`topology must be 'replset' or 'standalone' (got ${JSON.stringify(topology)})`);
  if (topology === 'standalone' && opts.replSetName !== undefined) throw new Error('replSetName needs the replset topology');
  const log = opts.log ?? (() => undefined);
  const storage = new Storage();
  const txns = new TransactionManager(storage);
  const params = {
    ttlMonitorSleepSecs: opts.setParameters?.ttlMonitorSleepSecs ?? 60,
    transactionLifetimeLimitSeconds: opts.setParameters?.transactionLifetimeLimitSeconds ?? 60,
    collectionCreationLatencyMs: opts.collectionCreationLatencyMs ?? 20,
  };
  txns.transactionLifetimeLimitSeconds = params.transactionLifetimeLimitSeconds;
  const persistence = opts.dbpath ? new Persistence(opts.dbpath, storage) : undefined;
  persistence?.open();

  const ttlRef: { monitor?: TtlMonitor } = {};
  const state: ServerState = {
    storage,
    txns,
    cursors: new CursorRegistry(),
    params,
    topology,
    replSetName: opts.replSetName ?? 'rs0',
    me: '',
    processId: new ObjectId(),
    electionId: new ObjectId('7fffffff0000000000000001'),
    startedAt: new Date(),
    persistent: !!opts.dbpath,
    onParamsChanged: () => {
      txns.transactionLifetimeLimitSeconds = params.transactionLifetimeLimitSeconds;
      ttlRef.monitor?.reschedule();
    },
    log,
  };
  const createFailPoints = optionalModule<CreateFailPoints>('failpoints', 'createFailPoints');
  if (createFailPoints) state.failPoints = createFailPoints();
  const createChangeStreams = optionalModule<CreateChangeStreams>('change-streams', 'createChangeStreams');
  if (createChangeStreams) state.changeStreams = createChangeStreams(storage);

  const server = new EmulatorServer(state);
  state.connectionCount = () => server.connectionCount;
  const port = await server.listen(opts.port ?? 0, host);
  state.me = `${host}:${port}`;
  const ttl = new TtlMonitor(state);
  ttlRef.monitor = ttl;
  ttl.start();
  // A standalone has no replica set name, so its URI names none (the driver then connects directly).
  const uri = topology === 'standalone' ? `mongodb://${host}:${port}/` : `mongodb://${host}:${port}/?replicaSet=${encodeURIComponent(state.replSetName)}`;
  log(`emulator listening on ${uri}`);

  let stopped: Promise<void> | undefined;
  return {
    uri,
    topology,
    host,
    port,
    stop: () =>
      (stopped ??= (async () => {
        ttl.stop();
        txns.close();
        state.cursors.close();
        state.changeStreams?.close?.();
        await server.close();
        persistence?.close();
      })()),
  };
}
