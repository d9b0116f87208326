/**
 * Observability (issue 18, item 6): the plugin's operations on Node's diagnostics_channel, as
 * docs/observability.md documents them. Each test subscribes, runs the calls, and checks what was
 * published: the tracing channels' event order and context, the named events (refused, expired,
 * taken over, lost), and that no message ever carries an owner, an owner key, a token or a ticket.
 */
import * as dc from 'node:diagnostics_channel';
import { AsyncLocalStorage } from 'node:async_hooks';
import { inspect } from 'node:util';
import { createHash, createHmac, type Hash, type Hmac } from 'node:crypto';
import type { Types } from 'mongoose';
import { LockedError, LockExpiredError, lockAll, type LockEvent, type LockTraceContext } from '../../src';
import { traceCall } from '../../src/diagnostics';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const KINDS = ['lock', 'lockNext', 'lockMany', 'unlock', 'releaseAllFor', 'write'] as const;
const NAMED = ['refused', 'expired', 'taken-over', 'lost'] as const;

interface Recorded {
  channel: string;
  event: string;
  message: LockTraceContext | LockEvent;
  /** What the message said when it was published (the context object is shared and grows). */
  snapshot: string;
}

/** Subscribes to every channel of the plugin; `stop()` unsubscribes. */
function record(): { events: Recorded[]; stop(): void } {
  const events: Recorded[] = [];
  const undo: (() => void)[] = [];
  for (const kind of KINDS) {
    const channel = dc.tracingChannel<object, LockTraceContext>(`mongoose-pessimistic-lock:${kind}`);
    const on = (event: string) => (message: LockTraceContext) => events.push({ channel: kind, event, message, snapshot: inspect(message, { depth: 4 }) });
    const subscribers = { start: on('start'), end: on('end'), asyncStart: on('asyncStart'), asyncEnd: on('asyncEnd'), error: on('error') };
    channel.subscribe(subscribers);
    undo.push(() => channel.unsubscribe(subscribers));
  }
  for (const name of NAMED) {
    const listener = (message: unknown) => events.push({ channel: name, event: 'publish', message: message as LockEvent, snapshot: inspect(message, { depth: 4 }) });
    dc.subscribe(`mongoose-pessimistic-lock:${name}`, listener);
    undo.push(() => dc.unsubscribe(`mongoose-pessimistic-lock:${name}`, listener));
  }
  return { events, stop: () => undo.forEach((fn) => fn()) };
}

const db = testDatabase('diagchannels');
let conn: MonitoredConnection;
let WorkItem: WorkItemModel;
let recorder: ReturnType<typeof record> | undefined;

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

const newItem = async (): Promise<Types.ObjectId> => (await WorkItem.create({ title: 'traced' }))._id;
const of = (events: Recorded[], channel: string) => events.filter((e) => e.channel === channel);

test('a lock call is one traced call on the lock channel: start, end, asyncStart, asyncEnd, with the model, collection and document id', async () => {
  const id = await newItem();
  recorder = record();
  const item = await WorkItem.lock(id, 'alice', { label: 'Alice' });
  const lock = of(recorder.events, 'lock');
  expect(lock.map((e) => e.event)).toEqual(['start', 'end', 'asyncStart', 'asyncEnd']);
  const context = lock[0]!.message as LockTraceContext;
  expect(lock.every((e) => e.message === context)).toBe(true); // one context per call
  expect(context).toMatchObject({ operation: 'lock', model: WorkItem.modelName, collection: WorkItem.collection.collectionName, label: 'Alice', succeeded: true });
  expect(String(context.documentId)).toBe(String(id));
  expect(Object.keys(context).sort()).toEqual(['collection', 'documentId', 'label', 'model', 'operation', 'succeeded']);
  await item.unlock();
});

test('a refused lock call publishes error on its tracing channel and a refused event with the holder label, and tryLock refusals are heard too', async () => {
  const id = await newItem();
  const held = await WorkItem.lock(id, 'alice', { label: 'Alice' });
  recorder = record();
  await expect(WorkItem.lock(id, 'bob')).rejects.toBeInstanceOf(LockedError);
  await expect(WorkItem.tryLock(id, 'bob')).resolves.toBeNull();
  const lock = of(recorder.events, 'lock');
  expect(lock.map((e) => `${(e.message as LockTraceContext).operation}:${e.event}`)).toEqual([
    'lock:start', 'lock:end', 'lock:error', 'lock:asyncStart', 'lock:asyncEnd',
    'tryLock:start', 'tryLock:end', 'tryLock:asyncStart', 'tryLock:asyncEnd',
  ]);
  expect((lock[2]!.message as LockTraceContext).error).toBeInstanceOf(LockedError);
  expect(String((lock[2]!.message as LockTraceContext).documentId)).toBe(String(id));
  expect((lock[8]!.message as LockTraceContext).succeeded).toBe(false);
  const refused = of(recorder.events, 'refused').map((e) => e.message as LockEvent);
  expect(refused.map((r) => r.operation)).toEqual(['lock', 'tryLock']);
  for (const r of refused) {
    expect(r).toMatchObject({ model: WorkItem.modelName, collection: WorkItem.collection.collectionName, label: 'Alice' });
    expect(String(r.documentId)).toBe(String(id));
    expect(r.retryAfterMs).toBeGreaterThan(0);
  }
  await held.unlock();
});

