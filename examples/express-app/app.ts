/**
 * A small server-rendered back office (HTML forms, no front-end framework) that edits work items
 * under pessimistic locks, the way the design card's users do:
 *   GET  /                     sign in with a display name
 *   GET  /items                the list, with who is editing what and when it frees (one query)
 *   GET  /items/:id/edit       takes the lock (labelled with the user's name) and shows the form;
 *                              the lock ticket travels in a hidden field; the page counts down,
 *                              renews the lock while it is in use, and warns before it ends
 *   POST /items/:id/keep-alive the page's heartbeat: resumes the lock with the ticket (keeping its
 *                              ttl) and answers { expiresAt, msLeft } as JSON, or 409 and why
 *   POST /items/:id            resumes that very lock with the ticket, saves and releases; a stale
 *                              form (lock expired, taken over, released) is refused, nothing is
 *                              saved, and the user's own text is shown in full
 *   POST /items/:id/cancel     releases the lock (one command)
 *   GET  /admin/locks          every current lock, paginated, each with force-unlock
 *   POST /admin/locks/:id/force-unlock   releases whoever holds it (Model.forceUnlock)
 *   POST /logout               releases everything the session held, then ends it
 * Lock errors carry their HTTP status; this app renders them as pages, and a JSON API would use
 * lockErrorHandler() instead.
 */
import express, { type NextFunction, type Request, type Response } from 'express';
import session from 'express-session';
import { Schema, Types, type Connection } from 'mongoose';
import {
  InvalidLockArgumentError,
  LockError,
  isValidLockLabel,
  LockNotHeldError,
  LockedError,
  lockErrorBody,
  lockOwnerMiddleware,
  lockPlugin,
  type LockableModel,
  type LockMethods,
} from '../../src';
import {
  ITEM_STATUSES,
  adminLocksPage,
  editPage,
  errorPage,
  listPage,
  lockedPage,
  loginPage,
  staleSubmitPage,
  type HeldLockView,
  type ItemStatus,
  type ItemView,
  type KeepAliveView,
} from './views';

declare module 'express-session' {
  interface SessionData {
    /** The display name the user signed in with; also the label of their locks. */
    user?: string;
    /** A one-time message for the next page. */
    flash?: string;
  }
}

export interface WorkItem {
  title: string;
  status: ItemStatus;
  notes: string;
}

export type WorkItemModel = LockableModel<WorkItem>;

export function workItemModel(connection: Connection): WorkItemModel {
  const schema = new Schema<WorkItem, WorkItemModel, LockMethods>({
    title: { type: String, required: true, maxlength: 200 },
    status: { type: String, enum: ITEM_STATUSES, default: 'open' },
    notes: { type: String, default: '', maxlength: 2000 },
  });
  schema.plugin(lockPlugin, { ttl: 5 * 60_000 });
  return connection.model<WorkItem, WorkItemModel>('WorkItem', schema);
}

export interface AppOptions {
  WorkItem: WorkItemModel;
  sessionSecret: string;
  /** How long an edit page holds its lock, in ms (default 5 minutes). Readable and changeable as `app.locals.lockTtlMs`. */
  lockTtlMs?: number;
  /** Heartbeat period of an edit page in use, in ms (default a third of the ttl). `app.locals.keepAliveEveryMs`. */
  keepAliveEveryMs?: number;
  /** The edit page warns when less than this is left, in ms (default a quarter of the ttl, at most a minute). `app.locals.warnBeforeMs`. */
  warnBeforeMs?: number;
  /** An edit page stops renewing after this long without input, in ms (default 10 minutes; 0: only when asked). `app.locals.idleAfterMs`. */
  idleAfterMs?: number;
}

const view = (item: { _id: Types.ObjectId } & WorkItem): ItemView => ({ id: item._id.toHexString(), title: item.title, status: item.status, notes: item.notes });

/** Why a submit was refused, for the user who made it (never who holds the lock now). */
function notSavedBecause(error: LockNotHeldError): string {
  switch (error.reason) {
    case 'expired':
      return 'Your lock on this item expired before you saved, so your changes were not saved: someone else could have changed it meanwhile.';
    case 'taken_over':
      if (error.sameOwner === true) {
        return 'You opened this item again in another tab or window, and that page holds the lock now, so the changes from this page were not saved. Nothing expired and nobody else edited it: continue in the other page (your text from this one is below).';
      }
      return error.sameOwner === false
        ? 'Your lock on this item expired and someone else has opened it for editing since, so your changes were not saved. What is stored now is shown below.'
        : // That later acquisition has ended too, and a release forgets its owner: say what is known.
          'Since you opened this page, the item was opened for editing again (in another tab, or by someone else after your lock expired) and may have been changed, so your changes were not saved. What is stored now is shown below.';
    case 'released':
      return 'You no longer hold the lock on this item: it was released (cancelled or logged out in another tab, or unlocked by an administrator), so your changes were not saved.';
    default:
      return 'You no longer hold the lock on this item, so your changes were not saved.';
  }
}

