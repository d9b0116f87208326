/** runWithLockOwner and lockOwnerMiddleware: who is writing, without passing it to every call. */
import { InvalidLockArgumentError, LockNotHeldError, LockedError, currentLockOwner, lockOwnerMiddleware, runWithLockOwner } from '../../src';
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

  test('runs requests without a session anonymously, and reports a bad owner as an error', async () => {
    expect(await run(lockOwnerMiddleware(), {})).toEqual({ owner: undefined, error: undefined });
    const bad = await run(lockOwnerMiddleware({ owner: () => 42 as never }), {});
    expect(bad.error).toBeInstanceOf(InvalidLockArgumentError);
  });
});