test('a guarded write refused by a lock is traced on the write channel and publishes refused', async () => {
  const id = await newItem();
  const held = await WorkItem.lock(id, 'alice', { label: 'Alice' });
  recorder = record();
  await expect(WorkItem.updateOne({ _id: id }, { $set: { status: 'done' } })).rejects.toBeInstanceOf(LockedError);
  const write = of(recorder.events, 'write');
  expect(write.map((e) => e.event)).toEqual(['start', 'end', 'error', 'asyncStart', 'asyncEnd']);
  expect(write[0]!.message).toMatchObject({ operation: 'updateOne', model: WorkItem.modelName, collection: WorkItem.collection.collectionName });
  const refused = of(recorder.events, 'refused');
  expect(refused).toHaveLength(1);
  expect(refused[0]!.message).toMatchObject({ operation: 'updateOne', label: 'Alice' });
  await held.unlock();
});

test('expired, taken over and lost: each reaches its named channel once, with the reason', async () => {
  const expiredId = await newItem();
  const takenId = await newItem();
  const lostId = await newItem();
  const a = await WorkItem.lock(expiredId, 'alice', { ttl: 1_000 });
  const b = await WorkItem.lock(takenId, 'alice', { ttl: 1_000 });
  const handle = await WorkItem.acquireLock(lostId, 'alice', { autoExtend: false });
  recorder = record();
  await sleep(1_300);
  await WorkItem.lock(takenId, 'bob');
  await expect(a.unlock()).rejects.toBeInstanceOf(LockExpiredError);
  await expect(b.unlock()).rejects.toMatchObject({ reason: 'taken_over' });
  await WorkItem.forceUnlock(lostId);
  await expect(handle.extend()).rejects.toMatchObject({ reason: 'released' });
  expect(handle.signal.aborted).toBe(true);

  const named = (name: string) => of(recorder!.events, name).map((e) => e.message as LockEvent);
  expect(named('expired')).toEqual([expect.objectContaining({ operation: 'doc.unlock', reason: 'expired', model: WorkItem.modelName })]);
  expect(String(named('expired')[0]!.documentId)).toBe(String(expiredId));
  expect(named('taken-over')).toEqual([expect.objectContaining({ operation: 'doc.unlock', reason: 'taken_over' })]);
  expect(String(named('taken-over')[0]!.documentId)).toBe(String(takenId));
  expect(named('lost')).toEqual([expect.objectContaining({ operation: 'handle', reason: 'released', model: WorkItem.modelName, collection: WorkItem.collection.collectionName })]);
  expect(String(named('lost')[0]!.documentId)).toBe(String(lostId));
  await WorkItem.releaseAllFor('bob');
});

test('lockNext, lockMany, lockAll, unlockMany, releaseAllFor and saveAndUnlock are traced on their channels', async () => {
  const [x, y] = await WorkItem.create([{ title: 'n1' }, { title: 'n2' }]);
  recorder = record();
  const next = await WorkItem.lockNext({ _id: x!._id }, 'worker');
  expect(next).not.toBeNull();
  const none = await WorkItem.lockNext({ _id: x!._id }, 'worker');
  expect(none).toBeNull();
  await next!.unlock();
  const group = await WorkItem.lockMany([x!._id, y!._id], 'carol');
  await WorkItem.unlockMany(group);
  const [one] = await lockAll([[WorkItem, x!._id]], 'dave');
  one.title = 'saved';
  await one.saveAndUnlock();
  await WorkItem.lock(y!._id, 'erin');
  expect(await WorkItem.releaseAllFor('erin')).toBe(1);

  const calls = (channel: string) =>
    of(recorder!.events, channel)
      .filter((e) => e.event === 'asyncEnd')
      .map((e) => e.message as LockTraceContext)
      .map((m) => ({ operation: m.operation, succeeded: m.succeeded, count: m.count }));
  expect(calls('lockNext')).toEqual([
    { operation: 'lockNext', succeeded: true, count: undefined },
    { operation: 'lockNext', succeeded: false, count: undefined },
  ]);
  expect(calls('lockMany')).toEqual([
    { operation: 'lockMany', succeeded: true, count: 2 },
    { operation: 'lockAll', succeeded: true, count: 1 },
  ]);
  expect(calls('unlock')).toEqual([
    { operation: 'doc.unlock', succeeded: true, count: undefined },
    { operation: 'unlockMany', succeeded: true, count: 2 },
    { operation: 'saveAndUnlock', succeeded: true, count: undefined },
  ]);
  expect(calls('releaseAllFor')).toEqual([{ operation: 'releaseAllFor', succeeded: true, count: undefined }]);
  // saveAndUnlock's write goes through the guard: the write channel sees it, inside the unlock call.
  expect(of(recorder.events, 'write').length).toBeGreaterThan(0);
});

