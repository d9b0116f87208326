/**
 * An Express back office that edits work items under pessimistic locks:
 *   GET  /items/:id         open for editing: takes the lock (423 Locked if someone else has it)
 *   POST /items/:id         submit: saves under the lock and releases it
 *   POST /items/:id/cancel  close without saving: releases the lock
 *   POST /logout            releases every lock of the session, then ends it
 * lockOwnerMiddleware binds each request's session id as the lock owner, so any guarded write
 * made while handling the request acts as that session.
 */
import express, { type NextFunction, type Request, type Response } from 'express';
import session from 'express-session';
import { Schema, Types, type Connection } from 'mongoose';
import { InvalidLockArgumentError, LockNotHeldError, LockedError, lockOwnerMiddleware, lockPlugin, type LockableModel, type LockMethods } from '../../src';

export interface WorkItem {
  title: string;
  status: 'open' | 'done';
}

export type WorkItemModel = LockableModel<WorkItem>;

export function workItemModel(connection: Connection, ttl = 30_000): WorkItemModel {
  const schema = new Schema<WorkItem, WorkItemModel, LockMethods>({
    title: { type: String, required: true, maxlength: 200 },
    status: { type: String, enum: ['open', 'done'], default: 'open' },
  });
  schema.plugin(lockPlugin, { ttl });
  return connection.model<WorkItem, WorkItemModel>('WorkItem', schema);
}

export function createApp(WorkItem: WorkItemModel, sessionSecret: string): express.Express {
  const app = express();
  app.use(express.json());
  app.use(session({ secret: sessionSecret, resave: false, saveUninitialized: true }));
  app.use(lockOwnerMiddleware());

  const itemId = (req: Request): Types.ObjectId => {
    const raw = req.params.id;
    if (typeof raw !== 'string' || !Types.ObjectId.isValid(raw)) throw new InvalidLockArgumentError('id', 'expected a work item id.');
    return new Types.ObjectId(raw);
  };

  app.get('/items/:id', async (req, res) => {
    const item = await WorkItem.lock(itemId(req), req.sessionID);
    res.json({ item: { id: item._id, title: item.title, status: item.status }, lockedUntil: item.heldLock()!.expiresAt });
  });

  app.post('/items/:id', async (req, res) => {
    // Re-acquiring our own lock renews it and gives us a document that carries it.
    const item = await WorkItem.lock(itemId(req), req.sessionID);
    const { title, status } = req.body as Partial<WorkItem>;
    if (title !== undefined) item.title = title;
    if (status !== undefined) item.status = status;
    await item.saveAndUnlock();
    res.json({ item: { id: item._id, title: item.title, status: item.status } });
  });

  app.post('/items/:id/cancel', async (req, res) => {
    const item = await WorkItem.lock(itemId(req), req.sessionID);
    await item.unlock();
    res.status(204).end();
  });

  app.post('/logout', async (req, res) => {
    const released = await WorkItem.releaseAllFor(req.sessionID);
    req.session.destroy(() => res.json({ released }));
  });

  app.use((error: unknown, _req: Request, res: Response, next: NextFunction) => {
    if (error instanceof LockedError) {
      if (error.retryAfterMs !== undefined) res.setHeader('Retry-After', String(Math.ceil(error.retryAfterMs / 1000)));
      return res.status(423).json({ error: error.code, message: error.message, lockedUntil: error.expiresAt });
    }
    if (error instanceof LockNotHeldError) return res.status(409).json({ error: error.code, reason: error.reason, message: error.message });
    if (error instanceof InvalidLockArgumentError) return res.status(400).json({ error: error.code, message: error.message });
    if ((error as Error)?.name === 'ValidationError') return res.status(400).json({ error: 'VALIDATION', message: (error as Error).message });
    next(error);
  });
  return app;
}
