/** extendLock, acquireLock handles (await using) and withLock with auto-extension. */
import { LockExpiredError, LockNotHeldError, LockedError } from '../../src';
import { LockHandle } from '../../src/lock-handle';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('renewal');
let conn: MonitoredConnection;
let WorkItem: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  WorkItem = await workItemModel(conn.connection, { ttl: 300 });
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

describe('doc.extendLock', () => {
  test('moves the expiry forward by server time and keeps others out past the original ttl', async () => {
    const { _id: id } = await WorkItem.create({ title: 'long edit' });
    const item = await WorkItem.lock(id, 'a');
    const original = item.heldLock()!.expiresAt.getTime();
    const extended = await item.extendLock(3_000);
    expect(extended.getTime()).toBeGreaterThan(original);
    expect(item.heldLock()!.expiresAt.getTime()).toBe(extended.getTime());
    await sleep(450);
    await expect(WorkItem.lock(id, 'b')).rejects.toBeInstanceOf(LockedError);
    item.title = 'still mine';
    await item.saveAndUnlock();
    expect((await WorkItem.findById(id).orFail()).title).toBe('still mine');
  });

  test('cannot revive a lock that expired or was taken over', async () => {
    const { _id: id } = await WorkItem.create({ title: 'x' });
    const stale = await WorkItem.lock(id, 'a');
    await sleep(400);
    await expect(stale.extendLock()).rejects.toBeInstanceOf(LockExpiredError);
    const { _id: id2 } = await WorkItem.create({ title: 'y' });
    const lost = await WorkItem.lock(id2, 'a');
    await sleep(400);
    // Its own ttl is long: the model's 300 ms could run out before the clean-up's unlock on a loaded machine.
    const taker = await WorkItem.lock(id2, 'b', { ttl: 30_000 });
    const error = await lost.extendLock().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockNotHeldError);
    expect((error as LockNotHeldError).reason).toBe('taken_over');
    await taker.unlock();
  });
});

describe('Model.withLock', () => {
  test('renews while fn runs past the ttl, returns fn\'s value and releases at the end', async () => {
    const { _id: id } = await WorkItem.create({ title: 'slow job' });
    const result = await WorkItem.withLock(
      id,
      'worker',
      async (doc, signal) => {
        for (let i = 0; i < 4; i++) {
          await sleep(1_200); // 4.8 s in all, almost two and a half ttls
          await expect(WorkItem.lock(id, 'intruder')).rejects.toBeInstanceOf(LockedError);
        }
        expect(signal.aborted).toBe(false);
        doc.title = 'done';
        await doc.save();
        return 'result';
      },
      // Renewal comes a third of the ttl before expiry: 2 s leaves a loaded machine 660 ms of slack.
      { ttl: 2_000 },
    );
    expect(result).toBe('result');
    expect(await WorkItem.isLocked(id)).toBe(false);
    expect((await WorkItem.findById(id).orFail()).title).toBe('done');
  });

  test('releases when fn throws, and passes the error on', async () => {
    const { _id: id } = await WorkItem.create({ title: 'failing job' });
    const failure = new Error('job failed');
    await expect(
      WorkItem.withLock(id, 'worker', async () => {
        throw failure;
      }),
    ).rejects.toBe(failure);
    expect(await WorkItem.isLocked(id)).toBe(false);
  });

  test('aborts the signal at once when the lock is lost', async () => {
    const { _id: id } = await WorkItem.create({ title: 'revoked' });
    const reason = await WorkItem.withLock(id, 'worker', async (_doc, signal) => {
      await WorkItem.forceUnlock(id); // an administrator takes the lock away
      await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
      return signal.reason as unknown;
    }, { ttl: 2_000 }); // the renewal (at about 1.3 s) finds the lock gone, well before it would expire
    expect(reason).toBeInstanceOf(LockNotHeldError);
    expect((reason as LockNotHeldError).reason).toBe('released');
  });

  test('without autoExtend the lock expires during fn and the signal says so', async () => {
    const { _id: id } = await WorkItem.create({ title: 'too slow' });
    const reason = await WorkItem.withLock(
      id,
      'worker',
      async (_doc, signal) => {
        await new Promise<void>((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
        return signal.reason as unknown;
      },
      { autoExtend: false },
    );
    expect(reason).toBeInstanceOf(LockExpiredError);
  });
});

describe('Model.acquireLock', () => {
  test('`await using` releases at the end of the block', async () => {
    const { _id: id } = await WorkItem.create({ title: 'scoped' });
    {
      // A ttl far above the block's length: this test is about the release, not renewal timing.
      await using handle = await WorkItem.acquireLock(id, 'scoped-owner', { ttl: 10_000 });
      expect(handle).toBeInstanceOf(LockHandle);
      expect(await WorkItem.isLocked(id)).toBe(true);
      handle.document.title = 'edited in scope';
      await handle.document.save();
      expect(handle.fence).toBe(handle.document.heldLock()!.fence);
    }
    expect(await WorkItem.isLocked(id)).toBe(false);
    expect((await WorkItem.findById(id).orFail()).title).toBe('edited in scope');
  });

  test('release() releases once; a second release is reported', async () => {
    const { _id: id } = await WorkItem.create({ title: 'handle' });
    const handle = await WorkItem.acquireLock(id, 'owner', { autoExtend: false, ttl: 5_000 });
    await handle.release();
    expect(await WorkItem.isLocked(id)).toBe(false);
    await expect(handle.release()).rejects.toBeInstanceOf(LockNotHeldError);
    await handle[Symbol.asyncDispose](); // disposing a released handle is a no-op
  });
});
