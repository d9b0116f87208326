/** What a test file needs to know about the backend chosen by Jest's global setup. */
import { randomBytes } from 'node:crypto';
import { requestedTopology, startBackendOnDataDir, startBackendWithTopology, type BackendKind, type Topology } from './backend';

export function testUri(): string {
  const uri = process.env.MONGODB_URI;
  if (!uri) throw new Error('MONGODB_URI is not set: run the tests through jest (its globalSetup picks the backend).');
  return uri;
}

export function testBackendKind(): BackendKind {
  const kind = process.env.MPL_TEST_BACKEND;
  if (kind === 'uri' || kind === 'mongod' || kind === 'emulator') return kind;
  return process.env.MONGODB_URI ? 'uri' : 'emulator';
}

/**
 * The topology of the backend the tests run against: 'replset' (a replica-set member or a mongos:
 * transactions and change streams work) or 'standalone'. The global setup determines it (for
 * MONGODB_URI from the server's hello) and hands it to the workers in MPL_TEST_TOPOLOGY.
 */
export function testTopology(): Topology {
  const t = process.env.MPL_TEST_TOPOLOGY;
  if (t === 'replset' || t === 'standalone') return t;
  if (testBackendKind() === 'uri') throw new Error('MPL_TEST_TOPOLOGY is not set: run the tests through jest (its globalSetup asks the server).');
  return requestedTopology();
}

/** A fresh database name per test file, so files running in parallel never share data. */
export function uniqueDbName(prefix: string): string {
  const safe = prefix.replace(/[^A-Za-z0-9_]/g, '_').slice(0, 30);
  return `mpl_${safe}_${randomBytes(4).toString('hex')}`;
}

/** Starts a separate server of the active kind on `dbpath` (for restart tests). */
export async function startRestartableBackend(dbpath: string): Promise<{ uri: string; stop(): Promise<void> } | { unsupported: string }> {
  return startBackendOnDataDir(testBackendKind(), dbpath);
}

/**
 * A private server of the active kind with the given topology, or, when the run's own deployment
 * (MONGODB_URI) already has that topology, that deployment (stop() then does nothing).
 */
export async function startPrivateBackend(topology: Topology): Promise<{ uri: string; stop(): Promise<void> } | { unsupported: string }> {
  if (testBackendKind() === 'uri') {
    if (testTopology() === topology) return { uri: testUri(), stop: async () => undefined };
    return { unsupported: `the deployment behind MONGODB_URI is not a ${topology} and the tests cannot start one next to it` };
  }
  return startBackendWithTopology(testBackendKind(), topology);
}
