/**
 * Records the shape of every command a test connection sends to a lock collection (and every
 * `hello`, `commitTransaction` and `abortTransaction`) for the compatibility check run by Jest's
 * global teardown: see test-backend/lock-commands.ts. The connection must have been created with
 * `monitorCommands: true`. Outside a Jest run (no MPL_LOCK_COMMANDS_DIR) it does nothing.
 *
 * A lock collection is one whose name ends in `.locks` (the plugin's default, `<collection>.locks`)
 * or the collection of a sibling lock model on the connection (a custom `collection` option).
 */
import type { Connection } from 'mongoose';
import { LOCK_MODEL_PREFIX } from '../../src/lock-model';
import { ALWAYS_RECORDED, DIR_ENV, commandKey, commandShape, isRecorded, recordShape, targetCollection } from '../../test-backend/lock-commands';

function lockCollections(connection: Connection): Set<string> {
  const names = new Set<string>();
  for (const [name, model] of Object.entries(connection.models)) {
    if (name.startsWith(LOCK_MODEL_PREFIX)) names.add(model.collection.collectionName);
  }
  return names;
}

export function recordLockCommands(connection: Connection): void {
  if (!process.env[DIR_ENV]) return;
  let known = new Set<string>();
  const notLock = new Set<string>();
  const isLockCollection = (name: string): boolean => {
    if (name.endsWith('.locks') || known.has(name)) return true;
    if (notLock.has(name)) {
      // A lock model may have been compiled since: look again only when the model count changed.
      if (Object.keys(connection.models).length === modelCount) return false;
    }
    modelCount = Object.keys(connection.models).length;
    known = lockCollections(connection);
    if (known.has(name)) return true;
    notLock.add(name);
    return false;
  };
  let modelCount = -1;
  connection.getClient().on('commandStarted', (event) => {
    const command = event.command as Record<string, unknown>;
    const name = event.commandName;
    let target: string;
    if (ALWAYS_RECORDED.has(name)) target = '<collection>';
    else {
      const collection = targetCollection(name, command);
      if (collection === undefined || !isLockCollection(collection)) return;
      target = '<lock collection>';
    }
    // Most commands repeat a shape already written: the key alone is cheaper than the shape.
    const key = commandKey(name, command, target);
    if (!isRecorded(key)) recordShape(commandShape(name, command, target), key);
  });
}