/**
 * Every form an owner key can take in storage (owner-key.ts: SHA-256, or HMAC-SHA-256 with
 * `ownerSecret`, stored base64url), and the other usual encodings of the same digest, so that a
 * change of encoding cannot make this check blind.
 */
function ownerKeyForms(owner: string, secret?: string): string[] {
  const digest = (): Hash | Hmac => (secret === undefined ? createHash('sha256') : createHmac('sha256', secret));
  return (['base64url', 'base64', 'hex'] as const).map((encoding) => digest().update(owner, 'utf8').digest(encoding));
}

describe.each([
  { storage: 'hashed owners (SHA-256)', secret: undefined },
  { storage: 'owners keyed by ownerSecret (HMAC-SHA-256)', secret: 'diagnostics-secret-5b7e' },
])('with $storage', ({ secret }) => {
  test('no message ever carries an owner, an owner key, a token or a ticket', async () => {
    const Model: WorkItemModel = secret === undefined ? WorkItem : await workItemModel(conn.connection, { ttl: 30_000, ownerSecret: secret });
    const owner = 'owner-secret-7f3a';
    const other = 'owner-secret-9c1d';
    const id: Types.ObjectId = (await Model.create({ title: 'traced' }))._id;
    recorder = record();
    const item = await Model.lock(id, owner, { label: 'Shown' });
    const { token, ticket } = item.heldLock()!;
    // The owner key the lock collection really holds is one of the forms checked below.
    const stored = (await Model.lockModel().collection.findOne({ _id: id as never })) as { owner?: unknown } | null;
    expect(ownerKeyForms(owner, secret)).toContain(stored?.owner);
    await expect(Model.lock(id, other)).rejects.toBeInstanceOf(LockedError);
    await expect(Model.updateOne({ _id: id }, { $set: { status: 'done' } }, { lockOwner: other } as never)).rejects.toBeInstanceOf(LockedError);
    await Model.updateOne({ _id: id }, { $set: { status: 'done' } }, { lockOwner: owner } as never);
    item.title = 'x';
    await item.saveAndUnlock();
    const handle = await Model.acquireLock(id, owner);
    await Model.forceUnlock(id);
    await expect(handle.extend()).rejects.toMatchObject({ reason: 'released' });
    await Model.releaseAllFor(owner);

    expect(recorder.events.length).toBeGreaterThan(20);
    const secrets = [owner, other, token, ticket, ...ownerKeyForms(owner, secret), ...ownerKeyForms(other, secret)];
    for (const event of recorder.events) {
      const text = `${event.snapshot}\n${inspect(event.message, { depth: 6 })}\n${JSON.stringify(event.message, (_k, v: unknown) => (typeof v === 'bigint' ? String(v) : v))}`;
      for (const leaked of secrets) expect({ channel: event.channel, event: event.event, leaks: text.includes(leaked) }).toEqual({ channel: event.channel, event: event.event, leaks: false });
    }
  });
});

test('a store bound to a tracing channel is active inside the call: a guarded write inside saveAndUnlock sees the unlock call as its parent', async () => {
  const id = await newItem();
  const parent = new AsyncLocalStorage<{ operation: string }>();
  const unlock = dc.tracingChannel<{ operation: string }, LockTraceContext>('mongoose-pessimistic-lock:unlock');
  unlock.start.bindStore(parent, (context) => ({ operation: (context as LockTraceContext).operation }));
  const seen: (string | undefined)[] = [];
  const write = dc.tracingChannel<object, LockTraceContext>('mongoose-pessimistic-lock:write');
  const onStart = () => void seen.push(parent.getStore()?.operation);
  write.subscribe({ start: onStart, end: () => undefined, asyncStart: () => undefined, asyncEnd: () => undefined, error: () => undefined });
  try {
    const item = await WorkItem.lock(id, 'frank');
    item.title = 'nested';
    await item.saveAndUnlock();
    await WorkItem.updateOne({ _id: id }, { $set: { status: 'done' } });
  } finally {
    unlock.start.unbindStore(parent);
    write.unsubscribe({ start: onStart, end: () => undefined, asyncStart: () => undefined, asyncEnd: () => undefined, error: () => undefined });
  }
  expect(seen[0]).toBe('saveAndUnlock');
  expect(seen.length).toBeGreaterThanOrEqual(2);
  expect(seen[seen.length - 1]).toBeUndefined(); // the later updateOne runs outside any traced call
});

test('unobserved, a traced call is the call itself: the same promise, no context built', async () => {
  const promise = Promise.resolve(42);
  let built = 0;
  const result = traceCall('lock', () => (built++, { operation: 'x', model: undefined, collection: undefined }), () => promise);
  expect(result).toBe(promise);
  expect(built).toBe(0);
  await expect(result).resolves.toBe(42);
});
