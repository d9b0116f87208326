/**
 * Issue 11, item 5: errors carry their HTTP status, and `lockErrorHandler()` turns them into
 * responses: 423 with Retry-After for a lock held by someone else, 409 for a lock that is gone,
 * 404 for a missing document, 400 for bad input, 503 for a transient database fault; a JSON body
 * without owners, tokens or stack traces. Before, Express's default handler answered every one
 * of them with a 500 and a stack trace.
 */
import express from 'express';
import { MongoNetworkError } from 'mongodb';
import request from 'supertest';
import { Types } from 'mongoose';
import {
  InvalidLockArgumentError,
  InvalidLockOptionError,
  LockConfigurationError,
  LockDatabaseError,
  LockExpiredError,
  LockNotHeldError,
  LockTargetNotFoundError,
  LockedError,
  lockErrorHandler,
  type LockErrorBody,
} from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';
import { staleLock } from '../support/stale-lock';

const db = testDatabase('http');
let conn: MonitoredConnection;
let WorkItem: WorkItemModel;
let app: express.Express;

const HOLDER = 'holder-session-7f3a';

beforeAll(async () => {
  conn = await connect(db.name);
  WorkItem = await workItemModel(conn.connection, { ttl: 10_000 });
  app = express();
  app.use(express.urlencoded({ extended: false }));
  // The routes know nothing about HTTP statuses: the errors and the handler do.
  app.post('/items/:id/open', async (req, res) => {
    const item = await WorkItem.lock(req.params.id, String(req.query.owner), { label: 'Alice' });
    res.json({ ticket: item.heldLock()!.ticket });
  });
  app.post('/items/:id/submit', async (req, res) => {
    const item = await WorkItem.lock(req.params.id, String(req.query.owner), { resume: req.body.ticket });
    await item.saveAndUnlock();
    res.json({ ok: true });
  });
  app.get('/boom', () => {
    throw new LockDatabaseError('lock', new MongoNetworkError('connection 4 to db-internal-7.example:27017 closed'), true);
  });
  app.get('/plain', () => {
    throw new Error('not a lock error');
  });
  app.use(lockErrorHandler());
  app.use((error: Error, _req: express.Request, res: express.Response, _next: express.NextFunction) => {
    res.status(599).json({ passedOn: error.message });
  });
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

const bodyOf = (response: request.Response) => response.body as LockErrorBody;

test('every LockError class has its status (and statusCode)', () => {
  const id = new Types.ObjectId();
  const cases: [Error & { status: number; statusCode: number }, number][] = [
    [new LockedError(id, new Date(), '', 1000), 423],
    [new LockNotHeldError(id, 'taken_over'), 409],
    [new LockExpiredError(id, new Date()), 409],
    [new LockTargetNotFoundError(id, 'WorkItem'), 404],
    [new InvalidLockArgumentError('id', 'bad'), 400],
    [new InvalidLockOptionError('resume', 'bad'), 400],
    [new LockDatabaseError('lock', new Error('x'), true), 503],
    [new LockDatabaseError('lock', new Error('x'), false), 500],
    [new LockConfigurationError('x'), 500],
  ];
  for (const [error, status] of cases) {
    expect(error.status).toBe(status);
    expect(error.statusCode).toBe(status);
  }
});

test('423 with Retry-After from retryAfterMs, the holder\'s label, and no owner anywhere', async () => {
  const { _id: id } = await WorkItem.create({ title: 'held' });
  await request(app).post(`/items/${id}/open?owner=${HOLDER}`).expect(200);
  const refused = await request(app).post(`/items/${id}/open?owner=someone-else`).expect(423);
  const retryAfter = Number(refused.headers['retry-after']);
  expect(retryAfter).toBeGreaterThanOrEqual(9);
  expect(retryAfter).toBeLessThanOrEqual(10);
  const { error } = bodyOf(refused);
  expect(error.code).toBe('LOCKED');
  expect(error.retryable).toBe(true);
  expect(error.documentId).toBe(id.toHexString());
  expect(error.label).toBe('Alice');
  expect(error.retryAfterMs).toBeGreaterThan(8_000);
  expect(new Date(error.expiresAt!).getTime()).toBeGreaterThan(Date.now() - 60_000);
  expect(refused.text).not.toContain(HOLDER);
  expect(refused.text).not.toMatch(/\bat .*\.ts:\d+/); // no stack trace
  await WorkItem.releaseAllFor(HOLDER);
});

test('409 for a stale ticket, with the reason', async () => {
  const { _id: id } = await WorkItem.create({ title: 'stale' });
  const opened = await request(app).post(`/items/${id}/open?owner=${HOLDER}`).expect(200);
  await WorkItem.releaseAllFor(HOLDER);
  const stale = await request(app).post(`/items/${id}/submit?owner=${HOLDER}`).type('form').send({ ticket: opened.body.ticket }).expect(409);
  expect(bodyOf(stale).error).toMatchObject({ code: 'LOCK_NOT_HELD', reason: 'released', retryable: false });
  expect(stale.headers['retry-after']).toBeUndefined();
});

test('409 LOCK_EXPIRED for a ticket whose lock expired', async () => {
  const { _id: id } = await WorkItem.create({ title: 'expired' });
  const item = await staleLock(WorkItem, id, HOLDER);
  const response = await request(app).post(`/items/${id}/submit?owner=${HOLDER}`).type('form').send({ ticket: item.heldLock()!.ticket }).expect(409);
  expect(bodyOf(response).error).toMatchObject({ code: 'LOCK_EXPIRED', reason: 'expired' });
});

test('404 for a missing document, 400 for a bad id or a mangled ticket', async () => {
  const missing = await request(app).post(`/items/${new Types.ObjectId()}/open?owner=${HOLDER}`).expect(404);
  expect(bodyOf(missing).error.code).toBe('DOCUMENT_NOT_FOUND');
  const badId = await request(app).post(`/items/not-an-id/open?owner=${HOLDER}`).expect(400);
  expect(bodyOf(badId).error.code).toBe('INVALID_ARGUMENT');
  const { _id: id } = await WorkItem.create({ title: 'x' });
  const badTicket = await request(app).post(`/items/${id}/submit?owner=${HOLDER}`).type('form').send({ ticket: 'mpl1.forged' }).expect(400);
  expect(bodyOf(badTicket).error.code).toBe('INVALID_OPTION');
});

test('503 with Retry-After for a transient database fault, without the driver\'s message (it names hosts)', async () => {
  const response = await request(app).get('/boom').expect(503);
  expect(response.headers['retry-after']).toBe('1');
  expect(bodyOf(response).error).toMatchObject({ code: 'DATABASE_ERROR', retryable: true });
  expect(response.text).not.toContain('db-internal-7');
});

test('other errors pass on to the next handler unchanged', async () => {
  const response = await request(app).get('/plain').expect(599);
  expect(response.body).toEqual({ passedOn: 'not a lock error' });
});
