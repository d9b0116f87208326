/**
 * No value a caller passes is ever evaluated by the server (PRODUCT.md property 11). Owners,
 * tokens and ttls enter pipeline updates, `$expr` and projections only inside `$literal`
 * (manual: `$literal` "returns a value without parsing"), so an owner such as `'$owner'` or
 * `'$_id'` is a string like any other, in both owner storages. Two kinds of proof:
 *  - behaviour: `$`-prefixed owners lock, exclude and release exactly like ordinary ones;
 *  - shape: every command the plugin sends is walked, and every string starting with `$`
 *    outside `$literal` must be one of the plugin's own field paths or system variables.
 * Plus LockHandle.extend / doc.extendLock with bad values: a typed error, nothing sent, the
 * lock untouched and the handle's signal not aborted.
 */
import { createHash } from 'node:crypto';
import type { Document } from 'mongodb';
import { InvalidLockOptionError, LockedError, MAX_TTL_MS } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('noeval');
let conn: MonitoredConnection;
const sent: Document[] = [];

/** The plugin's own field paths and the system variables it uses: nothing else may start with `$`. */
const ALLOWED_DOLLAR_STRINGS = new Set(['$$NOW', '$owner', '$token', '$fence', '$acquiredAt', '$expiresAt', '$claim', '$lastWriteAt', '$label', '$ttl', '$reservedBy', '$reservedUntil', '$reservedSince']);

/** Strings starting with `$` found outside `$literal` in pipelines, `$expr` and projections of one command. */
function evaluatedStrings(command: Document): string[] {
  const found: string[] = [];
  const walk = (value: unknown): void => {
    if (typeof value === 'string') {
      if (value.startsWith('$')) found.push(value);
      return;
    }
    if (Array.isArray(value)) return value.forEach(walk);
    if (value === null || typeof value !== 'object' || (value as { _bsontype?: string })._bsontype) return;
    for (const [key, inner] of Object.entries(value)) {
      if (key === '$literal') continue;
      walk(inner);
    }
  };
  // Only the parts the server evaluates as expressions: pipeline updates, $expr, projections.
  const evaluated: unknown[] = [];
  if (Array.isArray(command.update)) evaluated.push(command.update);
  if (Array.isArray(command.updates)) for (const u of command.updates as Document[]) if (Array.isArray(u.u)) evaluated.push(u.u);
  for (const p of [command.fields, command.projection]) if (p) evaluated.push(p);
  const exprs = (filter: unknown): void => {
    if (filter === null || typeof filter !== 'object') return;
    for (const [key, inner] of Object.entries(filter as Document)) {
      if (key === '$expr') evaluated.push(inner);
      else exprs(inner);
    }
  };
  for (const f of [command.query, command.filter, ...((command.updates as Document[] | undefined) ?? []).map((u) => u.q)]) exprs(f);
  evaluated.forEach(walk);
  return found;
}

