/**
 * Picks the MongoDB the tests, the demo and the benchmarks run against:
 *   1. MONGODB_URI, when set (any real deployment);
 *   2. a real mongod as a one-node replica set through mongodb-memory-server, when its binary
 *      is on this machine or can be downloaded;
 *   3. the project's own wire-protocol emulator (test-backend/emulator).
 * MONGO_BACKEND=uri|mongod|emulator forces one choice (and fails if it is not available).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

export type BackendKind = 'uri' | 'mongod' | 'emulator';

export interface Backend {
  kind: BackendKind;
  uri: string;
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

async function startMongod(dbPath?: string): Promise<Backend> {
  const binaryPath = await resolveMongodBinary();
  const { MongoMemoryReplSet } = await import('mongodb-memory-server');
  const replSet = await withTimeout(
    MongoMemoryReplSet.create({
      binary: { systemBinary: binaryPath },
      replSet: {
        count: 1,
        storageEngine: 'wiredTiger',
        args: ['--setParameter', 'enableTestCommands=1', '--setParameter', `ttlMonitorSleepSecs=${TTL_MONITOR_SLEEP_SECS}`],
      },
      instanceOpts: dbPath ? [{ dbPath, storageEngine: 'wiredTiger' }] : [],
    }),
    MONGOD_START_TIMEOUT_MS,
    'starting mongod',
  );
  const uri = replSet.getUri();
  return {
    kind: 'mongod',
    uri,
    description: `real mongod (${binaryPath}) as a one-node replica set via mongodb-memory-server at ${uri}`,
    stop: async () => {
      await replSet.stop({ doCleanup: !dbPath, force: false });
    },
  };
}

async function startEmulatorBackend(dbpath?: string): Promise<Backend> {
  const { startEmulator } = await import('./emulator');
  const emulator = await startEmulator({ port: 0, dbpath, setParameters: { ttlMonitorSleepSecs: TTL_MONITOR_SLEEP_SECS } });
  return {
    kind: 'emulator',
    uri: emulator.uri,
    description: `the project's MongoDB wire-protocol emulator (NOT a real mongod) at ${emulator.uri}`,
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

/** A temporary directory removed by the returned function. */
export function tempDir(prefix: string): { path: string; remove(): void } {
  const path = mkdtempSync(join(tmpdir(), prefix));
  return { path, remove: () => rmSync(path, { recursive: true, force: true }) };
}
