/**
 * Helpers shared by the conformance suite: clients on the active backend, exact error
 * assertions, bounded waits, and capability probes for deployments the tests cannot control.
 */
import * as os from 'node:os';
import { execFileSync } from 'node:child_process';
import { MongoClient, MongoServerError, type Document, type MongoClientOptions, type ObjectId } from 'mongodb';
import { testBackendKind, testTopology, testUri } from '../../../test-backend/test-env';

export { testBackendKind, testTopology, testUri, uniqueDbName } from '../../../test-backend/test-env';

/** A connected client on the active backend. Every test file closes its clients in afterAll. */
export async function openClient(options: MongoClientOptions = {}): Promise<MongoClient> {
  // The driver loads `os` with a dynamic import() for its handshake metadata; Jest's module
  // sandbox refuses dynamic imports, and the driver then sends an empty `client` document, so
  // no server would see the appName. Handing it the module directly keeps the handshake whole.
  const client = new MongoClient(testUri(), { serverSelectionTimeoutMS: 5000, runtimeAdapters: { os }, ...options });
  await client.connect();
  return client;
}

/** Awaits `promise`, requires it to reject with a MongoServerError of exactly `code`, returns the error. */
export async function expectServerError(promise: Promise<unknown>, code: number): Promise<MongoServerError> {
  let outcome: unknown;
  try {
    outcome = await promise;
  } catch (error) {
    if (!(error instanceof MongoServerError)) {
      throw new Error(`expected a MongoServerError with code ${code}, got ${describeError(error)}`);
    }
    if (error.code !== code) {
      throw new Error(`expected server error code ${code}, got code ${String(error.code)} (${error.codeName ?? '?'}): ${error.message}`);
    }
    return error;
  }
  throw new Error(`expected a server error with code ${code}, but the operation succeeded with ${safeJson(outcome)}`);
}

/** Settles a promise into a value or an error, never throwing. */
export async function settle<T>(promise: Promise<T>): Promise<{ ok: true; value: T } | { ok: false; error: unknown }> {
  try {
    return { ok: true, value: await promise };
  } catch (error) {
    return { ok: false, error };
  }
}

export function describeError(error: unknown): string {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    return `${error.name}${code === undefined ? '' : ` code ${String(code)}`}: ${error.message}`;
  }
  return safeJson(error);
}

