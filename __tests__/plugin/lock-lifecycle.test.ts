/** lock / unlock / releaseAllFor / isLocked / getLock / forceUnlock, and the sibling collection. */
import { createHash, createHmac } from 'node:crypto';
import { Types } from 'mongoose';
import { LockError, LockExpiredError, LockNotHeldError, LockTargetNotFoundError, LockedError } from '../../src';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';
import { staleLock } from '../support/stale-lock';

const db = testDatabase('lifecycle');
let conn: MonitoredConnection;
let WorkItem: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  WorkItem = await workItemModel(conn.connection, { ttl: 5_000 }, 'WorkItem');
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

const newItem = async (title = 'item') => (await WorkItem.create({ title }))._id;

describe('Model.lock', () => {
  test('returns the document, loaded after the lock, carrying its lock', async () => {
    const id = await newItem('first');
    const item = await WorkItem.lock(id, 'session-a');
    expect(item.title).toBe('first');
    expect(item._id.equals(id)).toBe(true);
    const held = item.heldLock();
    expect(held).not.toBeNull();
    expect(held!.owner).toBe('session-a');
    expect(held!.ttl).toBe(5_000);
    expect(typeof held!.token).toBe('string');
    expect(held!.token.length).toBeGreaterThanOrEqual(16);
    expect(held!.expiresAt.getTime() - held!.acquiredAt.getTime()).toBe(5_000);
    await item.unlock();
  });

  test('refuses a second owner with LockedError carrying the expiry but not the holder', async () => {
    const id = await newItem();
    const item = await WorkItem.lock(id, 'holder-secret-session');
    const error = await WorkItem.lock(id, 'session-b').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockedError);
    expect(error).toBeInstanceOf(LockError);
    const locked = error as LockedError;
    expect(locked.code).toBe('LOCKED');
    expect(locked.expiresAt?.getTime()).toBe(item.heldLock()!.expiresAt.getTime());
    expect(locked.message).not.toContain('holder-secret-session');
    expect(JSON.stringify(locked)).not.toContain('holder-secret-session');
    await item.unlock();
  });

  test('the same owner renews: a new token and a later expiry; the older instance can no longer use it', async () => {
    const id = await newItem();
    const first = await WorkItem.lock(id, 'session-a');
    await sleep(20);
    const second = await WorkItem.lock(id, 'session-a');
    expect(second.heldLock()!.token).not.toBe(first.heldLock()!.token);
    expect(second.heldLock()!.expiresAt.getTime()).toBeGreaterThan(first.heldLock()!.expiresAt.getTime());
    const error = await first.unlock().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockNotHeldError);
    expect((error as LockNotHeldError).reason).toBe('taken_over');
    expect(await WorkItem.isLocked(id)).toBe(true);
    await second.unlock();
    expect(await WorkItem.isLocked(id)).toBe(false);
  });

  test('a missing document: the lock is released again and LockTargetNotFoundError is thrown', async () => {
    const id = new Types.ObjectId();
    const error = await WorkItem.lock(id, 'session-a').catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockTargetNotFoundError);
    expect((error as LockTargetNotFoundError).code).toBe('DOCUMENT_NOT_FOUND');
    expect(await WorkItem.isLocked(id)).toBe(false);
    const record = await WorkItem.lockModel().collection.findOne({ _id: id });
    expect(record === null || record.token === null).toBe(true); // released (the record may keep its fence)
  });

  test('accepts the id as a hex string and casts it to the schema type', async () => {
    const id = await newItem();
    const item = await WorkItem.lock(id.toHexString(), 'session-a');
    expect(item.heldLock()!.documentId).toBeInstanceOf(Types.ObjectId);
    expect(await WorkItem.isLocked(id)).toBe(true);
    await item.unlock();
  });
});

describe('unlock', () => {
  test('releases, and a second unlock is reported, never silently accepted', async () => {
    const id = await newItem();
    const item = await WorkItem.lock(id, 'session-a');
    await item.unlock();
    expect(await WorkItem.isLocked(id)).toBe(false);
    expect(item.heldLock()).toBeNull();
    const error = await item.unlock().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockNotHeldError);
    expect((error as LockNotHeldError).reason).toBe('released');
    expect((error as LockNotHeldError).code).toBe('LOCK_NOT_HELD');
  });

  test('an unlock after another owner took over does not release the new holder', async () => {
    const id = await newItem();
    const stale = await staleLock(WorkItem, id, 'session-a');
    const fresh = await WorkItem.lock(id, 'session-b');
    const error = await stale.unlock().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockNotHeldError);
    expect(error).not.toBeInstanceOf(LockExpiredError);
    expect((error as LockNotHeldError).reason).toBe('taken_over');
    expect(await WorkItem.isLocked(id)).toBe(true);
    await fresh.unlock();
  });

  test('an unlock after expiry says it expired', async () => {
    const id = await newItem();
    const item = await staleLock(WorkItem, id, 'session-a', 100);
    const expiresAt = item.heldLock()!.expiresAt;
    const error = await item.unlock().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockExpiredError);
    expect((error as LockExpiredError).code).toBe('LOCK_EXPIRED');
    expect((error as LockExpiredError).reason).toBe('expired');
    expect((error as LockExpiredError).expiredAt?.getTime()).toBe(expiresAt.getTime());
    expect(item.heldLock()).toBeNull();
  });

  test('a document that never carried a lock cannot be unlocked', async () => {
    const id = await newItem();
    const plain = await WorkItem.findById(id).orFail();
    const error = await plain.unlock().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockNotHeldError);
    expect((error as LockNotHeldError).reason).toBe('not_locked');
  });
});

