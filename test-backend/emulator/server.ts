/**
 * Sockets and command dispatch.
 *
 * HOOK POINTS (contract with failpoints.ts / change-streams.ts; see hooks.ts):
 *  1. Fail points: after a message is parsed and before the command runs, the
 *     dispatcher calls `state.failPoints.intercept({ commandName, appName,
 *     connectionId, lsid, inTransaction })`. Result: undefined = proceed;
 *     {kind:'error', reply} = send reply as the answer (plus $clusterTime);
 *     {kind:'close'} = destroy the socket, no reply; {kind:'block', ms} = wait, then run.
 *     `configureFailPoint` is answered by `state.failPoints.configure(cmd)`.
 *     The module is loaded from ./failpoints (`createFailPoints()`) when present.
 *  2. Change streams: storage.changes emits 'change' (ChangeEvent) synchronously
 *     for every committed write in commit order (transactions at commit, TTL
 *     deletes, drops); `storage.lookupDocument(db, coll, id)` reads the current
 *     version. aggregate with a first `$changeStream` stage calls
 *     `state.changeStreams.openCursor(args)` and registers the returned
 *     CursorSource; getMore awaits `nextBatch` and adds `postBatchResumeToken`.
 *     The module is loaded from ./change-streams (`createChangeStreams(storage)`).
 */
import * as net from 'net';
import { Binary, Long, type Document } from 'bson';
import type { CommandCtx, Handler, ServerState } from './context';
import { adminCommands } from './commands/admin';
import { crudCommands, WRITE_COMMANDS } from './commands/crud';
import { explainCommands } from './commands/explain';
import { handshakeCommands } from './commands/handshake';
import { checkCommandFields, checkWriteBatch, parsedBeforeSession } from './command-fields';
import { Codes, MongoCommandError, toCommandError } from './errors';
import { checkSessionOptions, checkTransactionReadConcern } from './session-options';
import { evaluateLet } from './let';
import { resolveSnapshotRead, withAtClusterTime } from './snapshot-reads';
import { checkWriteConcern, withWriteConcernOutcome } from './write-concern';
import { decodeMessage, encodeOpMsg, encodeOpReply, FLAG_EXHAUST_ALLOWED, FLAG_MORE_TO_COME, MessageFramer, OP_QUERY, type IncomingMessage } from './wire';

const handlers: Record<string, Handler> = { ...handshakeCommands, ...crudCommands, ...adminCommands, ...explainCommands };

/** Fields that are generic envelope, not the command name. */
/**
 * Commands allowed in a multi-document transaction (each command's allowedInTransactions();
 * CommandHelpers::canUseTransactions in src/mongo/db/commands.cpp, re-read, answers the others with
 * OperationNotSupportedInTransaction "Cannot run '<name>' in a multi-document transaction.").
 * `count` is refused first, with its own message (canUseTransactions; transactions spec test
 * count.json expects OperationNotSupportedInTransaction).
 */
const TXN_ALLOWED = new Set(['find', 'getMore', 'insert', 'update', 'delete', 'findAndModify', 'findandmodify', 'aggregate', 'distinct', 'commitTransaction', 'abortTransaction', 'create', 'createIndexes', 'killCursors']);
/** Commands that may carry a writeConcern inside a transaction (isTransactionCommand()). */
const TXN_COMMANDS = new Set(['commitTransaction', 'abortTransaction']);

/** Commands that take a `let` document (see let.ts). */
const LET_COMMANDS = new Set(['find', 'aggregate', 'update', 'delete', 'findAndModify', 'findandmodify']);

const ZERO_SIG = { hash: new Binary(Buffer.alloc(20)), keyId: Long.ZERO };

let nextConnectionId = 1;

export class Connection {
  readonly id = nextConnectionId++;
  private readonly framer = new MessageFramer();
  private queue: Promise<void> = Promise.resolve();
  private closedResolve!: () => void;
  readonly closed = new Promise<void>((r) => (this.closedResolve = r));
  private isClosed = false;
  appName: string | undefined;

  constructor(
    private readonly socket: net.Socket,
    private readonly state: ServerState,
  ) {
    socket.setNoDelay(true);
    socket.on('data', (chunk) => this.onData(chunk));
    socket.on('error', () => this.close());
    socket.on('close', () => this.close());
  }