function safeJson(value: unknown): string {
  try {
    return JSON.stringify(value);
  } catch {
    return String(value);
  }
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Rejects if `promise` has not settled within `ms`. */
export async function within<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: not done within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([promise, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** Polls `check` until it returns true or the deadline passes; returns whether it became true. */
export async function pollUntil(check: () => Promise<boolean>, deadlineMs: number, intervalMs = 100): Promise<boolean> {
  const end = Date.now() + deadlineMs;
  for (;;) {
    if (await check()) return true;
    if (Date.now() >= end) return false;
    await sleep(intervalMs);
  }
}

/** Runs a command on the admin database and returns the reply. */
export function adminCommand(client: MongoClient, command: Document): Promise<Document> {
  return client.db('admin').command(command);
}

export interface DeploymentFacts {
  /** The replica set name from `hello`, or undefined on a standalone. */
  setName?: string;
  /** Whether `configureFailPoint` is available (mongod started with enableTestCommands=1). */
  failPoints: boolean;
  /** Why `failPoints` is false. */
  failPointsReason?: string;
}

let cachedFacts: DeploymentFacts | undefined;

/**
 * What the deployment can do, known synchronously at test-collection time (Jest decides skips
 * before any hook runs). The harness's own backends run with test commands enabled, as a one-node
 * replica set or, with MONGO_TOPOLOGY=standalone, as a standalone; a MONGODB_URI deployment is asked, through a short child process, because it may be
 * a standalone or run without enableTestCommands.
 */
export function deploymentFacts(): DeploymentFacts {
  if (cachedFacts) return cachedFacts;
  if (testBackendKind() !== 'uri') {
    cachedFacts = testTopology() === 'replset' ? { setName: 'harness', failPoints: true } : { failPoints: true };
    return cachedFacts;
  }
  const driver = require.resolve('mongodb');
  const script = `
    const { MongoClient } = require(${JSON.stringify(driver)});
    (async () => {
      const client = new MongoClient(process.env.MONGODB_URI, { serverSelectionTimeoutMS: 5000 });
      const facts = { failPoints: false };
      try {
        await client.connect();
        const hello = await client.db('admin').command({ hello: 1 });
        if (hello.setName) facts.setName = hello.setName;
        try {
          await client.db('admin').command({ configureFailPoint: 'failCommand', mode: 'off' });
          facts.failPoints = true;
        } catch (e) {
          facts.failPointsReason = 'configureFailPoint failed: code ' + e.code + ' ' + e.message;
        }
      } catch (e) {
        facts.failPointsReason = 'probe failed: ' + e.message;
      } finally {
        await client.close().catch(() => undefined);
      }
      process.stdout.write(JSON.stringify(facts));
    })();`;
  const out = execFileSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 20_000, env: process.env });
  cachedFacts = JSON.parse(out) as DeploymentFacts;
  return cachedFacts;
}

/**
 * `describe` when `condition` holds; otherwise `describe.skip`, after logging why, so Jest's
 * summary counts the tests as skipped rather than passed.
 */
export function describeIf(condition: boolean, reason: string): jest.Describe {
  if (condition) return describe;
  console.warn(`[conformance] skipping: ${reason}`);
  return describe.skip;
}

/** A schema-less document whose _id may be of any BSON type (the tests use strings and numbers). */
export interface Loose {
  _id?: string | number | ObjectId;
  [key: string]: unknown;
}

let cachedVersion: string | undefined;

/**
 * The server's version (buildInfo.version), known synchronously at test-collection time so that
 * tests of rules that differ between releases can be skipped, with a printed reason, on releases
 * whose answer they do not pin. The emulator answers as its reported release.
 */
export function serverVersion(): string {
  if (cachedVersion) return cachedVersion;
  if (testBackendKind() === 'emulator') {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    cachedVersion = (require('../../../test-backend/emulator/commands/handshake') as { SERVER_VERSION: string }).SERVER_VERSION;
    return cachedVersion;
  }
  const driver = require.resolve('mongodb');
  const script = `
    const { MongoClient } = require(${JSON.stringify(driver)});
    (async () => {
      const client = new MongoClient(process.env.MONGODB_URI, { serverSelectionTimeoutMS: 5000 });
      try {
        await client.connect();
        process.stdout.write(String((await client.db('admin').command({ buildInfo: 1 })).version));
      } finally {
        await client.close().catch(() => undefined);
      }
    })();`;
  cachedVersion = execFileSync(process.execPath, ['-e', script], { encoding: 'utf8', timeout: 20_000, env: process.env }).trim();
  return cachedVersion;
}

/** Whether the server's release is `major.minor` (e.g. '7.0'). */
export function serverIsRelease(majorMinor: string): boolean {
  return serverVersion() === majorMinor || serverVersion().startsWith(`${majorMinor}.`);
}

/** mongod's whole answer to a refused command: code, codeName and errmsg. */
export interface Refusal {
  code: number;
  codeName: string;
  errmsg: string;
}

/** Awaits `promise` and requires a command error with exactly `expected`'s code, codeName and errmsg. */
export async function expectRefusal(promise: Promise<unknown>, expected: Refusal): Promise<MongoServerError> {
  const error = await expectServerError(promise, expected.code);
  expect({ code: error.code, codeName: error.codeName, errmsg: error.errmsg }).toEqual(expected);
  return error;
}

/** A write command's reply that carries exactly one write error, at `index`, equal to `expected`. */
export function expectWriteError(reply: Document, index: number, expected: Refusal): void {
  const errors = (reply.writeErrors ?? []) as Document[];
  expect(errors.map((e) => ({ index: e.index, code: e.code, codeName: e.codeName, errmsg: e.errmsg }))).toEqual([{ index, ...expected }]);
}
