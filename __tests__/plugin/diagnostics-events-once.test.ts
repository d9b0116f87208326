/**
 * The named diagnostics channels (docs/observability.md, "Events") publish one message per event,
 * exactly when its documented condition happens:
 *  - a caller that learns its lock expired hears `expired` once, even when the lock call it made
 *    contains a guarded write that learned it first (saveAndUnlock's save);
 *  - a refusal inside a withLock callback is one refusal, not one per enclosing traced call;
 *  - a handle whose document was released by saveAndUnlock() (a normal release) never publishes
 *    `lost`, in particular not as `expired` once the released lease would have run out.
 */
import * as dc from 'node:diagnostics_channel';
import type { Types } from 'mongoose';
import { LockedError, LockExpiredError, type LockEvent } from '../../src';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const NAMED = ['refused', 'expired', 'taken-over', 'lost'] as const;

function recordNamed(): { events: { channel: string; message: LockEvent }[]; stop(): void } {
  const events: { channel: string; message: LockEvent }[] = [];
  const undo: (() => void)[] = [];
  for (const name of NAMED) {
    const listener = (message: unknown) => void events.push({ channel: name, message: message as LockEvent });
    dc.subscribe(`mongoose-pessimistic-lock:${name}`, listener);
    undo.push(() => dc.unsubscribe(`mongoose-pessimistic-lock:${name}`, listener));
  }
  return { events, stop: () => undo.forEach((fn) => fn()) };
}

const db = testDatabase('diageventsonce');
let conn: MonitoredConnection;
let WorkItem: WorkItemModel;
let recorder: ReturnType<typeof recordNamed> | undefined;

beforeAll(async () => {
  conn = await connect(db.name);
  WorkItem = await workItemModel(conn.connection, { ttl: 30_000 });
});
afterEach(() => {
  recorder?.stop();
  recorder = undefined;
});
afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

const newItem = async (): Promise<Types.ObjectId> => (await WorkItem.create({ title: 'once' }))._id;

test('saveAndUnlock on an expired lock publishes expired once', async () => {
  const id = await newItem();
  const item = await WorkItem.lock(id, 'alice', { ttl: 1_000 });
  await sleep(1_500);
  recorder = recordNamed();
  item.title = 'too late';
  await expect(item.saveAndUnlock()).rejects.toBeInstanceOf(LockExpiredError);
  const expired = recorder.events.filter((e) => e.channel === 'expired');
  // One caller learned once that its lock expired: one event (it was two: the save's guarded
  // write published it, then saveAndUnlock's traced call published the same error again).
  expect(expired.map((e) => e.message.operation)).toHaveLength(1);
});

test('a refusal inside a withLock callback is published once', async () => {
  const outer = await newItem();
  const inner = await newItem();
  const held = await WorkItem.lock(inner, 'alice', { label: 'Alice' });
  recorder = recordNamed();
  await expect(
    WorkItem.withLock(outer, 'bob', async () => {
      await WorkItem.lock(inner, 'bob'); // refused by Alice: one refusal
    }),
  ).rejects.toBeInstanceOf(LockedError);
  const refused = recorder.events.filter((e) => e.channel === 'refused').map((e) => e.message.operation);
  // It was ['lock', 'withLock']: withLock's trace re-published its callback's error, although
  // the withLock acquisition itself was granted (a metric of refusals counts this one twice).
  expect(refused).toEqual(['lock']);
  await held.unlock();
});

test('a handle whose document was saveAndUnlocked never publishes lost', async () => {
  const id = await newItem();
  const handle = await WorkItem.acquireLock(id, 'alice', { ttl: 1_000 });
  recorder = recordNamed();
  handle.document.title = 'saved and released';
  await handle.document.saveAndUnlock();
  // Past the lease of the released lock (and its renewal time): nothing was lost, it was released.
  await sleep(2_000);
  expect(recorder.events.filter((e) => e.channel === 'lost').map((e) => e.message)).toEqual([]);
});

test("a handle whose document was unlocked with doc.unlock() never publishes lost", async () => {
  const id = await newItem();
  const handle = await WorkItem.acquireLock(id, 'alice', { ttl: 1_000 });
  recorder = recordNamed();
  await handle.document.unlock();
  await sleep(2_000);
  expect(recorder.events.filter((e) => e.channel === 'lost').map((e) => e.message)).toEqual([]);
});

test('a group handle whose documents were released with unlockMany never publishes lost', async () => {
  const ids = [await newItem(), await newItem()];
  const group = await WorkItem.acquireLocks(ids, 'alice', { ttl: 1_000 });
  recorder = recordNamed();
  await WorkItem.unlockMany(group.documents);
  await sleep(2_000);
  expect(recorder.events.filter((e) => e.channel === 'lost').map((e) => e.message)).toEqual([]);
});