  close(): void {
    if (this.isClosed) return;
    this.isClosed = true;
    this.socket.destroy();
    this.closedResolve();
  }

  private onData(chunk: Buffer): void {
    let messages: Buffer[];
    try {
      messages = this.framer.push(chunk);
    } catch (e) {
      this.state.log(`connection ${this.id}: ${(e as Error).message}; closing`);
      this.close();
      return;
    }
    for (const raw of messages) {
      // Requests on one connection are answered in order.
      this.queue = this.queue.then(() => this.handle(raw)).catch((e) => {
        this.state.log(`connection ${this.id}: internal error ${(e as Error).stack ?? String(e)}`);
        this.close();
      });
    }
  }

  private async handle(raw: Buffer): Promise<void> {
    if (this.isClosed) return;
    const msg = decodeMessage(raw);
    const exhaust = (msg.flags & FLAG_EXHAUST_ALLOWED) !== 0;
    for (;;) {
      const reply = await dispatch(this.state, msg, this);
      if (reply === undefined || this.isClosed) return; // closed by a fail point
      if (msg.opCode === OP_QUERY) {
        this.socket.write(encodeOpReply(msg.requestId, reply));
        return;
      }
      if (msg.flags & FLAG_MORE_TO_COME) return; // unacknowledged write: no reply
      // Streaming hello: keep answering with moreToCome until the connection closes.
      const stream = exhaust && isHello(msg.command) && msg.command.topologyVersion !== undefined && reply.ok === 1;
      this.socket.write(encodeOpMsg(msg.requestId, reply, stream));
      if (!stream) return;
    }
  }
}

function isHello(cmd: Document): boolean {
  const n = Object.keys(cmd)[0];
  return n === 'hello' || n === 'isMaster' || n === 'ismaster';
}

/**
 * $clusterTime and operationTime are gossiped only by replica-set members:
 * `appendClusterAndOperationTime` (src/mongo/db/service_entry_point_common.cpp) returns early
 * unless the node runs with --replSet.
 */
function withClusterTime(state: ServerState, reply: Document): Document {
  if (state.topology === 'standalone') return reply;
  const ts = state.storage.currentClusterTime();
  reply.$clusterTime = { clusterTime: ts, signature: ZERO_SIG };
  reply.operationTime = ts;
  return reply;
}

