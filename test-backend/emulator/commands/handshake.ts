/** Handshake, server information, parameters, sessions and transaction control commands. */
import { Long, type Document } from 'bson';
import type { CommandCtx, Handler } from '../context';
import { Codes, MongoCommandError, unsupported } from '../errors';
import { MAX_WRITE_BATCH_SIZE, checkCommandFields } from '../command-fields';

export const MAX_BSON_OBJECT_SIZE = 16 * 1024 * 1024;
export const MAX_MESSAGE_SIZE = 48_000_000;

/**
 * The hello / isMaster reply. Shape from `src/mongo/db/repl/replication_info.cpp`:
 * `appendReplicationInfo` writes the replica-set fields (`fillIsMasterForReplSet`: hosts, setName,
 * setVersion, primary, me, electionId, lastWrite...) only when the node runs with --replSet; a
 * standalone answers `isWritablePrimary` (`ismaster` for the legacy command names) and
 * `topologyVersion` only. `CmdHello::run` then appends, for both, maxBsonObjectSize,
 * maxMessageSizeBytes, maxWriteBatchSize, localTime, logicalSessionTimeoutMinutes, connectionId,
 * minWireVersion, maxWireVersion and readOnly.
 */
export function helloReply(ctx: CommandCtx, legacy: boolean): Document {
  const s = ctx.state;
  const now = new Date();
  const primaryField = legacy ? 'ismaster' : 'isWritablePrimary';
  let reply: Document;
  if (s.topology === 'standalone') {
    reply = { [primaryField]: true, topologyVersion: { processId: s.processId, counter: Long.ZERO } };
  } else {
    const ts = s.storage.currentClusterTime();
    const opTime = { ts, t: Long.fromNumber(1) };
    reply = {
      topologyVersion: { processId: s.processId, counter: Long.ZERO },
      hosts: [s.me],
      setName: s.replSetName,
      setVersion: 1,
      [primaryField]: true,
      secondary: false,
      primary: s.me,
      me: s.me,
      electionId: s.electionId,
      lastWrite: { opTime, lastWriteDate: now, majorityOpTime: opTime, majorityWriteDate: now },
    };
  }
  Object.assign(reply, {
    maxBsonObjectSize: MAX_BSON_OBJECT_SIZE,
    maxMessageSizeBytes: MAX_MESSAGE_SIZE,
    maxWriteBatchSize: MAX_WRITE_BATCH_SIZE,
    localTime: now,
    logicalSessionTimeoutMinutes: 30,
    connectionId: ctx.connectionId,
    minWireVersion: 0,
    maxWireVersion: 21,
    readOnly: false,
  });
  if (ctx.cmd.helloOk) reply.helloOk = true;
  reply.ok = 1;
  return reply;
}

/**
 * Streaming hello: a monitor sends topologyVersion + maxAwaitTimeMS; the
 * topology never changes here, so we wait the full period (or until the
 * connection closes) and answer. The server loop re-sends with moreToCome.
 */
async function awaitHello(ctx: CommandCtx, legacy: boolean): Promise<Document> {
  const wait = Number(ctx.cmd.maxAwaitTimeMS ?? 0);
  if (ctx.cmd.topologyVersion && wait > 0) {
    await Promise.race([new Promise<void>((r) => setTimeout(r, wait).unref()), ctx.closed]);
  }
  return helloReply(ctx, legacy);
}

export const SERVER_VERSION = '7.0.14';
export const GIT_VERSION = 'mongoose-pessimistic-lock-emulator';

const buildInfo: Handler = () => ({
  version: SERVER_VERSION,
  gitVersion: GIT_VERSION,
  versionArray: [7, 0, 14, 0],
  bits: 64,
  debug: false,
  maxBsonObjectSize: MAX_BSON_OBJECT_SIZE,
  storageEngines: ['emulator'],
  modules: [],
  ok: 1,
});

function paramValues(ctx: CommandCtx): Document {
  return { ...ctx.state.params };
}

const getParameter: Handler = (ctx) => {
  const all = paramValues(ctx);
  const sel = ctx.cmd.getParameter;
  if (sel === '*' || (typeof sel === 'object' && sel && (sel as Document).allParameters)) return { ...all, ok: 1 };
  const out: Document = {};
  for (const k of Object.keys(ctx.cmd)) {
    if (k === 'getParameter' || k.startsWith('$') || k === 'lsid' || k === 'comment') continue;
    if (!(k in all)) throw new MongoCommandError(Codes.InvalidOptions, `no option found to get: ${k}`);
    out[k] = all[k];
  }
  if (!Object.keys(out).length) throw new MongoCommandError(Codes.InvalidOptions, 'no option found to get');
  return { ...out, ok: 1 };
};

