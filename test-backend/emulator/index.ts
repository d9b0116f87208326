/**
 * Public entry point of the MongoDB wire-protocol emulator used as the
 * offline test backend. `startEmulator()` gives a URI the official driver and
 * Mongoose connect to as the primary of a one-node replica set.
 *
 * Known fidelity gaps (documented, not silent):
 *  - Number types do not round-trip. Requests are decoded with bson's
 *    promoteValues, so Int32, Int64 (when exactly representable) and Double
 *    all become JS numbers and are stored that way; on output bson encodes an
 *    integral number as Int32 (or Int64/Double when out of range) and any other
 *    number as Double. So a stored Double 1.0 comes back as Int32 1 and a small
 *    Int64 comes back as Int32. Values compare and sort correctly (MongoDB
 *    compares numbers by value across types). A `$type` query condition on a
 *    numeric type (double/int/long/decimal, 1/16/18/19) and a `$type`
 *    aggregation expression compared with a numeric type name fail with
 *    NotImplemented instead of answering from a guessed type; `$type: 'number'`
 *    is exact and allowed.
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