/** Parses, intercepts, resolves the transaction, runs the handler; returns the reply (undefined: close without reply). */
export async function dispatch(state: ServerState, msg: IncomingMessage, conn: Connection): Promise<Document | undefined> {
  const cmd = msg.command;
  const name = Object.keys(cmd)[0] ?? '';
  let db = (cmd.$db as string | undefined) ?? 'admin';
  if (msg.opCode === OP_QUERY) {
    db = msg.fullCollectionName?.split('.')[0] ?? 'admin';
    if (!msg.fullCollectionName?.endsWith('.$cmd') || !isHello(cmd)) {
      return { ok: 0, errmsg: 'OP_QUERY is only supported for the hello/isMaster handshake', code: 352, codeName: 'UnsupportedOpQueryCommand' };
    }
  }
  if (isHello(cmd) && (cmd.client as Document | undefined)?.application) {
    conn.appName = ((cmd.client as Document).application as Document).name as string | undefined;
  }
  const inTransaction = cmd.autocommit === false;
  // integration: failpoints — txnNumber/db/command in the context; block first, then its `then` (close or error).
  const fpCtx = { commandName: name, appName: conn.appName, connectionId: conn.id, lsid: cmd.lsid as Document | undefined, inTransaction, txnNumber: cmd.txnNumber, db, command: cmd };
  if (state.failPoints) {
    let action = state.failPoints.intercept(fpCtx);
    if (action?.kind === 'block') {
      const ms = action.ms;
      await new Promise((r) => setTimeout(r, ms));
      action = action.then;
    }
    if (action?.kind === 'close') {
      conn.close();
      return undefined;
    }
    if (action?.kind === 'error') return withClusterTime(state, { ...action.reply });
  }
  // integration: failpoints — a fail point's writeConcernError is added after the command ran, as mongod does.
  const afterFailPoint = (reply: Document): Document => state.failPoints?.afterCommand?.(fpCtx, reply) ?? reply;
  const now = new Date();
  const ctx: CommandCtx = {
    state,
    cmd,
    name,
    db,
    connectionId: conn.id,
    vars: { now, clusterTime: state.storage.currentClusterTime(), clusterTimeAvailable: state.topology !== 'standalone' },
    exec: undefined as unknown as CommandCtx['exec'],
    exhaustAllowed: (msg.flags & FLAG_EXHAUST_ALLOWED) !== 0,
    closed: conn.closed,
  };
  try {
    const handler = handlers[name];
    if (!handler) throw new MongoCommandError(Codes.CommandNotFound, `no such command: '${name}'`);
    // ExecCommandDatabase::_parseCommand parses the request (the IDL's unknown fields, 40415) before
    // _initiateCommand reads its session fields (src/mongo/db/service_entry_point_common.cpp).
    if (parsedBeforeSession(name)) checkCommandFields(name, cmd);
    checkWriteBatch(name, cmd);
    // initializeOperationSessionInfo / validateSessionOptions (session-options.ts): lsid, txnNumber
    // (a replica set member only; retryable write commands only, unless in a transaction),
    // autocommit, startTransaction.
    checkSessionOptions(cmd, name, state.topology);
    // The logical session cache learns every session a command names ($listLocalSessions).
    if (cmd.lsid !== undefined) state.txns.touchSession(cmd.lsid as Document);
    if (inTransaction) {
      if (name === 'count') {
        throw new MongoCommandError(
          Codes.OperationNotSupportedInTransaction,
          "Cannot run 'count' in a multi-document transaction. Please see http://dochub.mongodb.org/core/transaction-count for a recommended alternative.",
        );
      }
      if (!TXN_ALLOWED.has(name)) throw new MongoCommandError(Codes.OperationNotSupportedInTransaction, `Cannot run '${name}' in a multi-document transaction.`);
      checkTransactionStatement(cmd, name);
      checkTransactionReadConcern(cmd);
      ctx.txn = state.txns.forCommand(cmd, name);
    }
    // Snapshot reads outside transactions (readConcern snapshot, atClusterTime; 5.0+): the point
    // in time every view of the command reads at, or mongod's refusal (snapshot-reads.ts).
    const readAt = resolveSnapshotRead(state, cmd, name, inTransaction);
    if (readAt) ctx.readAt = readAt;
    if (cmd.let !== undefined && LET_COMMANDS.has(name)) ctx.vars.let = evaluateLet(cmd.let, ctx.vars);
    ctx.exec = { storage: state.storage, txns: state.txns, txn: ctx.txn, vars: ctx.vars, db };
    const retryable = !inTransaction && WRITE_COMMANDS.has(name) && cmd.lsid !== undefined && cmd.txnNumber !== undefined;
    // An update is retried statement by statement (the handler reads ctx.executedStatements);
    // every other retryable write is answered whole.
    if (retryable && name === 'update') ctx.executedStatements = state.txns.executedStatements(cmd);
    else if (retryable) {
      const prior = state.txns.retryResult(cmd);
      // A fail point's writeConcernError applies to the retried command's reply too.
      if (prior) return withClusterTime(state, afterFailPoint({ ...prior }));
    }
    // onPrimaryTransactionalWrite (write-failpoints.ts): close the connection before the write, or after it.
    // A retried update whose statements all wrote already writes nothing now, and the fail point acts
    // "after each write" (src/mongo/db/transaction/transaction_participant.cpp), so it does not fire.
    const executed = ctx.executedStatements;
    const replayOnly = executed !== undefined && Array.isArray(cmd.updates) && cmd.updates.length > 0 && cmd.updates.every((_: unknown, i: number) => executed.has(i));
    const writeFp = retryable && !replayOnly && ctx.state.topology === 'replset' ? state.failPoints?.writes?.onRetryableWrite() : undefined;
    if (writeFp?.kind === 'closeWithoutWrite') {
      conn.close();
      return undefined;
    }
    checkWriteConcern(cmd, name, state.topology);
    if (!inTransaction && createsCollection(state, cmd, name, db)) await new Promise((r) => setTimeout(r, state.params.collectionCreationLatencyMs));
    const seqBefore = state.storage.seq;
    let reply = withWriteConcernOutcome(cmd, name, state.topology, await handler(ctx));
    if (readAt) reply = withAtClusterTime(state, name, readAt, reply);
    // A statement is recorded as executed only when it wrote (TransactionParticipant's executed
    // statements come from the oplog entries of the write, onWriteOpCompletedOnPrimary); a write
    // that changed nothing leaves no entry and runs again when retried. findAndModify records what
    // parseOplogEntryForFindAndModify rebuilds from the oplog (see crud.ts), not its projected reply.
    if (retryable && name !== 'update') state.txns.recordRetry(cmd, state.storage.seq !== seqBefore ? (ctx.retryReply ?? reply) : undefined);
    if (writeFp?.kind === 'closeAfterWrite') {
      conn.close();
      return undefined;
    }
    return withClusterTime(state, afterFailPoint(reply));
  } catch (e) {
    const err = toCommandError(e);
    if (ctx.txn && ctx.txn.state === 'active' && name !== 'commitTransaction') {
      // mongod aborts a transaction whose statement failed.
      state.txns.abort(ctx.txn, `statement ${name} failed: ${err.message}`);
    }
    return withClusterTime(state, afterFailPoint(err.toReply()));
  }
}

