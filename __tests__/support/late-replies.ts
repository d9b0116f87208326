/**
 * Makes chosen replies reach the plugin late, AFTER the server executed the command: the
 * process is paused (a synchronous busy wait) when the driver reports the command's success,
 * before the plugin's code continues with the reply. This is what a garbage-collection pause, an
 * overloaded event loop or a slow network on the way back does. A fail point cannot do it:
 * `failCommand`'s blockConnection blocks before the command runs (mongod evaluates the fail point
 * in CommandHelpers::evaluateFailCommandFailPoint, src/mongo/db/commands.cpp, called from
 * src/mongo/db/service_entry_point_common.cpp before the command is executed; so does the
 * emulator, test-backend/emulator/server.ts), so the server would read `$$NOW` after the pause.
 * Needs a connection made with `monitorCommands: true` (support/db.ts `connect` does that).
 */
import { performance } from 'node:perf_hooks';
import type { Connection } from 'mongoose';

interface StartedEvent {
  commandName: string;
  requestId: number;
  command: Record<string, unknown>;
}

interface SucceededEvent {
  requestId: number;
}

export interface LateReplies {
  /** Pause the replies of the next `times` commands that match `which`, `ms` each. */
  arm(which: (commandName: string, command: Record<string, unknown>) => boolean, ms: number, times?: number): void;
  /** How many replies were paused so far. */
  readonly paused: number;
  stop(): void;
}

export function lateReplies(connection: Connection): LateReplies {
  const client = connection.getClient();
  let which: ((commandName: string, command: Record<string, unknown>) => boolean) | undefined;
  let pauseMs = 0;
  let left = 0;
  let paused = 0;
  const chosen = new Set<number>();
  const started = (event: StartedEvent) => {
    if (left > 0 && which?.(event.commandName, event.command)) {
      left--;
      chosen.add(event.requestId);
    }
  };
  const succeeded = (event: SucceededEvent) => {
    if (!chosen.delete(event.requestId)) return;
    paused++;
    const end = performance.now() + pauseMs;
    while (performance.now() < end) {
      // The whole process stands still, as in a long pause: no timer, no I/O runs meanwhile.
    }
  };
  client.on('commandStarted', started);
  client.on('commandSucceeded', succeeded);
  return {
    arm(predicate, ms, times = 1) {
      which = predicate;
      pauseMs = ms;
      left = times;
    },
    get paused() {
      return paused;
    },
    stop() {
      client.off('commandStarted', started);
      client.off('commandSucceeded', succeeded);
    },
  };
}

/** A command on the collection named `collection` (the first field of the command names it). */
export const on =
  (name: string, collection: string) =>
  (commandName: string, command: Record<string, unknown>): boolean =>
    commandName === name && command[commandName] === collection;