beforeAll(async () => {
  conn = await connect(db.name);
  conn.connection.getClient().on('commandStarted', (event) => {
    if (['findAndModify', 'update', 'find'].includes(event.commandName)) sent.push(event.command);
  });
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

const dollarOwners = ['$_id', '$owner', '$token', '$expiresAt', '$$NOW', '$$ROOT', '$$REMOVE', '$fence', '$literal', '$', '$$CURRENT.owner'];

describe.each(['hash', 'plain'] as const)('ownerStorage %s: $-prefixed owners are plain strings', (ownerStorage) => {
  let WorkItem: WorkItemModel;
  beforeAll(async () => {
    WorkItem = await workItemModel(conn.connection, { ownerStorage, ttl: 5_000 });
  });

  test.each(dollarOwners)('owner %j locks, is stored as given (or hashed), excludes others and is released by name', async (owner) => {
    const { _id: id } = await WorkItem.create({ title: 'target' });
    sent.length = 0;
    await WorkItem.lock(id, owner);
    const record = await conn.connection.getClient().db(db.name).collection(WorkItem.lockModel().collection.collectionName).findOne({ _id: id });
    expect(record!.owner).toBe(ownerStorage === 'plain' ? owner : createHash('sha256').update(owner).digest('base64url'));
    expect(typeof record!.token).toBe('string');
    expect(record!.expiresAt).toBeInstanceOf(Date);
    expect(record!.expiresAt.getTime() - record!.acquiredAt.getTime()).toBe(5_000);

    // Another owner is refused, whatever the holder's name would mean as an expression.
    await expect(WorkItem.lock(id, 'ordinary-owner')).rejects.toBeInstanceOf(LockedError);
    // And an owner that names a field ('$owner' would compare the record with itself) cannot take over.
    if (owner !== '$owner') await expect(WorkItem.lock(id, '$owner')).rejects.toBeInstanceOf(LockedError);

    expect(await WorkItem.releaseAllFor(owner)).toBe(1);
    expect(await WorkItem.isLocked(id)).toBe(false);
    expect(sent.length).toBeGreaterThan(0);
    for (const command of sent) for (const s of evaluatedStrings(command)) expect(ALLOWED_DOLLAR_STRINGS).toContain(s);
  });

  test('waiting $-prefixed owners hold prefixes and reserve, are served in turn and release, and no command evaluates the owner or the reservation', async () => {
    const docs = await WorkItem.create([{ title: 'r1' }, { title: 'r2' }]);
    const ids = docs.map((d) => d._id);
    sent.length = 0;
    const holder = await WorkItem.lock(ids[1], '$$ROOT');
    // Each waits in canonical order (a prefix, a reservation of the next document), one after the other.
    const waiting = ['$reservedBy', '$owner', '$$NOW'].map((owner) => WorkItem.lockMany(ids, owner, { wait: 20_000, label: '$reservedUntil' }).then((held) => WorkItem.unlockMany(held)));
    const reserved = () => WorkItem.lockModel().countDocuments({ _id: { $in: ids }, $expr: { $gt: ['$reservedUntil', '$$NOW'] } });
    for (const deadline = Date.now() + 20_000; (await reserved()) < 1 && Date.now() < deadline; ) await new Promise((resolve) => setTimeout(resolve, 50));
    await holder.unlock();
    await Promise.all(waiting);
    // A reservation was written (cmd-reserve) and a step carried the reservation key (cmd-take-group).
    expect(sent.some((command) => JSON.stringify(command.updates ?? []).includes('"reservedBy":{"$cond"'))).toBe(true);
    expect(sent.some((command) => JSON.stringify(command.updates ?? []).includes('{"$eq":["$reservedBy",{"$literal"'))).toBe(true);
    for (const command of sent) for (const s of evaluatedStrings(command)) expect(ALLOWED_DOLLAR_STRINGS).toContain(s);
  });

  test('a guarded write acting as a $-prefixed owner is refused on someone else\'s lock', async () => {
    const { _id: id } = await WorkItem.create({ title: 'held' });
    const holder = await WorkItem.lock(id, 'alice');
    for (const owner of dollarOwners) {
      await expect(WorkItem.updateOne({ _id: id }, { $set: { title: 'intruder' } }).setOptions({ lockOwner: owner })).rejects.toBeInstanceOf(LockedError);
    }
    expect((await WorkItem.findById(id).orFail()).title).toBe('held');
    await holder.unlock();
  });

  test('guarded writes by a $-prefixed holder (one target, a batch of targets, a save) go through, and no command evaluates the owner', async () => {
    sent.length = 0;
    for (const [n, owner] of dollarOwners.entries()) {
      const docs = await WorkItem.create([{ title: `a${n}` }, { title: `b${n}` }, { title: `c${n}` }]);
      const ids = docs.map((d) => d._id);
      await WorkItem.lock(ids[0], owner);
      await WorkItem.lock(ids[1], owner);
      const asOwner = { lockOwner: owner } as Record<string, unknown>;
      await WorkItem.updateOne({ _id: ids[0] }, { $set: { title: `one${n}` } }, asOwner);
      await WorkItem.updateMany({ _id: { $in: ids } }, { $set: { status: 'done' } }, asOwner);
      await WorkItem.updateMany({ title: { $in: [`one${n}`, `b${n}`, `c${n}`] } }, { $inc: { edits: 1 } }, asOwner);
      const held = await WorkItem.lock(ids[2], owner);
      held.edits = 10;
      await held.saveAndUnlock();
      expect((await WorkItem.find({ _id: { $in: ids } }).sort({ _id: 1 }).lean()).map((d) => [d.status, d.edits])).toEqual([
        ['done', 1],
        ['done', 1],
        ['done', 10],
      ]);
      // Someone else is still refused on the two documents the owner holds.
      await expect(WorkItem.updateMany({ _id: { $in: ids } }, { $set: { title: 'x' } }, { lockOwner: 'mallory' } as Record<string, unknown>)).rejects.toBeInstanceOf(LockedError);
    }
    expect(sent.length).toBeGreaterThan(0);
    for (const command of sent) for (const s of evaluatedStrings(command)) expect(ALLOWED_DOLLAR_STRINGS).toContain(s);
  });
});

// Issue 11: labels, tickets, the status of a page and the admin listing carry caller values too.
describe.each(['hash', 'plain'] as const)('ownerStorage %s: the web story\'s entry points evaluate nothing a caller passes', (ownerStorage) => {
  let WorkItem: WorkItemModel;
  beforeAll(async () => {
    WorkItem = await workItemModel(conn.connection, { ownerStorage, ttl: 5_000 });
  });

  test.each(dollarOwners)('owner and label %j: resume, unlock, lockStatus and listLocks treat them as plain strings', async (owner) => {
    const { _id: id } = await WorkItem.create({ title: 'web' });
    const { _id: other } = await WorkItem.create({ title: 'someone else' });
    sent.length = 0;
    const opened = await WorkItem.lock(id, owner, { label: owner });
    await WorkItem.lock(other, 'ordinary-owner', { label: '$owner' });
    expect((await WorkItem.getLock(id))!.label).toBe(owner);

    const resumed = await WorkItem.lock(id, owner, { resume: opened.heldLock()!.ticket });
    expect(resumed.heldLock()!.token).toBe(opened.heldLock()!.token);
    // The other holder's ticket does not work for this owner, whatever its name means as an expression.
    await expect(WorkItem.lock(other, owner, { resume: opened.heldLock()!.ticket })).rejects.toBeInstanceOf(InvalidLockOptionError);

    const status = await WorkItem.lockStatus([id, other], { owner });
    expect(status.map((s) => s?.mine)).toEqual([true, false]);
    expect(status.map((s) => s?.label)).toEqual([owner, '$owner']);
    const page = await WorkItem.listLocks({ owner });
    expect(page.locks.map((lock) => String(lock.documentId))).toEqual([String(id)]);

    expect(await WorkItem.unlock(other, owner)).toBe(false); // never someone else's
    expect(await WorkItem.unlock(id, owner, { ticket: opened.heldLock()!.ticket })).toBe(true);
    expect(await WorkItem.isLocked(other)).toBe(true);
    await WorkItem.releaseAllFor('ordinary-owner');

    expect(sent.length).toBeGreaterThan(0);
    for (const command of sent) for (const s of evaluatedStrings(command)) expect(ALLOWED_DOLLAR_STRINGS).toContain(s);
  });
});

// Issue 17: the group calls put the owner key, the token, the ttl and the label into one pipeline per document.
describe.each(['hash', 'plain'] as const)('ownerStorage %s: lockMany, its handle and unlockMany evaluate nothing a caller passes', (ownerStorage) => {
  let WorkItem: WorkItemModel;
  beforeAll(async () => {
    WorkItem = await workItemModel(conn.connection, { ownerStorage, ttl: 5_000 });
  });

  test.each(dollarOwners)('owner and label %j: a granted group, a refused one, a renewal and a release', async (owner) => {
    const ids = (await WorkItem.create([{ title: 'g1' }, { title: 'g2' }, { title: 'g3' }])).map((d) => d._id);
    sent.length = 0;
    const docs = await WorkItem.lockMany(ids.slice(0, 2), owner, { label: owner });
    expect(docs.map((d) => d.heldLock()!.label)).toEqual([owner, owner]);
    // Someone else is refused on the whole group, and an owner naming a field cannot take it over.
    await expect(WorkItem.lockMany(ids, 'ordinary-owner')).rejects.toBeInstanceOf(LockedError);
    if (owner !== '$owner') await expect(WorkItem.lockMany(ids, '$owner', { label: '$label' })).rejects.toBeInstanceOf(LockedError);
    expect(await WorkItem.isLocked(ids[2])).toBe(false);
    await WorkItem.unlockMany(docs);
    const handle = await WorkItem.acquireLocks(ids, owner, { label: owner, autoExtend: false });
    await handle.extend(7_000);
    await handle.release();
    expect((await WorkItem.lockStatus(ids)).every((s) => s === null)).toBe(true);
    expect(sent.length).toBeGreaterThan(0);
    for (const command of sent) for (const s of evaluatedStrings(command)) expect(ALLOWED_DOLLAR_STRINGS).toContain(s);
  });
});

test('the walker notices an unwrapped caller value (the check can fail)', () => {
  expect(evaluatedStrings({ findAndModify: 'x', update: [{ $set: { owner: '$_id' } }] })).toEqual(['$_id']);
  expect(evaluatedStrings({ find: 'x', filter: { $expr: { $eq: ['$owner', '$$ROOT'] } } })).toEqual(['$owner', '$$ROOT']);
  expect(evaluatedStrings({ findAndModify: 'x', update: [{ $set: { owner: { $literal: '$_id' } } }] })).toEqual([]);
});

const badExtensions: [string, unknown][] = [
  ['a $-prefixed string', '$fence'],
  ['a numeric string', '60000'],
  ['a negative ttl', -60_000],
  ['zero', 0],
  ['a fraction', 1.5],
  ['NaN', NaN],
  ['Infinity', Infinity],
  ['more than MAX_TTL_MS', MAX_TTL_MS + 1],
  ['null', null],
  ['an object', { $literal: 5 }],
];

describe('extending with bad values', () => {
  let WorkItem: WorkItemModel;
  beforeAll(async () => {
    WorkItem = await workItemModel(conn.connection, { ttl: 60_000 });
  });

  test.each(badExtensions)('LockHandle.extend(%s) throws InvalidLockOptionError, sends nothing, keeps the lock and the signal', async (_label, value) => {
    const { _id: id } = await WorkItem.create({ title: 'handle' });
    const handle = await WorkItem.acquireLock(id, 'worker', { autoExtend: false });
    const before = handle.expiresAt.getTime();
    conn.resetCommands();
    const error = await handle.extend(value as number).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidLockOptionError);
    expect((error as InvalidLockOptionError).option).toBe('ttl');
    expect(conn.commands).toEqual([]);
    expect(handle.signal.aborted).toBe(false);
    expect(handle.expiresAt.getTime()).toBe(before);
    const info = await WorkItem.getLock(id);
    expect(info!.expiresAt.getTime()).toBe(before);
    await expect(WorkItem.lock(id, 'someone-else')).rejects.toBeInstanceOf(LockedError);
    await handle.release();
  });

  test.each(badExtensions)('doc.extendLock(%s) throws InvalidLockOptionError and sends nothing', async (_label, value) => {
    const { _id: id } = await WorkItem.create({ title: 'doc' });
    const item = await WorkItem.lock(id, 'editor');
    const before = item.heldLock()!.expiresAt.getTime();
    conn.resetCommands();
    await expect(item.extendLock(value as number)).rejects.toBeInstanceOf(InvalidLockOptionError);
    expect(conn.commands).toEqual([]);
    expect((await WorkItem.getLock(id))!.expiresAt.getTime()).toBe(before);
    await item.unlock();
  });
});

// Issue 17: lockNext's commands carry the caller's filter (its query, by design) and nothing else
// of the caller's in an evaluated position.
describe.each(['hash', 'plain'] as const)('ownerStorage %s: lockNext evaluates no owner, label or ttl', (ownerStorage) => {
  let WorkItem: WorkItemModel;
  const aggregates: Document[] = [];
  beforeAll(async () => {
    WorkItem = await workItemModel(conn.connection, { ownerStorage, ttl: 5_000 });
    conn.connection.getClient().on('commandStarted', (event) => {
      if (event.commandName === 'aggregate' && event.command.aggregate === WorkItem.collection.collectionName) aggregates.push(event.command);
    });
  });

  test.each(dollarOwners)('owner and label %j: claims as a plain string, and appears in no candidate read', async (owner) => {
    const { _id: id } = await WorkItem.create({ title: `queued ${owner}` });
    sent.length = 0;
    aggregates.length = 0;
    const doc = await WorkItem.lockNext({ title: `queued ${owner}` }, owner, { label: owner, ttl: 4_000 });
    expect(String(doc!._id)).toBe(String(id));
    expect((await WorkItem.getLock(id))!.label).toBe(owner);
    // Another owner cannot claim it, whatever the holder's name would mean as an expression.
    expect(await WorkItem.lockNext({ title: `queued ${owner}` }, 'ordinary-owner')).toBeNull();
    expect(await WorkItem.releaseAllFor(owner)).toBe(1);
    expect(aggregates.length).toBeGreaterThan(0);
    for (const read of aggregates) {
      const pipeline = read.pipeline as Document[];
      // The filter is the caller's query; everything after it is the plugin's own.
      expect(pipeline[0]).toEqual({ $match: { title: `queued ${owner}` } });
      expect(evaluatedStrings({ update: pipeline.slice(1) }).filter((s) => !['$$NOW', '$expiresAt', '$reservedUntil'].includes(s))).toEqual([]);
    }
    for (const command of sent) for (const s of evaluatedStrings(command)) expect(ALLOWED_DOLLAR_STRINGS).toContain(s);
  });
});