/** Why an open edit page lost its lock, as its heartbeat learns it. */
function pageLostBecause(error: LockNotHeldError): string {
  switch (error.reason) {
    case 'expired':
      return 'Your lock on this item expired: saving this page will be refused. Copy your changes, then open the item again.';
    case 'taken_over':
      return error.sameOwner === true
        ? 'You opened this item again in another tab or window, and that page holds the lock now: continue there. Saving this page will be refused.'
        : 'The item was opened for editing again (in another tab, or by someone else after your lock expired): saving this page will be refused.';
    case 'released':
      return 'Your lock on this item was released (cancelled or logged out in another tab, or unlocked by an administrator): saving this page will be refused.';
    default:
      return 'You no longer hold the lock on this item: saving this page will be refused.';
  }
}

export function createApp({ WorkItem, sessionSecret, lockTtlMs = 5 * 60_000, keepAliveEveryMs, warnBeforeMs, idleAfterMs = 10 * 60_000 }: AppOptions): express.Express {
  const app = express();
  app.locals.lockTtlMs = lockTtlMs;
  app.locals.keepAliveEveryMs = keepAliveEveryMs;
  app.locals.warnBeforeMs = warnBeforeMs;
  app.locals.idleAfterMs = idleAfterMs;
  /** The edit page's heartbeat settings, from the current `app.locals` (tests change them). */
  const keepAlive = (): KeepAliveView => {
    const ttl = app.locals.lockTtlMs as number;
    return {
      everyMs: (app.locals.keepAliveEveryMs as number | undefined) ?? Math.ceil(ttl / 3),
      warnBeforeMs: (app.locals.warnBeforeMs as number | undefined) ?? Math.min(60_000, Math.ceil(ttl / 4)),
      idleAfterMs: app.locals.idleAfterMs as number,
    };
  };
  const heldView = (item: { heldLock(): { ticket: string; expiresAt: Date; msLeft(): number } | null }): HeldLockView => {
    const held = item.heldLock()!;
    return { ticket: held.ticket, expiresAt: held.expiresAt, msLeft: held.msLeft() };
  };
  app.use(express.urlencoded({ extended: false, limit: '20kb' }));
  app.use(
    session({
      secret: sessionSecret,
      resave: false,
      // The session (and so the lock owner, req.sessionID) exists from sign-in on and stays the same.
      saveUninitialized: false,
      cookie: { httpOnly: true, sameSite: 'strict' }, // sameSite: forms cannot be posted from other sites
    }),
  );
  // After session(): guarded writes made while handling a request act as its session.
  app.use(lockOwnerMiddleware());

  const itemId = (req: Request): Types.ObjectId => {
    const raw = req.params.id;
    if (typeof raw !== 'string' || !Types.ObjectId.isValid(raw)) throw new InvalidLockArgumentError('id', 'expected a work item id.');
    return new Types.ObjectId(raw);
  };
  const field = (req: Request, name: string): string => {
    const value = (req.body as Record<string, unknown>)[name];
    return typeof value === 'string' ? value : '';
  };
  const takeFlash = (req: Request): string | undefined => {
    const flash = req.session.flash;
    delete req.session.flash;
    return flash;
  };
  /** Signed-in user or a redirect to the sign-in page. */
  const signedIn = (req: Request, res: Response): string | undefined => {
    if (req.session.user) return req.session.user;
    res.redirect(303, '/');
    return undefined;
  };

  app.get('/', (req, res) => {
    if (req.session.user) return res.redirect(303, '/items');
    res.type('html').send(loginPage());
  });

  app.post('/login', (req, res) => {
    const name = field(req, 'name').trim();
    // The name becomes the lock label: refuse at sign-in exactly what the plugin would refuse as a
    // label (length, control characters, line separators, bidirectional overrides), with a friendly message.
    if (!isValidLockLabel(name)) return res.status(400).type('html').send(loginPage('Please enter a name of 1 to 100 printable characters.'));
    req.session.regenerate((error) => {
      if (error) return res.status(500).type('html').send(errorPage(undefined, 500, 'Could not start a session.'));
      req.session.user = name;
      res.redirect(303, '/items');
    });
  });

  app.get('/items', async (req, res) => {
    const user = signedIn(req, res);
    if (!user) return;
    const items = await WorkItem.find().sort({ _id: 1 }).limit(100).lean();
    // One query for the whole page; `mine` says which locks are this session's.
    const locks = await WorkItem.lockStatus(
      items.map((item) => item._id),
      { owner: req.sessionID },
    );
    res.type('html').send(listPage(user, items.map((item, i) => ({ item: view(item), lock: locks[i] ?? null })), takeFlash(req)));
  });

  app.get('/items/:id/edit', async (req, res) => {
    const user = signedIn(req, res);
    if (!user) return;
    const id = itemId(req);
    try {
      const item = await WorkItem.lock(id, req.sessionID, { label: user, ttl: app.locals.lockTtlMs as number });
      res.type('html').send(editPage(user, view(item), heldView(item), keepAlive()));
    } catch (error) {
      if (!(error instanceof LockedError)) throw error;
      const current = await WorkItem.findById(id).orFail().lean();
      res
        .status(error.status)
        .set('Retry-After', String(Math.ceil((error.retryAfterMs ?? 0) / 1000)))
        .type('html')
        .send(lockedPage(user, view(current), { label: error.label, expiresAt: error.expiresAt, retryAfterMs: error.retryAfterMs }));
    }
  });

  app.post('/items/:id', async (req, res) => {
    const user = signedIn(req, res);
    if (!user) return;
    const id = itemId(req);
    const submitted = { title: field(req, 'title'), status: field(req, 'status'), notes: field(req, 'notes') };
    let item;
    try {
      // Continue the lock this form was opened with, only if it is still that acquisition.
      item = await WorkItem.lock(id, req.sessionID, { resume: field(req, 'ticket') });
    } catch (error) {
      if (!(error instanceof LockNotHeldError)) throw error;
      const current = await WorkItem.findById(id).orFail().lean();
      return res.status(error.status).type('html').send(staleSubmitPage(user, view(current), submitted, notSavedBecause(error)));
    }
    item.set(submitted);
    try {
      await item.saveAndUnlock();
    } catch (error) {
      if ((error as Error).name !== 'ValidationError') throw error;
      // The lock is still held (saveAndUnlock keeps it when the save fails): fix and resubmit.
      return res.status(400).type('html').send(editPage(user, view(item), heldView(item), keepAlive(), (error as Error).message));
    }
    req.session.flash = `Saved “${item.title}”.`;
    res.redirect(303, '/items');
  });

  // The edit page's heartbeat. A resume without `ttl` keeps the ttl the lock was taken with, so a
  // heartbeat never shortens it; it succeeds only while the page's acquisition is current.
  app.post('/items/:id/keep-alive', async (req, res) => {
    if (!req.session.user) return res.status(401).json({ message: 'You are signed out: sign in again.' });
    try {
      const item = await WorkItem.lock(itemId(req), req.sessionID, { resume: field(req, 'ticket') });
      const held = item.heldLock()!;
      res.json({ expiresAt: held.expiresAt.toISOString(), msLeft: held.msLeft() });
    } catch (error) {
      if (!(error instanceof LockNotHeldError)) throw error;
      res.status(error.status).json({ reason: error.reason, sameOwner: error.sameOwner, message: pageLostBecause(error) });
    }
  });

  app.post('/items/:id/cancel', async (req, res) => {
    if (!signedIn(req, res)) return;
    await WorkItem.unlock(itemId(req), req.sessionID, { ticket: field(req, 'ticket') });
    res.redirect(303, '/items');
  });

  app.get('/admin/locks', async (req, res) => {
    const user = signedIn(req, res);
    if (!user) return;
    const after = typeof req.query.after === 'string' ? req.query.after : undefined;
    const page = await WorkItem.listLocks({ limit: 20, after });
    const titles = new Map((await WorkItem.find({ _id: { $in: page.locks.map((lock) => lock.documentId) } }, { title: 1 }).lean()).map((item) => [item._id.toHexString(), item.title]));
    const rows = page.locks.map((lock) => {
      const id = String(lock.documentId);
      return { id, title: titles.get(id) ?? id, label: lock.label, expiresAt: lock.expiresAt };
    });
    res.type('html').send(adminLocksPage(user, rows, page.next, takeFlash(req)));
  });

  // Administrative release of whoever holds the lock. The example lets every signed-in user do it;
  // a real app would check that the user is an administrator.
  app.post('/admin/locks/:id/force-unlock', async (req, res) => {
    if (!signedIn(req, res)) return;
    const id = itemId(req);
    const released = await WorkItem.forceUnlock(id);
    const item = await WorkItem.findById(id, { title: 1 }).lean();
    const title = item?.title ?? id.toHexString();
    req.session.flash = released ? `Unlocked “${title}”: whoever had it open can no longer save it.` : `“${title}” was not locked any more.`;
    res.redirect(303, '/admin/locks');
  });

  app.post('/logout', async (req, res) => {
    await WorkItem.releaseAllFor(req.sessionID);
    req.session.destroy(() => res.redirect(303, '/'));
  });

  // Lock errors know their HTTP status (404 no such item, 400 a bad id or ticket, ...).
  app.use((error: unknown, req: Request, res: Response, next: NextFunction) => {
    if (res.headersSent) return next(error);
    // lockErrorBody: the same safe text lockErrorHandler() would send (no owners, no driver details).
    if (error instanceof LockError) return res.status(error.status).type('html').send(errorPage(req.session?.user, error.status, lockErrorBody(error).error.message));
    if ((error as Error)?.name === 'DocumentNotFoundError') return res.status(404).type('html').send(errorPage(req.session?.user, 404, 'No such work item.'));
    next(error);
  });
  return app;
}
