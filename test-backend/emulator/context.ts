/** State shared by all connections of one emulator, and what each command handler receives. */
import type { Document, ObjectId } from 'bson';
import type { CursorRegistry } from './cursors';
import type { ChangeStreamsHook, FailPointsHook } from './hooks';
import type { SystemVars } from './query';
import type { SnapshotRead } from './snapshot-reads';
import type { Storage } from './storage/engine';
import type { Transaction, TransactionManager } from './transactions';
import type { ExecCtx } from './writes';

export type Topology = 'replset' | 'standalone';

export interface ServerParams {
  ttlMonitorSleepSecs: number;
  transactionLifetimeLimitSeconds: number;
  /** How long a command that creates its collection waits before it runs (see server.ts, createsCollection). */
  collectionCreationLatencyMs: number;
}

export interface ServerState {
  storage: Storage;
  txns: TransactionManager;
  cursors: CursorRegistry;
  params: ServerParams;
  failPoints?: FailPointsHook;
  changeStreams?: ChangeStreamsHook;
  /** 'replset': the primary of a one-node replica set (default); 'standalone': a mongod started without --replSet. */
  topology: Topology;
  replSetName: string;
  /** "host:port" as advertised in hello. */
  me: string;
  processId: ObjectId;
  electionId: ObjectId;
  startedAt: Date;
  /** Whether data survives a restart (a dbpath was given). */
  persistent?: boolean;
  /** Open connections (serverStatus). */
  connectionCount?: () => number;
  onParamsChanged(): void;
  log(line: string): void;
}

export interface CommandCtx {
  state: ServerState;
  cmd: Document;
  name: string;
  db: string;
  connectionId: number;
  txn?: Transaction;
  /** A snapshot read outside a transaction: the point in time every view of the command reads at. */
  readAt?: SnapshotRead;
  vars: SystemVars;
  exec: ExecCtx;
  /** OP_MSG exhaustAllowed flag: used by streaming hello. */
  exhaustAllowed: boolean;
  /**
   * What a retry of this retryable write answers, when it differs from the reply (findAndModify:
   * the stored image, unprojected). Set by the handler.
   */
  retryReply?: Document;
  /**
   * A retryable `update`: its statements that already wrote, by index, with their recorded
   * results (TransactionManager.executedStatements); the handler answers those and records the
   * ones it runs that write.
   */
  executedStatements?: Map<number, Document>;
  /** Resolves when the connection closes (lets long waits end early). */
  closed: Promise<void>;
}

export type Handler = (ctx: CommandCtx) => Document | Promise<Document>;
