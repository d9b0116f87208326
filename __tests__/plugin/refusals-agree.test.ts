/**
 * Refusals agree (issue 18, item 5).
 *
 * 1. Every refusal that a holder's lock causes carries the holder's label: a guarded write refused
 *    by Alice's lock said `label: null` where `Model.lock` refused by the same lock said 'Alice'.
 * 2. A wait that ran out ends in LockedError whichever way it was bounded: by `wait`, or by a
 *    signal whose reason is a TimeoutError (`AbortSignal.timeout`), which is then the error's
 *    `cause`; such a signal never prevents the first attempt (as `wait: 0` does not). An explicit
 *    abort rejects with the signal's reason, as fetch does, and `lockErrorHandler` answers an
 *    aborted lock call 499 (the client closed the request; nginx's status for it). The same for
 *    lockMany (LockedError) and lockNext (whose wait that ran out resolves null).
 */
import type { Types } from 'mongoose';
import { LockedError, lockErrorBody, lockErrorHandler, type LockPluginOptions } from '../../src';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('refusals_agree');
let conn: MonitoredConnection;

beforeAll(async () => {
  conn = await connect(db.name);
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

/** What lockErrorHandler answers for `error` (status, body), or that it passed the error on. */
function answer(error: unknown): { status?: number; body?: unknown; headers: Record<string, string>; passedOn?: unknown } {
  const out: { status?: number; body?: unknown; headers: Record<string, string>; passedOn?: unknown } = { headers: {} };
  lockErrorHandler()(
    error,
    {},
    {
      headersSent: false,
      status: (code) => (out.status = code),
      setHeader: (name, value) => (out.headers[name] = value),
      json: (body) => (out.body = body),
    },
    (passed) => (out.passedOn = passed),
  );
  return out;
}

const refusal = (promise: Promise<unknown>) => promise.then(() => undefined, (e: unknown) => e);

describe.each<[string, LockPluginOptions]>([
  ['the guard in a transaction (transactions: auto)', { ttl: 30_000 }],
  ['the guard checking, then writing (transactions: never)', { ttl: 30_000, transactions: 'never' }],
])('%s', (_mode, options) => {
  let M: WorkItemModel;
  beforeAll(async () => {
    M = await workItemModel(conn.connection, options);
  });

  test("a guarded updateOne refused by Alice's lock carries her label, as Model.lock refused by it does", async () => {
    const { _id: id } = await M.create({ title: 'held by Alice' });
    await M.lock(id, 'alice-session', { label: 'Alice' });
    const byLock = await refusal(M.lock(id, 'bob-session'));
    const byWrite = await refusal(M.updateOne({ _id: id }, { $set: { title: 'bob was here' } }).exec());
    expect(byLock).toBeInstanceOf(LockedError);
    expect(byWrite).toBeInstanceOf(LockedError);
    expect((byLock as LockedError).label).toBe('Alice');
    expect((byWrite as LockedError).label).toBe('Alice');
    const http = answer(byWrite);
    expect(http.status).toBe(423);
    expect((http.body as { error: { label: unknown } }).error.label).toBe('Alice');
    expect((await M.findById(id).orFail()).title).toBe('held by Alice');
  });

  test("updateMany, deleteMany and an unlocked document's save refused by Alice's lock carry her label", async () => {
    const docs = await M.create([{ title: 'free' }, { title: 'held' }, { title: 'free too' }]);
    await M.lock(docs[1]._id, 'alice-session', { label: 'Alice' });
    const ids = docs.map((d) => d._id);
    const loaded = await M.findById(docs[1]._id).orFail();
    loaded.title = 'saved over her';
    for (const attempt of [
      () => M.updateMany({ _id: { $in: ids } }, { $set: { title: 'all' } }).exec(),
      () => M.deleteMany({ _id: { $in: ids } }).exec(),
      () => M.bulkWrite(ids.map((id) => ({ updateOne: { filter: { _id: id }, update: { $set: { title: 'bulk' } } } }))),
      () => loaded.save(),
    ]) {
      const error = await refusal(attempt());
      expect(error).toBeInstanceOf(LockedError);
      expect((error as LockedError).label).toBe('Alice');
    }
    expect((await M.find({ _id: { $in: ids } }).sort({ _id: 1 })).map((d) => d.title)).toEqual(['free', 'held', 'free too']);
  });

  test('a holder that gave no label: the refusal says null', async () => {
    const { _id: id } = await M.create({ title: 'held anonymously' });
    await M.lock(id, 'carol-session');
    const error = await refusal(M.updateOne({ _id: id }, { $set: { title: 'x' } }).exec());
    expect(error).toBeInstanceOf(LockedError);
    expect((error as LockedError).label).toBeNull();
  });
});

describe('a wait that ran out', () => {
  let M: WorkItemModel;
  beforeAll(async () => {
    M = await workItemModel(conn.connection, { ttl: 30_000 });
  });

  async function heldByAlice(): Promise<Types.ObjectId> {
    const { _id: id } = await M.create({ title: 'held' });
    await M.lock(id, 'alice-session', { label: 'Alice' });
    return id;
  }

  test('bounded by `wait`: LockedError with the label, saying how long it waited, no cause', async () => {
    const id = await heldByAlice();
    const error = await refusal(M.lock(id, 'bob-session', { wait: 300 }));
    expect(error).toBeInstanceOf(LockedError);
    expect((error as LockedError).label).toBe('Alice');
    expect((error as LockedError).message).toMatch(/Waited \d+ ms for it/);
    expect((error as LockedError).cause).toBeUndefined();
  });

  test('bounded by AbortSignal.timeout: the same LockedError, with the TimeoutError as cause; lockErrorHandler answers 423', async () => {
    const id = await heldByAlice();
    const error = await refusal(M.lock(id, 'bob-session', { wait: 30_000, signal: AbortSignal.timeout(300) }));
    expect(error).toBeInstanceOf(LockedError);
    const locked = error as LockedError;
    expect(locked.label).toBe('Alice');
    expect(locked.message).toMatch(/Waited \d+ ms for it/);
    expect(locked.retryAfterMs).toBeGreaterThan(0);
    expect(locked.cause).toBeInstanceOf(DOMException);
    expect((locked.cause as DOMException).name).toBe('TimeoutError');
    const http = answer(error);
    expect(http.status).toBe(423);
    expect(http.headers['Retry-After']).toMatch(/^\d+$/);
    expect(lockErrorBody(locked).error.label).toBe('Alice');
  });

  test('acquireLock and withLock end the same way', async () => {
    const id = await heldByAlice();
    for (const attempt of [
      () => M.acquireLock(id, 'bob-session', { wait: 30_000, signal: AbortSignal.timeout(200) }),
      () => M.withLock(id, 'bob-session', () => 'ran', { wait: 30_000, signal: AbortSignal.timeout(200) }),
    ]) {
      const error = await refusal(attempt());
      expect(error).toBeInstanceOf(LockedError);
      expect(((error as LockedError).cause as DOMException).name).toBe('TimeoutError');
    }
  });

  test('a signal that timed out before the call still lets the one attempt run: the lock if free, LockedError if held', async () => {
    const signal = AbortSignal.timeout(1);
    await sleep(50);
    expect(signal.aborted).toBe(true);
    const { _id: free } = await M.create({ title: 'free' });
    const doc = await M.lock(free, 'bob-session', { wait: 5_000, signal });
    expect(doc.heldLock()!.owner).toBe('bob-session');
    await doc.unlock();
    const held = await heldByAlice();
    const error = await refusal(M.lock(held, 'bob-session', { wait: 5_000, signal }));
    expect(error).toBeInstanceOf(LockedError);
    expect((error as LockedError).label).toBe('Alice');
    expect(((error as LockedError).cause as DOMException).name).toBe('TimeoutError');
  });
});

describe('an explicit abort', () => {
  let M: WorkItemModel;
  beforeAll(async () => {
    M = await workItemModel(conn.connection, { ttl: 30_000 });
  });

  test('rejects with the signal\'s reason (AbortError), and lockErrorHandler answers 499 naming the document', async () => {
    const { _id: id } = await M.create({ title: 'held' });
    await M.lock(id, 'alice-session', { label: 'Alice' });
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 200);
    const error = await refusal(M.lock(id, 'bob-session', { wait: 30_000, signal: controller.signal }));
    expect(error).toBe(controller.signal.reason);
    expect((error as DOMException).name).toBe('AbortError');
    const http = answer(error);
    expect(http.passedOn).toBeUndefined();
    expect(http.status).toBe(499);
    expect(http.headers).toEqual({});
    expect(http.body).toEqual({
      error: { code: 'ABORTED', message: expect.stringMatching(/aborted/) as unknown, retryable: true, documentId: id.toHexString() },
    });
  });

  test('a reason of your own is yours: rejected with it, and lockErrorHandler passes it on', async () => {
    const { _id: id } = await M.create({ title: 'held' });
    await M.lock(id, 'alice-session');
    const controller = new AbortController();
    const reason = new Error('shutting down');
    setTimeout(() => controller.abort(reason), 100);
    const error = await refusal(M.lock(id, 'bob-session', { wait: 30_000, signal: controller.signal }));
    expect(error).toBe(reason);
    expect(answer(error).passedOn).toBe(reason);
  });

  test('an AbortError that did not come from a lock call is passed on', () => {
    const error = new DOMException('This operation was aborted', 'AbortError');
    expect(answer(error).passedOn).toBe(error);
  });

  test('a signal aborted before the call: rejected with its reason, nothing sent', async () => {
    const { _id: id } = await M.create({ title: 'free' });
    const controller = new AbortController();
    controller.abort();
    conn.resetCommands();
    const error = await refusal(M.lock(id, 'bob-session', { wait: 1_000, signal: controller.signal }));
    expect(error).toBe(controller.signal.reason);
    expect(conn.commands).toEqual([]);
    expect(await M.isLocked(id)).toBe(false);
  });

});

describe('lockMany and lockNext follow the same rule', () => {
  let M: WorkItemModel;
  beforeAll(async () => {
    M = await workItemModel(conn.connection, { ttl: 30_000 });
  });

  test('lockMany bounded by AbortSignal.timeout: LockedError naming the holder, TimeoutError as cause, nothing held', async () => {
    const [free, held] = await M.create([{ title: 'free' }, { title: 'held' }]);
    await M.lock(held._id, 'alice-session', { label: 'Alice' });
    const error = await refusal(M.lockMany([free._id, held._id], 'bob-session', { wait: 30_000, signal: AbortSignal.timeout(300) }));
    expect(error).toBeInstanceOf(LockedError);
    expect((error as LockedError).label).toBe('Alice');
    expect(((error as LockedError).cause as DOMException).name).toBe('TimeoutError');
    expect(answer(error).status).toBe(423);
    expect(await M.isLocked(free._id)).toBe(false);
  });

  test('lockMany aborted: the signal\'s reason, answered 499', async () => {
    const [free, held] = await M.create([{ title: 'free' }, { title: 'held' }]);
    await M.lock(held._id, 'alice-session');
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 200);
    const error = await refusal(M.lockMany([free._id, held._id], 'bob-session', { wait: 30_000, signal: controller.signal }));
    expect(error).toBe(controller.signal.reason);
    expect(answer(error).status).toBe(499);
    expect(await M.isLocked(free._id)).toBe(false);
  });

  test('lockNext bounded by AbortSignal.timeout: null, as when `wait` runs out', async () => {
    const { _id: id } = await M.create({ title: 'the only job', edits: 4711 });
    await M.lock(id, 'alice-session');
    await expect(M.lockNext({ edits: 4711 }, 'bob-session', { wait: 300 })).resolves.toBeNull();
    await expect(M.lockNext({ edits: 4711 }, 'bob-session', { wait: 30_000, signal: AbortSignal.timeout(300) })).resolves.toBeNull();
  });

  test('lockNext aborted: the signal\'s reason, answered 499 without a document', async () => {
    const { _id: id } = await M.create({ title: 'the only job', edits: 4712 });
    await M.lock(id, 'alice-session');
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 200);
    const error = await refusal(M.lockNext({ edits: 4712 }, 'bob-session', { wait: 30_000, signal: controller.signal }));
    expect(error).toBe(controller.signal.reason);
    const http = answer(error);
    expect(http.status).toBe(499);
    expect((http.body as { error: { documentId?: string } }).error.documentId).toBeUndefined();
  });
});
