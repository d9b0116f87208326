/**
 * A handle whose lock its holder released another way: through the handle's document
 * (`handle.document.unlock()`, `saveAndUnlock()`), through a resumed instance of the same
 * acquisition, or with `Model.unlock(id, owner, { ticket })`. README, Keeping a lock alive: the
 * handle's `signal` "aborts as soon as the lock is known to be lost". The lock is gone on the
 * server, so work the signal guards must stop: before, only `msLeft()` of the handle's own
 * document dropped to 0; the signal stayed live (and the auto-renewal kept trying) until the old
 * lease ended. Also: LockExpiredOnArrivalError says what happened, truthfully.
 * Runs on a replica set and on a standalone server.
 */
import { LockExpiredOnArrivalError, LockNotHeldError } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('handlerelease');
let conn: MonitoredConnection;
let M: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  M = await workItemModel(conn.connection, { ttl: 30_000 }, 'HandleRelease');
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

type Handle = Awaited<ReturnType<WorkItemModel['acquireLock']>>;

const ways: [string, (handle: Handle) => Promise<unknown>][] = [
  ['handle.document.unlock()', (handle) => handle.document.unlock()],
  ['handle.document.saveAndUnlock()', (handle) => ((handle.document.title = 'saved and released'), handle.document.saveAndUnlock())],
  [
    'a resumed instance of the same acquisition unlocks',
    async (handle) => (await M.lock(handle.document._id, 'alice', { resume: handle.document.heldLock()!.ticket })).unlock(),
  ],
  ["Model.unlock(id, owner, { ticket })", (handle) => M.unlock(handle.document._id, 'alice', { ticket: handle.document.heldLock()!.ticket })],
];

test.each(ways)("the handle's signal aborts with LockNotHeldError('released') after %s", async (_name, release) => {
  const { _id: id } = await M.create({ title: 'held by a handle' });
  const handle = await M.acquireLock(id, 'alice');
  let abortEvent: unknown;
  handle.signal.addEventListener('abort', () => (abortEvent = handle.signal.reason));
  await release(handle);
  expect(await M.isLocked(id)).toBe(false);
  // The abort event, not only a read of `signal` (which re-checks): a fetch() given the signal hears it.
  expect(abortEvent).toBeInstanceOf(LockNotHeldError);
  expect({ reason: (abortEvent as LockNotHeldError).reason, msLeft: handle.msLeft() }).toEqual({ reason: 'released', msLeft: 0 });
  // Disposing afterwards neither throws nor releases anything else.
  await handle[Symbol.asyncDispose]();
});

test('LockExpiredOnArrivalError states what happened: when the answer arrived, the drift allowance, that a release was sent (best effort)', () => {
  const error = new LockExpiredOnArrivalError('x1', new Date(0), { operation: 'lock', ttl: 1_000, elapsedMs: 1_234.4, attempts: 3 });
  expect(error.message).toBe(
    'The lock (with the document) on document "x1" arrived 1234 ms after the request was sent (the last of 3 attempts): of its ttl of 1000 ms, less 12 ms set aside for clock drift, ' +
      'less than 1 ms was left to count on, so it was not handed out: the server may have freed it before the answer arrived. ' +
      'A release by its token was sent (if it did not arrive, the lock expires by its ttl); this call holds nothing. Use a longer ttl, or try again when the database answers faster.',
  );
  const extension = new LockExpiredOnArrivalError('x1', new Date(0), { operation: 'extend', ttl: 30_000, elapsedMs: 40, attempts: 1 });
  expect(extension.message).toMatch(/^The extension of the lock on document "x1" arrived 40 ms after the request was sent: less than 1 ms was left to count on \(another, shorter extension of the same lock was sent meanwhile\), so it was not kept/);
});