/**
 * Whether the command creates its collection (explicitly, or implicitly with a first insert or an
 * upsert). Such a command runs only after `collectionCreationLatencyMs`: on mongod, creating a
 * collection (a catalog entry and the storage tables of the collection and its `_id` index) takes
 * time during which commands on other connections run, so a change stream opened in the same
 * moment on another connection starts before the write commits and reports it (a new stream starts
 * one tick after the last applied operation: DocumentSourceChangeStream::getStartTimeForNewStream,
 * src/mongo/db/pipeline/document_source_change_stream.cpp). The latency is a schedule, not a rule:
 * with any value every answer is one mongod can give (the write is invisible to everyone until it
 * runs, and commands on its own connection stay in order); it only picks the interleaving mongod
 * usually shows.
 */
const CREATING_COMMANDS = new Set(['insert', 'update', 'findAndModify', 'findandmodify', 'create', 'createIndexes']);
function createsCollection(state: ServerState, cmd: Document, name: string, db: string): boolean {
  if (!CREATING_COMMANDS.has(name) || state.params.collectionCreationLatencyMs <= 0) return false;
  const coll = cmd[name];
  if (typeof coll !== 'string' || state.storage.getCollection(db, coll)) return false;
  if (name === 'update') return Array.isArray(cmd.updates) && (cmd.updates as Document[]).some((u) => u?.upsert);
  if (name === 'findAndModify' || name === 'findandmodify') return !!cmd.upsert;
  return true;
}

/**
 * validateSessionOptions / validateWriteConcernForTransaction
 * (src/mongo/db/transaction/transaction_validation.cpp).
 */
function checkTransactionStatement(cmd: Document, name: string): void {
  if (cmd.startTransaction) {
    if (name === 'killCursors') throw new MongoCommandError(Codes.OperationNotSupportedInTransaction, 'Cannot run killCursors as the first operation in a multi-document transaction.');
    if (name === 'commitTransaction') throw new MongoCommandError(Codes.OperationNotSupportedInTransaction, 'Cannot start a transaction with a commit');
    if (name === 'abortTransaction') throw new MongoCommandError(Codes.OperationNotSupportedInTransaction, 'Cannot start a transaction with an abort');
  }
  if (cmd.writeConcern !== undefined && !TXN_COMMANDS.has(name)) {
    throw new MongoCommandError(Codes.InvalidOptions, 'writeConcern is not allowed within a multi-statement transaction');
  }
}

export class EmulatorServer {
  private readonly server: net.Server;
  private readonly connections = new Set<Connection>();

  constructor(state: ServerState) {
    this.server = net.createServer((socket) => {
      const conn = new Connection(socket, state);
      this.connections.add(conn);
      socket.on('close', () => this.connections.delete(conn));
    });
  }

  get connectionCount(): number {
    return this.connections.size;
  }

  listen(port: number, host: string): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(port, host, () => {
        this.server.off('error', reject);
        resolve((this.server.address() as net.AddressInfo).port);
      });
    });
  }

  async close(): Promise<void> {
    const closed = new Promise<void>((r) => this.server.close(() => r()));
    for (const c of this.connections) c.close();
    this.connections.clear();
    await closed;
  }
}