describe('releaseAllFor, isLocked, getLock, forceUnlock', () => {
  test('releaseAllFor releases exactly the owner\'s live locks and returns the count', async () => {
    const mine = await Promise.all([newItem(), newItem(), newItem()]);
    const theirs = await newItem();
    for (const id of mine) await WorkItem.lock(id, 'logout-session');
    const other = await WorkItem.lock(theirs, 'other-session');
    conn.resetCommands();
    expect(await WorkItem.releaseAllFor('logout-session')).toBe(3);
    expect(conn.commands).toEqual(['update']);
    for (const id of mine) expect(await WorkItem.isLocked(id)).toBe(false);
    expect(await WorkItem.isLocked(theirs)).toBe(true);
    expect(await WorkItem.releaseAllFor('logout-session')).toBe(0);
    await other.unlock();
  });

  test('getLock describes the lock without revealing its owner or token', async () => {
    const id = await newItem();
    expect(await WorkItem.getLock(id)).toBeNull();
    const item = await WorkItem.lock(id, 'session-a');
    const info = await WorkItem.getLock(id);
    expect(info).not.toBeNull();
    expect(Object.keys(info!).sort()).toEqual(['acquiredAt', 'documentId', 'expiresAt', 'label', 'remainingMs']);
    expect(info!.remainingMs).toBeGreaterThan(0);
    expect(info!.remainingMs).toBeLessThanOrEqual(5_000);
    expect(info!.expiresAt.getTime()).toBe(item.heldLock()!.expiresAt.getTime());
    await item.unlock();
  });

  test('forceUnlock releases whoever holds the lock; the holder then learns it was released', async () => {
    const id = await newItem();
    const item = await WorkItem.lock(id, 'session-a');
    expect(await WorkItem.forceUnlock(id)).toBe(true);
    expect(await WorkItem.forceUnlock(id)).toBe(false);
    const error = await item.unlock().catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockNotHeldError);
    expect((error as LockNotHeldError).reason).toBe('released');
  });
});

describe('the sibling lock collection', () => {
  test('is named after the model collection and has the TTL and owner indexes', async () => {
    const lockModel = WorkItem.lockModel();
    expect(lockModel.collection.collectionName).toBe(`${WorkItem.collection.collectionName}.locks`);
    const indexes = await lockModel.collection.listIndexes().toArray();
    const ttl = indexes.find((index) => index.key.expiresAt === 1);
    expect(ttl?.expireAfterSeconds).toBe(86_400); // purgeAfter's default, one day
    expect(indexes.some((index) => index.key.owner === 1)).toBe(true);
  });

  test('a custom collection name is honoured', async () => {
    const Custom = await workItemModel(conn.connection, { collection: 'custom_locks' });
    expect(Custom.lockModel().collection.collectionName).toBe('custom_locks');
    const id = (await Custom.create({ title: 'c' }))._id;
    const item = await Custom.lock(id, 'session-a');
    expect(await conn.connection.getClient().db(db.name).collection('custom_locks').countDocuments({ _id: id })).toBe(1);
    await item.unlock();
  });

  test('owners are stored as SHA-256 by default, HMAC with a secret, plain only on request', async () => {
    const raw = conn.connection.getClient().db(db.name);
    const owner = 'sess:4711-very-secret';

    const id = await newItem();
    const item = await WorkItem.lock(id, owner);
    const record = await raw.collection(WorkItem.lockModel().collection.collectionName).findOne({ _id: id });
    expect(record!.owner).toBe(createHash('sha256').update(owner).digest('base64url'));
    expect(JSON.stringify(record)).not.toContain(owner);
    await item.unlock();

    const secret = 'a-secret-of-at-least-16-bytes';
    const Hmac = await workItemModel(conn.connection, { ownerSecret: secret });
    const hid = (await Hmac.create({ title: 'h' }))._id;
    const hitem = await Hmac.lock(hid, owner);
    const hrecord = await raw.collection(Hmac.lockModel().collection.collectionName).findOne({ _id: hid });
    expect(hrecord!.owner).toBe(createHmac('sha256', secret).update(owner).digest('base64url'));
    await hitem.unlock();

    const Plain = await workItemModel(conn.connection, { ownerStorage: 'plain' });
    const pid = (await Plain.create({ title: 'p' }))._id;
    const pitem = await Plain.lock(pid, owner);
    const precord = await raw.collection(Plain.lockModel().collection.collectionName).findOne({ _id: pid });
    expect(precord!.owner).toBe(owner);
    expect(await Plain.releaseAllFor(owner)).toBe(1);
    expect(pitem.heldLock()).not.toBeNull(); // the instance does not know yet; its next use reports 'released'
  });

  test('the lock itself is one command, loading the document one, unlocking one', async () => {
    const id = await newItem();
    conn.resetCommands();
    const item = await WorkItem.lock(id, 'session-a');
    expect(conn.commands).toEqual(['findAndModify', 'find']);
    conn.resetCommands();
    await item.unlock();
    expect(conn.commands).toEqual(['update']);
  });

  test('a refused lock is one command (the refusal and its expiry come from the same reply), releaseAllFor one', async () => {
    const id = await newItem();
    const other = await newItem();
    const holder = await WorkItem.lock(id, 'counted-holder');
    await WorkItem.lock(other, 'counted-holder');
    conn.resetCommands();
    const refused = await WorkItem.lock(id, 'counted-contender').catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(LockedError);
    expect((refused as LockedError).expiresAt?.getTime()).toBe(holder.heldLock()!.expiresAt.getTime());
    expect(conn.commands).toEqual(['findAndModify']);
    conn.resetCommands();
    expect(await WorkItem.releaseAllFor('counted-holder')).toBe(2);
    expect(conn.commands).toEqual(['update']);
  });
});
