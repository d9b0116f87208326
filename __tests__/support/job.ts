/** A job queue model for the lockNext tests: status, priority, creation time, with the index the README recommends. */
import { Schema, type Connection } from 'mongoose';
import { lockPlugin, type LockableModel, type LockMethods, type LockPluginOptions } from '../../src';

export interface Job {
  status: 'queued' | 'running' | 'done' | 'failed';
  priority: number;
  createdAt: Date;
  payload: string;
  attempts: number;
}

export type JobModel = LockableModel<Job>;

export function jobSchema(options?: LockPluginOptions, schemaOptions: Record<string, unknown> = {}): Schema<Job, JobModel, LockMethods> {
  const schema = new Schema<Job, JobModel, LockMethods>(
    {
      status: { type: String, enum: ['queued', 'running', 'done', 'failed'], default: 'queued' },
      priority: { type: Number, default: 0 },
      createdAt: { type: Date, default: () => new Date() },
      payload: { type: String, default: '' },
      attempts: { type: Number, default: 0 },
    },
    schemaOptions,
  );
  // Equality (status), then the sort (priority, createdAt): the ESR order.
  schema.index({ status: 1, priority: -1, createdAt: 1 });
  schema.plugin(lockPlugin, options);
  return schema;
}

let counter = 0;

/** Compiles the model on a connection (a new name each time, so options can differ per test). */
export async function jobModel(connection: Connection, options?: LockPluginOptions, name = `Job${++counter}`, schemaOptions?: Record<string, unknown>): Promise<JobModel> {
  const model = connection.model<Job, JobModel>(name, jobSchema(options, schemaOptions));
  await model.init();
  await model.lockModel().init();
  return model;
}
