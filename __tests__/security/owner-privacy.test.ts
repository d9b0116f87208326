/**
 * Owners at rest and in errors (issue 5, PRODUCT.md): the lock collection never holds an owner
 * as given (SHA-256 by default, HMAC-SHA-256 with ownerSecret), and no error another owner
 * receives (message, stack, JSON.stringify, util.inspect) reveals the holder's identity or its
 * stored key.
 */
import { createHash, createHmac } from 'node:crypto';
import { inspect } from 'node:util';
import type { Types } from 'mongoose';
import { LockedError, LockNotHeldError, LockError, runWithLockOwner } from '../../src';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const HOLDER = 'sess:alice-7f3a9c1e-confidential';
const OTHER = 'sess:bob-20b4d8e6-confidential';
const SECRET = 'an-hmac-secret-of-32-bytes-long!';

const db = testDatabase('privacy');
let conn: MonitoredConnection;

beforeAll(async () => {
  conn = await connect(db.name);
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

const sha256 = (owner: string) => createHash('sha256').update(owner, 'utf8').digest('base64url');
const hmac = (owner: string) => createHmac('sha256', SECRET).update(owner, 'utf8').digest('base64url');

async function rawLockRecords(model: WorkItemModel): Promise<Record<string, unknown>[]> {
  return conn.connection.getClient().db(db.name).collection(model.lockModel().collection.collectionName).find().toArray();
}

describe('owners at rest', () => {
  test.each<[string, object, (owner: string) => string]>([
    ['by default: SHA-256', {}, sha256],
    ['with ownerSecret: HMAC-SHA-256', { ownerSecret: SECRET }, hmac],
  ])('%s; the owner itself appears nowhere in the lock collection', async (_label, options, key) => {
    const WorkItem = await workItemModel(conn.connection, { ttl: 10_000, ...options });
    const { _id: id } = await WorkItem.create({ title: 'private' });
    const doc = await WorkItem.lock(id, HOLDER);
    const records = await rawLockRecords(WorkItem);
    expect(records).toHaveLength(1);
    expect(records[0].owner).toBe(key(HOLDER));
    expect(JSON.stringify(records)).not.toContain('alice');
    // Released records forget the owner altogether.
    await doc.unlock();
    const [released] = await rawLockRecords(WorkItem);
    expect(released.owner).toBeNull();
    expect(released.token).toBeNull();
  });

  test('the HMAC key differs from the plain hash, so a guessed owner cannot be confirmed without the secret', () => {
    expect(hmac(HOLDER)).not.toBe(sha256(HOLDER));
  });

  test("control: with ownerStorage 'plain' the same read does find the owner (the check above can fail)", async () => {
    const WorkItem = await workItemModel(conn.connection, { ttl: 10_000, ownerStorage: 'plain' });
    const { _id: id } = await WorkItem.create({ title: 'plain' });
    const doc = await WorkItem.lock(id, HOLDER);
    expect((await rawLockRecords(WorkItem))[0].owner).toBe(HOLDER);
    await doc.unlock();
  });
});

describe("no error reveals another owner's identity", () => {
  let WorkItem: WorkItemModel;
  let id: Types.ObjectId;
  const errors: [string, unknown][] = [];

  beforeAll(async () => {
    WorkItem = await workItemModel(conn.connection, { ttl: 10_000 });
    id = (await WorkItem.create({ title: 'contended' }))._id;
    await WorkItem.lock(id, HOLDER);
    const capture = async (label: string, call: () => Promise<unknown>) => {
      try {
        await call();
        errors.push([label, undefined]);
      } catch (error) {
        errors.push([label, error]);
      }
    };
    await capture('Model.lock', () => WorkItem.lock(id, OTHER));
    await capture('Model.lock with wait', () => WorkItem.lock(id, OTHER, { wait: 50 }));
    await capture('Model.acquireLock', () => WorkItem.acquireLock(id, OTHER));
    await capture('Model.withLock', () => WorkItem.withLock(id, OTHER, async () => undefined));
    await capture('doc.save by a non-holder', async () => {
      const doc = (await WorkItem.findById(id))!;
      doc.title = 'overwrite';
      await runWithLockOwner(OTHER, () => doc.save());
    });
    await capture('updateOne with lockOwner', () => WorkItem.updateOne({ _id: id }, { $set: { title: 'x' } }).setOptions({ lockOwner: OTHER }).exec());
    await capture('deleteOne in the owner context', () => runWithLockOwner(OTHER, () => WorkItem.deleteOne({ _id: id }).exec()));
    await capture('Model.bulkWrite', () => WorkItem.bulkWrite([{ deleteOne: { filter: { _id: id } } }], { lockOwner: OTHER } as never));

    // The other way round: the holder's lock is taken over after it expired; the holder's errors must not name the new owner.
    const { _id: second } = await WorkItem.create({ title: 'taken over' });
    const stale = await WorkItem.lock(second, HOLDER, { ttl: 300 });
    await sleep(350);
    const taker = await WorkItem.lock(second, OTHER);
    await capture('doc.save after a takeover', () => {
      stale.title = 'stale';
      return stale.save();
    });
    await capture('doc.extendLock after a takeover', () => stale.extendLock());
    await capture('doc.unlock after a takeover', () => stale.unlock());
    await taker.unlock();
  }, 30_000);

  test('every refused call failed with the expected typed error', () => {
    const summary = errors.map(([label, error]) => [label, (error as Error | undefined)?.constructor.name]);
    expect(summary).toEqual([
      ['Model.lock', 'LockedError'],
      ['Model.lock with wait', 'LockedError'],
      ['Model.acquireLock', 'LockedError'],
      ['Model.withLock', 'LockedError'],
      ['doc.save by a non-holder', 'LockedError'],
      ['updateOne with lockOwner', 'LockedError'],
      ['deleteOne in the owner context', 'LockedError'],
      ['Model.bulkWrite', 'LockedError'],
      ['doc.save after a takeover', 'LockNotHeldError'],
      ['doc.extendLock after a takeover', 'LockNotHeldError'],
      ['doc.unlock after a takeover', 'LockNotHeldError'],
    ]);
    for (const [, error] of errors) expect(error).toBeInstanceOf(LockError);
    expect(errors.filter(([, e]) => e instanceof LockedError)).toHaveLength(8);
    expect(errors.filter(([, e]) => e instanceof LockNotHeldError)).toHaveLength(3);
  });

  test('no message, stack, JSON or inspection of those errors contains an owner or its stored key', () => {
    const secrets = [HOLDER, OTHER, 'alice', 'bob', sha256(HOLDER), sha256(OTHER)];
    for (const [label, error] of errors) {
      const renderings = [String(error), (error as Error).message, (error as Error).stack ?? '', JSON.stringify(error), inspect(error, { depth: 5, showHidden: true })];
      for (const text of renderings) {
        for (const secret of secrets) {
          if (text.includes(secret)) throw new Error(`${label}: an error rendering contains ${JSON.stringify(secret)}: ${text.slice(0, 300)}`);
        }
      }
    }
  });

  test('getLock and isLocked tell whether and until when, never who', async () => {
    const info = await WorkItem.getLock(id);
    expect(Object.keys(info!).sort()).toEqual(['acquiredAt', 'documentId', 'expiresAt', 'label', 'remainingMs']);
    const text = JSON.stringify(info) + inspect(info, { showHidden: true });
    expect(text).not.toContain('alice');
    expect(text).not.toContain(sha256(HOLDER));
  });
});
