/**
 * Issue 18, Found 4: a user opens an item in a second tab (the same session: a new acquisition by
 * the same owner), then saves from the first. The first tab's ticket is stale, and the error used
 * to read like a stranger's takeover ("expired and someone else has edited it since"): nothing
 * expired and nobody else edited. The refusal now says which, without revealing any owner:
 * `LockNotHeldError` keeps `reason: 'taken_over'` and says `sameOwner: true` (the later acquisition
 * is the caller's own), `false` (another owner's), or `undefined` (not known: that acquisition has
 * since been released). The server compares the owner key inside the projection (`$eq` against a
 * `$literal`), so no owner reaches this process.
 */
import { LockNotHeldError, lockErrorBody } from '../../src';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('sameowner');
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

const newItem = async (title = 'Refund #4711') => (await WorkItem.create({ title }))._id;

async function refusal(promise: Promise<unknown>): Promise<LockNotHeldError> {
  const error = await promise.then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(LockNotHeldError);
  return error as LockNotHeldError;
}

test('the same owner locked the document again (a second tab): taken over, sameOwner true, and the message says so', async () => {
  const id = await newItem();
  const firstTab = await WorkItem.lock(id, 'alice-session-7f3a');
  const secondTab = await WorkItem.lock(id, 'alice-session-7f3a');

  conn.resetCommands();
  const error = await refusal(WorkItem.lock(id, 'alice-session-7f3a', { resume: firstTab.heldLock()!.ticket }));
  expect(conn.commands).toEqual(['findAndModify', 'find']); // the resume, and the one read that says why
  expect(error.reason).toBe('taken_over');
  expect(error.sameOwner).toBe(true);
  expect(error.status).toBe(409);
  expect(error.message).toMatch(/locked again by the same owner/);
  expect(error.message).not.toContain('alice');
  expect(lockErrorBody(error).error).toMatchObject({ reason: 'taken_over', sameOwner: true });
  expect(JSON.stringify(lockErrorBody(error))).not.toContain('alice');

  // The second tab's acquisition is untouched.
  const resumed = await WorkItem.lock(id, 'alice-session-7f3a', { resume: secondTab.heldLock()!.ticket });
  await resumed.unlock();
});

test('another owner took the expired lock: taken over, sameOwner false, and the message does not blame the caller', async () => {
  const id = await newItem();
  const alice = await WorkItem.lock(id, 'alice-session', { ttl: 300 });
  while (await WorkItem.isLocked(id)) await sleep(50); // expired by the server's clock
  const bob = await WorkItem.lock(id, 'bob-session');

  const error = await refusal(WorkItem.lock(id, 'alice-session', { resume: alice.heldLock()!.ticket }));
  expect(error.reason).toBe('taken_over');
  expect(error.sameOwner).toBe(false);
  expect(error.message).not.toMatch(/same owner/);
  expect(lockErrorBody(error).error.sameOwner).toBe(false);
  await bob.unlock();
});

test('the later acquisition has since been released: taken over, owner unknown (undefined); a plain release: no flag', async () => {
  const id = await newItem();
  const alice = await WorkItem.lock(id, 'alice-session', { ttl: 300 });
  while (await WorkItem.isLocked(id)) await sleep(50);
  const bob = await WorkItem.lock(id, 'bob-session');
  await bob.unlock();
  const error = await refusal(WorkItem.lock(id, 'alice-session', { resume: alice.heldLock()!.ticket }));
  expect(error.reason).toBe('taken_over');
  expect(error.sameOwner).toBeUndefined();
  expect('sameOwner' in lockErrorBody(error).error).toBe(false);

  const again = await WorkItem.lock(id, 'alice-session');
  await WorkItem.releaseAllFor('alice-session');
  const released = await refusal(WorkItem.lock(id, 'alice-session', { resume: again.heldLock()!.ticket }));
  expect(released.reason).toBe('released');
  expect(released.sameOwner).toBeUndefined();
});
