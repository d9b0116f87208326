/**
 * Picks the MongoDB the tests, the demo and the benchmarks run against:
 *   1. MONGODB_URI, when set (any real deployment);
 *   2. a real mongod as a one-node replica set through mongodb-memory-server, when its binary
 *      is on this machine or can be downloaded;
 *   3. the project's own wire-protocol emulator (test-backend/emulator).
 * MONGO_BACKEND=uri|mongod|emulator forces one choice (and fails if it is not available).
 * MONGO_TOPOLOGY=replset|standalone (default replset) picks what the harness starts: a one-node
 * replica set (MongoMemoryReplSet, or the emulator as a replica-set primary) or a standalone
 * (MongoMemoryServer, or the emulator as a standalone). With MONGODB_URI the topology is whatever
 * that deployment is.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export type BackendKind = 'uri' | 'mongod' | 'emulator';
export type Topology = 'replset' | 'standalone';

/** The topology the harness starts (MONGO_TOPOLOGY); MONGODB_URI deployments are asked instead. */
export function requestedTopology(): Topology {
  const t = process.env.MONGO_TOPOLOGY;
  if (t === undefined || t === '' || t === 'replset') return 'replset';
  if (t === 'standalone') return 'standalone';
  throw new Error(`MONGO_TOPOLOGY must be replset or standalone (got ${JSON.stringify(t)}).`);
}

export interface Backend {
  kind: BackendKind;
  uri: string;
  /** Known for the servers the harness starts; for MONGODB_URI the global setup asks the server. */
  topology?: Topology;
  /** One human line: what is running and where. */
  description: string;
  stop(): Promise<void>;
}

/** Server parameters the real mongod is started with; the emulator gets the same. */
const TTL_MONITOR_SLEEP_SECS = 1;
/** How long mongodb-memory-server may take to find or fetch a binary before we fall through. */
const MONGOD_RESOLVE_TIMEOUT_MS = Number(process.env.MONGO_BACKEND_MONGOD_TIMEOUT_MS ?? 8000);
const MONGOD_START_TIMEOUT_MS = 60_000;

function forcedKind(): BackendKind | undefined {
  const forced = process.env.MONGO_BACKEND;
  if (forced === undefined || forced === '') return undefined;
  if (forced === 'uri' || forced === 'mongod' || forced === 'emulator') return forced;
  throw new Error(`MONGO_BACKEND must be one of uri, mongod, emulator (got ${JSON.stringify(forced)}).`);
}

function redact(uri: string): string {
  return uri.replace(/\/\/([^@/]+)@/, '//***@');
}

