/**
 * A server of the test file's own, for the long files that arm `failCommand`: the server has one
 * such fail point (support/fail-point-lock.ts), so on the run's shared server these files run one
 * after another, and the Jest workers that wait for them stand idle. On a private server a file's
 * fail points reach no other file, so it need not wait for the others nor hold them up.
 *
 * `usesPrivateServer()`, called at the top of a test file instead of `usesFailPoints()` (before
 * any other hook), starts a private emulator of the run's topology in a process of its own
 * (support/private-emulator.ts) and points this file's MONGODB_URI at it: every connection the file
 * opens, and every child process it spawns, uses it. The test environment's teardown stops it
 * (test-backend/jest-environment.ts stopPrivateServer), after every hook of the file. On a real
 * mongod or a MONGODB_URI deployment, or with MPL_PRIVATE_SERVERS=0, the file runs on the shared
 * server and takes the fail-point lock as before.
 */
import { spawn } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { testBackendKind, testTopology } from '../../test-backend/test-env';
import { takeFailPointLock, FAIL_POINT_WAIT_MS } from './fail-point-lock';

/** Where a Jest worker records the pid of its file's private server (read by the environment's teardown). */
function pidFile(): string {
  const dir = join(tmpdir(), 'mpl-private-servers');
  mkdirSync(dir, { recursive: true });
  return join(dir, String(process.pid));
}

async function startPrivateEmulator(): Promise<string> {
  const child = spawn(process.execPath, ['--import', 'tsx', join(__dirname, 'private-emulator.ts'), testTopology()], { stdio: ['pipe', 'pipe', 'pipe'] });
  writeFileSync(pidFile(), String(child.pid));
  // Neither the child nor its pipes keep the Jest worker alive: the environment's teardown stops
  // the server, and a worker that ends first closes its stdin, which stops it too.
  child.unref();
  for (const pipe of [child.stdin, child.stdout, child.stderr]) (pipe as unknown as { unref?: () => void }).unref?.();
  let errors = '';
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => (errors = (errors + chunk).slice(-5_000)));
  return new Promise<string>((resolve, reject) => {
    let out = '';
    child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
      out += chunk;
      const newline = out.indexOf('\n');
      if (newline >= 0) resolve(out.slice(0, newline));
    });
    child.on('exit', (code) => reject(new Error(`the private emulator exited (${code}) before it listened: ${errors}`)));
    setTimeout(() => reject(new Error(`the private emulator did not listen within 60 s: ${errors}`)), 60_000).unref();
  });
}

export function usesPrivateServer(): void {
  beforeAll(async () => {
    if (testBackendKind() !== 'emulator' || process.env.MPL_PRIVATE_SERVERS === '0') return takeFailPointLock();
    process.env.MONGODB_URI = await startPrivateEmulator();
  }, FAIL_POINT_WAIT_MS + 60_000);
}

/** Stops the private server this Jest worker started for its last file, if any (the environment's teardown). */
export function stopPrivateServer(): void {
  const file = join(tmpdir(), 'mpl-private-servers', String(process.pid));
  try {
    const pid = Number(readFileSync(file, 'utf8'));
    rmSync(file, { force: true });
    if (Number.isInteger(pid) && pid > 0) process.kill(pid, 'SIGTERM');
  } catch {
    // none started, or already gone
  }
}
