/**
 * Attack: PRODUCT.md property 1 (mutual exclusion between owners) and property 8 (only the
 * holder releases).
 *
 * `validateOwner` accepts any string of 1..512 UTF-16 code units, including lone surrogates
 * (labels are checked for them, owners are not). The owner key is SHA-256 of the owner encoded as
 * UTF-8, and Node encodes every lone surrogate as U+FFFD; with `ownerStorage: 'plain'` the BSON
 * serializer does the same. So 'user-\uD800', 'user-\uDBFF' and 'user-\uDFFF' are three distinct
 * owners to the caller and one owner to the lock collection: the second takes the first's lock as
 * a "renewal", and the third's Model.unlock releases it.
 * Expected: either such owners are refused before anything is sent (InvalidLockArgumentError, as
 * labels are), or they stay distinct.
 */
import { InvalidLockArgumentError } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('atk_surrogates');
let conn: MonitoredConnection;
let Hashed: WorkItemModel;
let Plain: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  Hashed = await workItemModel(conn.connection, { ttl: 10_000 });
  Plain = await workItemModel(conn.connection, { ttl: 10_000, ownerStorage: 'plain' });
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

describe.each([
  ["ownerStorage: 'hash'", () => Hashed],
  ["ownerStorage: 'plain'", () => Plain],
])('%s', (_mode, model) => {
  test('two owners that differ only in a lone surrogate never both hold the lock', async () => {
    const M = model();
    const { _id: id } = await M.create({ title: 'x' });
    const first = await M.lock(id, 'user-\uD800').catch((e: unknown) => e);
    if (first instanceof InvalidLockArgumentError) return; // refused as malformed: fine
    const second = await M.lock(id, 'user-\uDBFF').then(
      () => 'granted to the second owner',
      (e: unknown) => (e as Error).name,
    );
    expect(second).toBe('LockedError');
  });

  test('a third such owner cannot release the holder\'s lock with Model.unlock', async () => {
    const M = model();
    const { _id: id } = await M.create({ title: 'y' });
    const held = await M.lock(id, 'user-\uD800').catch((e: unknown) => e);
    if (held instanceof InvalidLockArgumentError) return;
    const released = await M.unlock(id, 'user-\uDFFF').catch((e: unknown) => e);
    if (released instanceof InvalidLockArgumentError) return;
    expect(released).toBe(false);
    expect(await M.isLocked(id)).toBe(true);
  });
});
