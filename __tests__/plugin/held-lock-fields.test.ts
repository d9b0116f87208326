/**
 * What `doc.heldLock()` returns, as the README's table documents it: ten own enumerable fields
 * (JSON, spread and `Object.keys` see all of them), `msLeft` callable on its own, `ticket`
 * read-only, `expiresAt` shared by every instance of the acquisition. The object is built by a
 * class with accessors defined from shared functions (src/held-lock.ts, issue 16 Performance):
 * these pin that nothing of that is lost, and that the fields a caller may overwrite on the object
 * it was handed are not what the ticket and the process's map of leases are built from.
 */
import type { LockableDocument } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItem, type WorkItemModel } from '../support/work-item';

const db = testDatabase('heldlockfields');
let conn: MonitoredConnection;
let M: WorkItemModel;

const FIELDS = ['acquiredAt', 'documentId', 'expiresAt', 'fence', 'label', 'msLeft', 'owner', 'ticket', 'token', 'ttl'];

beforeAll(async () => {
  conn = await connect(db.name);
  M = await workItemModel(conn.connection, { ttl: 30_000 });
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

test('the ten fields are own and enumerable: Object.keys, JSON and spread see them with their values', async () => {
  const { _id: id } = await M.create({ title: 'fields' });
  const doc = await M.lock(id, 'alice', { label: 'Alice' });
  const lock = doc.heldLock()!;
  expect(Object.keys(lock).sort()).toEqual(FIELDS);
  const json = JSON.parse(JSON.stringify(lock)) as Record<string, unknown>;
  expect(Object.keys(json).sort()).toEqual(FIELDS.filter((f) => f !== 'msLeft'));
  expect(json).toMatchObject({ owner: 'alice', token: lock.token, fence: lock.fence, ttl: 30_000, label: 'Alice', ticket: lock.ticket, expiresAt: lock.expiresAt.toISOString() });
  const copy = { ...lock };
  expect(copy.ticket).toBe(lock.ticket);
  expect(copy.expiresAt).toEqual(lock.expiresAt);
  expect(copy.documentId).toEqual(id);
  const { msLeft } = lock;
  expect(msLeft()).toBeGreaterThan(0);
  expect(() => {
    (lock as { ticket: string }).ticket = 'forged';
  }).toThrow(TypeError);
  expect(lock.ticket).not.toBe('forged');
  await doc.unlock();
  expect(msLeft()).toBe(0);
});

test("an extension through one instance moves every instance's expiresAt (one lease)", async () => {
  const { _id: id } = await M.create({ title: 'shared expiry' });
  const first = await M.lock(id, 'alice', { ttl: 5_000 });
  const second = await M.lock(id, 'alice', { resume: first.heldLock()!.ticket });
  const extended = await second.extendLock(60_000);
  expect(first.heldLock()!.expiresAt).toEqual(extended);
  expect(second.heldLock()!.expiresAt).toEqual(extended);
  await first.unlock();
  expect(second.heldLock()?.msLeft() ?? 0).toBe(0);
});

test("overwriting the object's documentId and token changes neither the ticket nor which lease a resume joins", async () => {
  const { _id: id } = await M.create({ title: 'overwritten fields' });
  const { _id: other } = await M.create({ title: 'other' });
  const first: LockableDocument<WorkItem> = await M.lock(id, 'alice');
  const lock = first.heldLock()!;
  const token = lock.token;
  (lock as { documentId: unknown }).documentId = other;
  (lock as { token: string }).token = 'overwritten';
  const ticket = lock.ticket; // read after the overwrite: issued for the acquisition, not the fields
  const resumed = await M.lock(id, 'alice', { resume: ticket });
  expect(resumed.heldLock()!.token).toBe(token);
  // One lease: the release through the resumed instance ends the first one's belief at once.
  await resumed.unlock();
  expect(lock.msLeft()).toBe(0);
  expect(await M.isLocked(id)).toBe(false);
});