function withTimeout<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not finish within ${ms} ms`)), ms);
  });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

function systemMongod(): string | undefined {
  if (process.env.MONGOMS_SYSTEM_BINARY) return process.env.MONGOMS_SYSTEM_BINARY;
  try {
    const found = execFileSync('sh', ['-c', 'command -v mongod'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    return found || undefined;
  } catch {
    return undefined;
  }
}

/** Finds a mongod binary the way mongodb-memory-server does (system binary, cache, or download). */
async function resolveMongodBinary(): Promise<string> {
  const system = systemMongod();
  if (system) return system;
  const { MongoBinary } = await import('mongodb-memory-server');
  const path = await withTimeout(MongoBinary.getPath(), MONGOD_RESOLVE_TIMEOUT_MS, 'finding or downloading a mongod binary');
  if (!path) throw new Error('mongodb-memory-server found no mongod binary');
  return path;
}

async function startMongod(dbPath?: string, topology: Topology = requestedTopology()): Promise<Backend> {
  const binaryPath = await resolveMongodBinary();
  const args = ['--setParameter', 'enableTestCommands=1', '--setParameter', `ttlMonitorSleepSecs=${TTL_MONITOR_SLEEP_SECS}`];
  if (topology === 'standalone') {
    const { MongoMemoryServer } = await import('mongodb-memory-server');
    const server = await withTimeout(
      MongoMemoryServer.create({
        binary: { systemBinary: binaryPath },
        instance: { storageEngine: 'wiredTiger', args, ...(dbPath ? { dbPath } : {}) },
      }),
      MONGOD_START_TIMEOUT_MS,
      'starting mongod',
    );
    const uri = server.getUri();
    return {
      kind: 'mongod',
      uri,
      topology,
      description: `real mongod (${binaryPath}) as a standalone via mongodb-memory-server at ${uri}`,
      stop: async () => {
        await server.stop({ doCleanup: !dbPath, force: false });
      },
    };
  }
  const { MongoMemoryReplSet } = await import('mongodb-memory-server');
  const replSet = await withTimeout(
    MongoMemoryReplSet.create({
      binary: { systemBinary: binaryPath },
      replSet: { count: 1, storageEngine: 'wiredTiger', args },
      instanceOpts: dbPath ? [{ dbPath, storageEngine: 'wiredTiger' }] : [],
    }),
    MONGOD_START_TIMEOUT_MS,
    'starting mongod',
  );
  const uri = replSet.getUri();
  return {
    kind: 'mongod',
    uri,
    topology,
    description: `real mongod (${binaryPath}) as a one-node replica set via mongodb-memory-server at ${uri}`,
    stop: async () => {
      await replSet.stop({ doCleanup: !dbPath, force: false });
    },
  };
}

async function startEmulatorBackend(dbpath?: string, topology: Topology = requestedTopology()): Promise<Backend> {
  const { startEmulator } = await import('./emulator');
  const emulator = await startEmulator({ port: 0, dbpath, topology, setParameters: { ttlMonitorSleepSecs: TTL_MONITOR_SLEEP_SECS } });
  return {
    kind: 'emulator',
    uri: emulator.uri,
    topology,
    description: `the project's MongoDB wire-protocol emulator (NOT a real mongod) as a ${topology === 'standalone' ? 'standalone' : 'one-node replica set'} at ${emulator.uri}`,
    stop: () => emulator.stop(),
  };
}

function uriBackend(): Backend {
  const uri = process.env.MONGODB_URI;
  if (!uri) throw new Error('MONGO_BACKEND=uri needs MONGODB_URI to be set.');
  return { kind: 'uri', uri, description: `MongoDB at MONGODB_URI (${redact(uri)})`, stop: async () => undefined };
}

/**
 * Starts (or points at) the backend. `notes` collects why earlier choices were passed over,
 * so the one line printed by the caller can say it.
 */
export async function startBackend(notes: string[] = []): Promise<Backend> {
  const forced = forcedKind();
  if (forced === 'uri' || (forced === undefined && process.env.MONGODB_URI)) return uriBackend();
  if (forced === 'emulator') return startEmulatorBackend();
  try {
    return await startMongod();
  } catch (error) {
    if (forced === 'mongod') throw error;
    notes.push(`no real mongod: ${(error as Error).message.split('\n')[0]}`);
  }
  return startEmulatorBackend();
}

/**
 * Starts a separate server of the given kind on a data directory, for restart tests.
 * A MONGODB_URI deployment cannot be restarted from here.
 */
export async function startBackendOnDataDir(kind: BackendKind, dbpath: string): Promise<Backend | { unsupported: string }> {
  if (kind === 'uri') return { unsupported: 'the deployment behind MONGODB_URI cannot be restarted by the tests' };
  if (kind === 'mongod') return startMongod(dbpath);
  return startEmulatorBackend(dbpath);
}

/**
 * Starts a separate, private server of the given kind and topology (for tests of one topology
 * whatever the run's topology is). A MONGODB_URI deployment cannot be started from here.
 */
export async function startBackendWithTopology(kind: BackendKind, topology: Topology): Promise<Backend | { unsupported: string }> {
  if (kind === 'uri') return { unsupported: 'the tests cannot start a server of their own next to the deployment behind MONGODB_URI' };
  if (kind === 'mongod') return startMongod(undefined, topology);
  return startEmulatorBackend(undefined, topology);
}

/** A temporary directory removed by the returned function. */
export function tempDir(prefix: string): { path: string; remove(): void } {
  const path = mkdtempSync(join(tmpdir(), prefix));
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}
