/** runWithLockOwner and lockOwnerMiddleware: who is writing, without passing it to every call. */
import express from 'express';
import session from 'express-session';
import request from 'supertest';
import { InvalidLockArgumentError, LockConfigurationError, LockNotHeldError, LockedError, currentLockOwner, lockErrorHandler, lockOwnerMiddleware, runWithLockOwner } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('ownerctx');
let conn: MonitoredConnection;
let WorkItem: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  WorkItem = await workItemModel(conn.connection, { ttl: 10_000 });
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

test('the context follows async calls and ends with fn', async () => {
  expect(currentLockOwner()).toBeUndefined();
  const seen = await runWithLockOwner('alice', async () => {
    await new Promise((resolve) => setTimeout(resolve, 5));
    return currentLockOwner();
  });
  expect(seen).toBe('alice');
  expect(currentLockOwner()).toBeUndefined();
  expect(() => runWithLockOwner({ $ne: null } as never, () => 1)).toThrow(InvalidLockArgumentError);
});

test('a holder saves a document it loaded without Model.lock; others still cannot', async () => {
  const { _id: id } = await WorkItem.create({ title: 'tabbed' });
  await WorkItem.lock(id, 'alice'); // locked in one tab
  const otherTab = await WorkItem.findById(id).orFail();
  otherTab.title = 'from the other tab';
  await runWithLockOwner('alice', () => otherTab.save());
  expect((await WorkItem.findById(id).orFail()).title).toBe('from the other tab');
  otherTab.title = 'bob tries';
  await expect(runWithLockOwner('bob', () => otherTab.save())).rejects.toBeInstanceOf(LockedError);
  await WorkItem.releaseAllFor('alice');
});

test('requireLock accepts a holder named by the context, and refuses everyone else', async () => {
  const Strict = await workItemModel(conn.connection, { requireLock: true });
  const { _id: id } = await Strict.create({ title: 'strict' });
  await Strict.lock(id, 'alice');
  const copy = await Strict.findById(id).orFail();
  copy.title = 'alice via context';
  await runWithLockOwner('alice', () => copy.save());
  copy.title = 'anonymous';
  const error = await copy.save().catch((e: unknown) => e);
  expect(error).toBeInstanceOf(LockNotHeldError);
  expect((await Strict.findById(id).orFail()).title).toBe('alice via context');
});

describe('lockOwnerMiddleware', () => {
  const run = (middleware: ReturnType<typeof lockOwnerMiddleware>, req: object) =>
    new Promise<{ owner: string | undefined; error: unknown }>((resolve) => {
      middleware(req as never, {}, (error?: unknown) => resolve({ owner: currentLockOwner(), error }));
    });

  test('binds req.sessionID by default', async () => {
    expect(await run(lockOwnerMiddleware(), { sessionID: 'sess-1' })).toEqual({ owner: 'sess-1', error: undefined });
  });

  test('binds what a function of req returns', async () => {
    const middleware = lockOwnerMiddleware<{ user: { id: string } }>({ owner: (req) => `user:${req.user.id}` });
    expect(await run(middleware as never, { user: { id: '7' } })).toEqual({ owner: 'user:7', error: undefined });
  });

  test('runs requests whose session has no id anonymously, and reports a bad owner as an error', async () => {
    expect(await run(lockOwnerMiddleware(), { session: {} })).toEqual({ owner: undefined, error: undefined });
    expect(await run(lockOwnerMiddleware({ owner: () => undefined }), {})).toEqual({ owner: undefined, error: undefined });
    const bad = await run(lockOwnerMiddleware({ owner: () => 42 as never }), {});
    expect(bad.error).toBeInstanceOf(InvalidLockArgumentError);
  });

  // Issue 11, item 4: registered before session(), every request used to run anonymously and a
  // holder was refused by its own lock with no hint why.
  test('registered before session(), a request fails with LockConfigurationError naming the fix', async () => {
    const { error } = await run(lockOwnerMiddleware(), {});
    expect(error).toBeInstanceOf(LockConfigurationError);
    expect((error as Error).message).toContain('app.use(session(');
    expect((error as LockConfigurationError).status).toBe(500);

    const { _id: id } = await WorkItem.create({ title: 'misordered' });
    const app = express();
    app.use(lockOwnerMiddleware()); // wrong: before session()
    app.use(session({ secret: 'test-secret-test-secret', resave: false, saveUninitialized: true }));
    app.post('/items/:id', async (req, res) => {
      await WorkItem.updateOne({ _id: req.params.id }, { $set: { title: 'edited' } });
      res.send('ok');
    });
    app.use(lockErrorHandler());
    const response = await request(app).post(`/items/${id.toHexString()}`).expect(500);
    expect(response.body.error.code).toBe('CONFIGURATION');
    expect(response.body.error.message).toContain('lockOwnerMiddleware()');
    expect((await WorkItem.findById(id).orFail()).title).toBe('misordered');
  });
});

// Issue 11, item 2: README's `runWithLockOwner(sid, () => WorkItem.updateOne(...))` returned an
// unexecuted Query that ran after the context had ended, so the holder was refused.
describe('deferred work returned by fn runs as the owner', () => {
  test('a Query returned by fn (the README snippet): the holder writes, others are refused', async () => {
    const { _id: id } = await WorkItem.create({ title: 'query' });
    const sessionID = 'alice-session';
    await WorkItem.lock(id, sessionID);
    const update = { $set: { status: 'done' as const } };
    await runWithLockOwner(sessionID, () => WorkItem.updateOne({ _id: id }, update));
    expect((await WorkItem.findById(id).orFail()).status).toBe('done');
    await expect(runWithLockOwner('bob-session', () => WorkItem.updateOne({ _id: id }, { $set: { title: 'bob' } }))).rejects.toBeInstanceOf(LockedError);
    // The same Query object comes back, still chainable, and exec() runs as the owner too.
    const query = runWithLockOwner(sessionID, () => WorkItem.findOneAndUpdate({ _id: id }, { $set: { title: 'chained' } }));
    const doc = await query.setOptions({ returnDocument: 'after' }).exec();
    expect(doc?.title).toBe('chained');
    expect(currentLockOwner()).toBeUndefined();
    await WorkItem.releaseAllFor(sessionID);
  });

  test('a lazy thenable returned by fn starts its work inside the context', async () => {
    let seen: string | undefined = 'not run';
    const lazy = { then: (resolve: (value: string | undefined) => void) => resolve((seen = currentLockOwner())) };
    const returned = runWithLockOwner('carol', () => lazy);
    expect(returned).toBe(lazy);
    expect(seen).toBe('not run');
    expect(await returned).toBe('carol');
    expect(seen).toBe('carol');
  });
});