const setParameter: Handler = (ctx) => {
  const out: Document = {};
  let changed = 0;
  for (const [k, v] of Object.entries(ctx.cmd)) {
    if (k === 'setParameter' || k.startsWith('$') || k === 'lsid' || k === 'comment') continue;
    if (k !== 'ttlMonitorSleepSecs' && k !== 'transactionLifetimeLimitSeconds') throw unsupported(`setParameter '${k}'`);
    const n = Number(v);
    if (!Number.isFinite(n) || n < 1) throw new MongoCommandError(Codes.BadValue, `Invalid value for parameter ${k}: ${String(v)}`);
    out.was = ctx.state.params[k];
    ctx.state.params[k] = n;
    changed++;
  }
  if (!changed) throw new MongoCommandError(Codes.InvalidOptions, 'no option found to set, use help:true to see options');
  ctx.state.onParamsChanged();
  return { ...out, ok: 1 };
};

const endSessions: Handler = (ctx) => {
  ctx.state.txns.endSessions((ctx.cmd.endSessions as Document[]) ?? []);
  return { ok: 1 };
};

function requireTxn(ctx: CommandCtx): NonNullable<CommandCtx['txn']> {
  if (!ctx.txn) throw new MongoCommandError(Codes.InvalidOptions, `${ctx.name} must be run within a transaction`);
  return ctx.txn;
}

const commitTransaction: Handler = (ctx) => {
  // txn_cmds.cpp parses the CommitTransaction request inside run (command-fields.ts).
  checkCommandFields(ctx.name, ctx.cmd);
  ctx.state.txns.commit(requireTxn(ctx));
  return { ok: 1 };
};

const abortTransaction: Handler = (ctx) => {
  checkCommandFields(ctx.name, ctx.cmd);
  const txn = requireTxn(ctx);
  if (txn.state === 'committed') throw new MongoCommandError(Codes.TransactionCommitted, `Transaction ${txn.txnNumber} has been committed.`);
  ctx.state.txns.abort(txn, 'abortTransaction');
  return { ok: 1 };
};

/**
 * serverStatus: the sections drivers and ODMs read (manual, "serverStatus" output: host, version,
 * process, pid, uptime, uptimeMillis, uptimeEstimate, localTime, connections, storageEngine, and repl
 * on a replica-set member). Counters the emulator does not keep (opcounters, metrics, wiredTiger...)
 * are absent rather than invented.
 */
const serverStatus: Handler = (ctx) => {
  const s = ctx.state;
  const now = new Date();
  const uptimeMillis = now.getTime() - s.startedAt.getTime();
  const reply: Document = {
    host: s.me,
    version: SERVER_VERSION,
    process: 'mongod',
    pid: Long.fromNumber(process.pid),
    uptime: Math.floor(uptimeMillis / 1000),
    uptimeMillis: Long.fromNumber(uptimeMillis),
    uptimeEstimate: Long.fromNumber(Math.floor(uptimeMillis / 1000)),
    localTime: now,
    connections: { current: ctx.state.connectionCount?.() ?? 1, available: 838_860, totalCreated: ctx.connectionId },
    storageEngine: { name: 'emulator', supportsCommittedReads: true, persistent: !!s.persistent },
  };
  if (s.topology === 'replset') {
    const hello = helloReply(ctx, false);
    reply.repl = { topologyVersion: hello.topologyVersion, hosts: hello.hosts, setName: hello.setName, setVersion: hello.setVersion, isWritablePrimary: true, secondary: false, primary: hello.primary, me: hello.me, electionId: hello.electionId };
  }
  reply.ok = 1;
  return reply;
};

const configureFailPoint: Handler = (ctx) => {
  if (!ctx.state.failPoints) throw unsupported('configureFailPoint (fail-point module not installed)');
  return ctx.state.failPoints.configure(ctx.cmd);
};

export const handshakeCommands: Record<string, Handler> = {
  hello: (ctx) => awaitHello(ctx, false),
  isMaster: (ctx) => awaitHello(ctx, true),
  ismaster: (ctx) => awaitHello(ctx, true),
  ping: () => ({ ok: 1 }),
  buildInfo,
  buildinfo: buildInfo,
  serverStatus,
  getParameter,
  setParameter,
  endSessions,
  commitTransaction,
  abortTransaction,
  configureFailPoint,
  // Harmless informational commands drivers/tools issue.
  getCmdLineOpts: () => ({ argv: ['mongod-emulator'], parsed: {}, ok: 1 }),
  hostInfo: () => ({ system: { hostname: 'localhost' }, ok: 1 }),
  connectionStatus: () => ({ authInfo: { authenticatedUsers: [], authenticatedUserRoles: [] }, ok: 1 }),
  refreshSessions: () => ({ ok: 1 }),
};
