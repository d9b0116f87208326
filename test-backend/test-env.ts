/** What a test file needs to know about the backend chosen by Jest's global setup. */
import { randomBytes } from 'node:crypto';
import { startBackendOnDataDir, type BackendKind } from './backend';

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

/** A fresh database name per test file, so files running in parallel never share data. */
export function uniqueDbName(prefix: string): string {
  const safe = prefix.replace(/[^A-Za-z0-9_]/g, '_').slice(0, 30);
  return `mpl_${safe}_${randomBytes(4).toString('hex')}`;
}

/** Starts a separate server of the active kind on `dbpath` (for restart tests). */
export async function startRestartableBackend(dbpath: string): Promise<{ uri: string; stop(): Promise<void> } | { unsupported: string }> {
  return startBackendOnDataDir(testBackendKind(), dbpath);
}
