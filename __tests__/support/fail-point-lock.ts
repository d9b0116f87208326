/**
 * The server has ONE `failCommand` fail point (mongod: src/mongo/db/commands/fail_point_cmd.cpp
 * configures the named fail point process-wide, and a new `configureFailPoint` replaces its mode
 * and data). Test files run in parallel Jest workers against one server, so one file's
 * `configureFailPoint` (or its `mode: 'off'`) would replace another's mid-test; filtering by
 * appName or namespace only keeps a fail point from hitting other files' commands, not from being
 * overwritten. Every file that configures a fail point calls `usesFailPoints()` at its top level,
 * before any other hook: it then runs while no other such file does (a lock directory per server,
 * shared by the workers of one run; a lock left by a dead process is taken over). The lock is
 * given back by the test environment's teardown (test-backend/jest-environment.ts), after every
 * hook of the file. A file that runs on a private server when it can start one calls
 * `usesFailPointsOn(() => uri)` instead: it takes the lock only when it is on the shared server.
 * On the emulator, the files that arm `failCommand` call support/private-server.ts
 * `usesPrivateServer()`: each runs on an emulator of its own and takes this lock only where no
 * private server can be started (a real mongod, a MONGODB_URI deployment, MPL_PRIVATE_SERVERS=0).
 */
import { createHash } from 'node:crypto';
import { appendFileSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** How long a file may wait for the others: several files hold the lock for up to a minute each. */
export const FAIL_POINT_WAIT_MS = 10 * 60_000;
const WAIT_MS = FAIL_POINT_WAIT_MS;

function lockDir(): string {
  const server = process.env.MONGODB_URI ?? 'no-server';
  return join(tmpdir(), `mpl-fail-point-lock-${createHash('sha256').update(server).digest('hex').slice(0, 16)}`);
}

function holderAlive(dir: string): boolean {
  try {
    const pid = Number(readFileSync(join(dir, 'pid'), 'utf8'));
    if (!Number.isInteger(pid) || pid <= 0) return false;
    process.kill(pid, 0);
    return true;
  } catch (error) {
    // EPERM: the process exists but is not ours. ENOENT: no pid file yet, alive while its holder
    // may still be writing it (a few seconds). ESRCH and anything else: dead.
    const code = (error as NodeJS.ErrnoException).code;
    if (code === 'EPERM') return true;
    if (code !== 'ENOENT') return false;
    try {
      return Date.now() - statSync(dir).mtimeMs < 5_000;
    } catch {
      return false;
    }
  }
}

/** Takes the shared server's fail-point lock (waiting for the file that holds it). */
export async function takeFailPointLock(): Promise<void> {
  await acquire();
}

async function acquire(): Promise<void> {
  const dir = lockDir();
  const started = Date.now();
  const deadline = started + WAIT_MS;
  for (;;) {
    try {
      mkdirSync(dir); // atomic: exactly one process creates it
      writeFileSync(join(dir, 'pid'), String(process.pid));
      logWait(Date.now() - started);
      return;
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code !== 'EEXIST') throw error;
    }
    if (!holderAlive(dir)) rmSync(dir, { recursive: true, force: true });
    if (Date.now() > deadline) throw new Error(`waited ${WAIT_MS} ms for the fail-point lock ${dir}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

/**
 * With MPL_FAIL_POINT_WAIT_LOG set to a file, each file that took the lock appends how long it
 * waited for it (`<test file> <ms>`): how much of a run's time the workers spent idle behind it.
 */
function logWait(ms: number): void {
  const log = process.env.MPL_FAIL_POINT_WAIT_LOG;
  if (log) appendFileSync(log, `${expect.getState().testPath ?? '?'} ${ms}\n`);
}

/** Gives the lock back if this process holds it (called by the test environment's teardown). */
export function releaseFailPointLock(): void {
  const dir = lockDir();
  try {
    if (Number(readFileSync(join(dir, 'pid'), 'utf8')) === process.pid) rmSync(dir, { recursive: true, force: true });
  } catch {
    // not held
  }
}

/** Runs this test file while no other file configures a fail point on the same server. */
export function usesFailPoints(): void {
  beforeAll(acquire, WAIT_MS + 5_000);
}

/**
 * For a file that configures its fail points on a private server when it can start one
 * (reliability/faults.test.ts, lock-many-faults.test.ts): it takes the lock only when `uri()`, the
 * server it ended up on, is the run's shared one. A private server has a fail point of its own,
 * so holding the shared server's lock there would only hold the other fail-point files up (for
 * the whole length of the file). Register it after the hook that picks the server and before any
 * hook that configures a fail point.
 */
export function usesFailPointsOn(uri: () => string | undefined): void {
  beforeAll(async () => {
    if (uri() === process.env.MONGODB_URI) await acquire();
  }, WAIT_MS + 5_000);
}
