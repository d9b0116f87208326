/**
 * The names README snippets may use without declaring them (`req`, `app`, `id`, ...), typed for
 * the type-check and built for real for the runnable snippets (see readme-blocks.ts). The model
 * is the README's own: `WorkItem` with `title` and `status`, declared exactly as the Usage
 * section declares it, with `strict: 'throw'` so that a snippet using a field the schema does not
 * have fails instead of being silently stripped.
 */
import express, { type Express, type NextFunction, type Request, type Response } from 'express';
import session, { type Store } from 'express-session';
import { Schema, type AnyBulkWriteOperation, type Connection, type Types, type UpdateQuery } from 'mongoose';
import { lockPlugin, type LockableDocument, type LockableModel, type LockMethods } from '../../../src';

/** The README's model. */
export interface WorkItem {
  title: string;
  status: 'open' | 'done';
}

export type WorkItemModel = LockableModel<WorkItem>;

export interface ReadmeContext {
  WorkItem: WorkItemModel;
  /** A free work item. */
  id: Types.ObjectId;
  /** An owner that is not `req.sessionID`. */
  owner: string;
  /** An Express request with a session (express-session). */
  req: Request;
  res: Response;
  next: NextFunction;
  app: Express;
  sessionStore: Store;
  update: UpdateQuery<WorkItem>;
  ops: AnyBulkWriteOperation<WorkItem>[];
  steps: ((item: LockableDocument<WorkItem>, options: { signal: AbortSignal }) => Promise<void>)[];
  order: { id: string };
  paymentService: { charge(order: { id: string }, options: { fence: number }): Promise<void> };
}

/** The names a snippet can use, in the order the generated wrapper destructures them. */
export const CONTEXT_NAMES = ['WorkItem', 'id', 'owner', 'req', 'res', 'next', 'app', 'sessionStore', 'update', 'ops', 'steps', 'order', 'paymentService'] as const;

let models = 0;

/** A fresh context on `connection`: a new model (own lock collection) and a new free document. */
export async function createReadmeContext(connection: Connection): Promise<ReadmeContext> {
  const schema = new Schema<WorkItem, WorkItemModel, LockMethods>(
    {
      title: { type: String, required: true },
      status: { type: String, enum: ['open', 'done'], default: 'open' },
    },
    { strict: 'throw', strictQuery: 'throw' },
  );
  schema.plugin(lockPlugin, { ttl: 30_000 });
  const WorkItem = connection.model<WorkItem, WorkItemModel>(`ReadmeWorkItem${++models}`, schema);
  await WorkItem.init();
  const { _id: id } = await WorkItem.create({ title: 'Refund request #4711' });
  const sessionID = `readme-session-${models}`;
  const destroyed: string[] = [];
  const req = {
    sessionID,
    session: { id: sessionID, destroy: (callback: (error?: unknown) => void) => (destroyed.push(sessionID), callback()) },
    params: { id: id.toHexString() },
    body: {},
    query: {},
  } as unknown as Request;
  const charged: number[] = [];
  return {
    WorkItem,
    id,
    owner: 'nightly-job',
    req,
    res: {} as Response,
    next: () => undefined,
    app: express(),
    sessionStore: new session.MemoryStore(),
    update: { $set: { status: 'done' } },
    ops: [{ updateOne: { filter: { _id: id }, update: { $set: { status: 'done' } } } }],
    steps: [async (item) => void item.set({ status: 'done' })],
    order: { id: 'order-1' },
    paymentService: {
      charge: async (_order, { fence }) => {
        if (charged.length > 0 && fence <= charged[charged.length - 1]!) throw new Error('stale fence');
        charged.push(fence);
      },
    },
  };
}
