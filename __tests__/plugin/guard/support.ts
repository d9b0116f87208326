/**
 * Helpers for the write-guard tests (issue 10): which atomic path the backend exercises, the raw
 * (unguarded) driver collections used as independent observers, and fail points scoped to one
 * client by appName and to one namespace, so test files running in parallel never see them.
 */
import type { Connection, mongo } from 'mongoose';
import type { WorkItemModel } from '../../support/work-item';

/** Whether the backend runs transactions (replica set or mongos): the guard's atomic path. */
export async function hasTransactions(connection: Connection): Promise<boolean> {
  const hello = await connection.getClient().db('admin').command({ hello: 1 });
  return typeof hello.setName === 'string' || hello.msg === 'isdbgrid';
}

/** The driver's own collection behind a model: reads and writes through it are never guarded. */
export function rawCollection(model: WorkItemModel): mongo.Collection<mongo.Document> {
  return model.db.getClient().db(model.db.name).collection(model.collection.collectionName);
}

/** The driver's collection holding the model's lock records. */
export function rawLocks(model: WorkItemModel): mongo.Collection<mongo.Document> {
  return model.db.getClient().db(model.db.name).collection(model.lockModel().collection.collectionName);
}

/** `failCommand`, limited to commands from clients with `appName` on `namespace` (mongod: src/mongo/db/commands.cpp, shouldActivateFailCommandFailPoint). */
export async function blockCommands(
  admin: Connection,
  options: { appName: string; namespace: string; commands: string[]; blockTimeMS: number; times?: number },
): Promise<void> {
  await admin.getClient().db('admin').command({
    configureFailPoint: 'failCommand',
    mode: { times: options.times ?? 1 },
    data: { failCommands: options.commands, appName: options.appName, namespace: options.namespace, blockConnection: true, blockTimeMS: options.blockTimeMS },
  });
}

export async function failPointOff(admin: Connection): Promise<void> {
  await admin.getClient().db('admin').command({ configureFailPoint: 'failCommand', mode: 'off' });
}

/** Settles a promise into its value or its error. */
export async function outcome<T>(promise: Promise<T>): Promise<{ ok: true; value: T } | { ok: false; error: unknown }> {
  try {
    return { ok: true, value: await promise };
  } catch (error) {
    return { ok: false, error };
  }
}
