/** Test helpers: fresh Mongoose connections on the active backend, with command monitoring. */
import * as os from 'node:os';
import mongoose, { type Connection } from 'mongoose';
import { testUri, uniqueDbName } from '../../test-backend/test-env';
import { recordLockCommands } from './command-recorder';

export interface MonitoredConnection {
  connection: Connection;
  /** Names of the commands sent since the last reset (handshakes and monitoring excluded). */
  commands: string[];
  resetCommands(): void;
  close(): Promise<void>;
}

/**
 * Driver 7 (Mongoose 9) loads `os` with a dynamic import() for its handshake metadata, which
 * Jest's sandbox refuses, so the handshake would carry no appName (see
 * __tests__/conformance/support/server.ts). Driver 6 (Mongoose 8) has neither the problem nor
 * the option.
 */
function driverWorkarounds(): Record<string, unknown> {
  return Number(mongoose.version.split('.')[0]) >= 9 ? { runtimeAdapters: { os } } : {};
}

const IGNORED = new Set(['hello', 'isMaster', 'ismaster', 'ping', 'endSessions', 'saslStart', 'saslContinue', 'buildInfo', 'getParameter']);

/** A monitored connection to the test backend. */
export function connect(dbName: string, options: mongoose.ConnectOptions = {}): Promise<MonitoredConnection> {
  return connectTo(testUri(), dbName, options);
}

/** A monitored connection to another server (a restarted one, a private one for fault tests). */
export async function connectTo(uri: string, dbName: string, options: mongoose.ConnectOptions = {}): Promise<MonitoredConnection> {
  const connection = mongoose.createConnection(uri, { dbName, monitorCommands: true, maxPoolSize: 20, ...driverWorkarounds(), ...options } as mongoose.ConnectOptions);
  await connection.asPromise();
  recordLockCommands(connection);
  const commands: string[] = [];
  connection.getClient().on('commandStarted', (event) => {
    if (!IGNORED.has(event.commandName)) commands.push(event.commandName);
  });
  return {
    connection,
    commands,
    resetCommands: () => {
      commands.length = 0;
    },
    close: () => connection.close(),
  };
}

/** A database name unique to one test file, and a helper to drop it afterwards. */
export function testDatabase(prefix: string): { name: string; drop(conn: Connection): Promise<void> } {
  const name = uniqueDbName(prefix);
  return {
    name,
    drop: async (conn) => {
      await conn.getClient().db(name).dropDatabase();
    },
  };
}

export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Waits for `condition` to hold, checking every `intervalMs`, for at most `timeoutMs`; resolves to
 * whether it held. For a test that waits for an event instead of sleeping a fixed time that a
 * loaded machine may outlast: the deadline is generous, and the wait ends as soon as the event is seen.
 */
export async function waitUntil(condition: () => boolean | Promise<boolean>, timeoutMs: number, intervalMs = 20): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (await condition()) return true;
    if (Date.now() >= deadline) return false;
    await sleep(intervalMs);
  }
}

/**
 * Resolves when `conn` next sends `command` on `collection` (command monitoring): the moment a
 * test knows the command is on its way, for instance held back on the server by a fail point.
 */
export function nextCommandSent(conn: MonitoredConnection, command: string, collection: string): Promise<void> {
  const client = conn.connection.getClient();
  return new Promise((resolve) => {
    const listener = (event: { commandName: string; command: Record<string, unknown> }) => {
      if (event.commandName === command && event.command[command] === collection) {
        client.off('commandStarted', listener);
        resolve();
      }
    };
    client.on('commandStarted', listener);
  });
}

/**
 * A plain connection to the test backend, without command monitoring: what a test does behind the
 * plugin's back (hand-made indexes, raw reads and writes of lock records) is then not recorded as
 * the plugin's commands (support/command-recorder.ts, the compatibility record).
 */
export function operatorConnection(dbName: string): Promise<Connection> {
  return mongoose.createConnection(testUri(), { dbName, ...driverWorkarounds() } as mongoose.ConnectOptions).asPromise();
}
