/**
 * Picks the MongoDB the tests, the demo and the benchmarks run against:
 *   1. MONGODB_URI, when set (any real deployment);
 *   2. a real mongod as a one-node replica set through mongodb-memory-server, when its binary
 *      is on this machine (MONGOMS_SYSTEM_BINARY, `mongod` on PATH, or mongodb-memory-server's
 *      cache), or is downloaded because that was asked for (MONGO_BACKEND=mongod, or
 *      MONGOMS_RUNTIME_DOWNLOAD=1): offline, an unasked download only spends seconds failing;
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
/** How long a download of mongod (asked for) may take before we give up on it. */
const MONGOD_DOWNLOAD_TIMEOUT_MS = Number(process.env.MONGO_BACKEND_MONGOD_TIMEOUT_MS ?? 300_000);
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

/** An error message on one line (mongodb-memory-server's put the reason on the next line). */
function oneLine(message: string): string {
  return message.split('\n').map((line) => line.trim()).filter(Boolean).join(' ');
}

interface MongodBinary {
  path: string;
  /** Where it came from (`from PATH`), for the one line the demo and the tests print. */
  from: string;
}

function systemMongod(): MongodBinary | undefined {
  if (process.env.MONGOMS_SYSTEM_BINARY) return { path: process.env.MONGOMS_SYSTEM_BINARY, from: 'MONGOMS_SYSTEM_BINARY' };
  try {
    const found = execFileSync('sh', ['-c', 'command -v mongod'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    return found ? { path: found, from: 'PATH' } : undefined;
  } catch {
    return undefined;
  }
}

/** Whether fetching a mongod was asked for: MONGO_BACKEND=mongod, or mongodb-memory-server's own switch set explicitly. */
function downloadAsked(): boolean {
  if (forcedKind() === 'mongod') return true;
  return ['1', 'on', 'yes', 'true'].includes((process.env.MONGOMS_RUNTIME_DOWNLOAD ?? '').toLowerCase());
}

/**
 * Finds a mongod binary: MONGOMS_SYSTEM_BINARY or PATH, then mongodb-memory-server's cache
 * (DryMongoBinary.locateBinary, the lookup MongoBinary.getPath makes before it downloads:
 * MONGOMS_DOWNLOAD_DIR, node_modules/.cache/mongodb-memory-server, ~/.cache/mongodb-binaries),
 * then a download, only when asked for.
 */
async function resolveMongodBinary(): Promise<MongodBinary> {
  const system = systemMongod();
  if (system) return system;
  const { DryMongoBinary, MongoBinary } = await import('mongodb-memory-server');
  const cached = await DryMongoBinary.locateBinary(await DryMongoBinary.generateOptions());
  if (cached) return { path: cached, from: "mongodb-memory-server's cache" };
  if (!downloadAsked()) throw new Error("no mongod on PATH or in mongodb-memory-server's cache (MONGOMS_RUNTIME_DOWNLOAD=1 downloads one)");
  const path = await withTimeout(MongoBinary.getPath(), MONGOD_DOWNLOAD_TIMEOUT_MS, 'downloading a mongod binary');
  return { path, from: "mongodb-memory-server's download" };
}

async function startMongod(dbPath?: string, topology: Topology = requestedTopology()): Promise<Backend> {
  const binary = await resolveMongodBinary();
  try {
    return await startMongodBinary(binary, dbPath, topology);
  } catch (error) {
    throw new Error(`mongod ${binary.path} (from ${binary.from}) did not start: ${oneLine((error as Error).message)}`);
  }
}

async function startMongodBinary(binary: MongodBinary, dbPath: string | undefined, topology: Topology): Promise<Backend> {
  const binaryPath = binary.path;
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
      description: `real mongod ${binaryPath} (from ${binary.from}) as a standalone via mongodb-memory-server at ${uri}`,
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
    description: `real mongod ${binaryPath} (from ${binary.from}) as a one-node replica set via mongodb-memory-server at ${uri}`,
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
    notes.push(`no real mongod: ${oneLine((error as Error).message)}`);
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
