/** The design card's model, declared the way the README tells users to. */
import { Schema, type Connection } from 'mongoose';
import { lockPlugin, type LockableModel, type LockMethods, type LockPluginOptions } from '../../src';

export interface WorkItem {
  title: string;
  status: 'open' | 'done';
  edits: number;
}

export type WorkItemModel = LockableModel<WorkItem>;

export function workItemSchema(options?: LockPluginOptions): Schema<WorkItem, WorkItemModel, LockMethods> {
  const schema = new Schema<WorkItem, WorkItemModel, LockMethods>({
    title: { type: String, required: true, maxlength: 100 },
    status: { type: String, enum: ['open', 'done'], default: 'open' },
    edits: { type: Number, default: 0 },
  });
  schema.plugin(lockPlugin, options);
  return schema;
}

let modelCounter = 0;

/** Compiles the model on a connection (a new name each time, so options can differ per test). */
export async function workItemModel(connection: Connection, options?: LockPluginOptions, name = `WorkItem${++modelCounter}`): Promise<WorkItemModel> {
  const model = connection.model<WorkItem, WorkItemModel>(name, workItemSchema(options));
  await model.init();
  await model.lockModel().init();
  return model;
}
