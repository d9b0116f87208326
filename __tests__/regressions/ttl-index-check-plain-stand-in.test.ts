/**
 * The periodic index check (issue 16 item 8, lock-collection-setup.ts `check()`) must notice that
 * the lock collection has no TTL index any more, also when a plain `{ expiresAt: 1 }` index stands
 * where the TTL index was (dropped by hand, then `{ expiresAt: 1 }` created again by hand without
 * `expireAfterSeconds`, e.g. for an admin query).
 *
 * check() asks planIndexes only for indexes to CREATE, and planIndexes counts any index with the
 * key `{ expiresAt: 1 }` as serving the TTL index (it puts the expiry difference in `retime`,
 * which check() ignores). So nothing is created (on mongod it could not be: the same key under
 * another name is IndexOptionsConflict, 85, IndexCatalogImpl::_doesSpecConflictWithExisting), no
 * collMod is sent and no warning is emitted: released records are never purged again, silently.
 * The first attempt and the retries do retime such an index (resolveConflicts); the check must at
 * least say so, or do the same.
 */
import type { Connection } from 'mongoose';
import { LOCK_SETUP_WARNING_CODE, setupTiming } from '../../src/lock-collection-setup';
import { connect, operatorConnection, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel } from '../support/work-item';

const db = testDatabase('ttlstandin');
let conn: MonitoredConnection;
let operator: Connection;
const warnings: string[] = [];
const defaults = { ...setupTiming };

beforeAll(async () => {
  conn = await connect(db.name);
  operator = await operatorConnection(db.name);
  jest.spyOn(process, 'emitWarning').mockImplementation(((message: string, options?: { code?: string }) => {
    if (options?.code === LOCK_SETUP_WARNING_CODE) warnings.push(message);
  }) as typeof process.emitWarning);
});

afterAll(async () => {
  jest.restoreAllMocks();
  Object.assign(setupTiming, defaults);
  await operator.dropDatabase();
  await operator.close();
  await conn.close();
});

test('a plain { expiresAt: 1 } in place of the dropped TTL index is made a TTL index again, or a warning says it is not one', async () => {
  const M = await workItemModel(conn.connection, { ttl: 10_000 });
  const { _id: id } = await M.create({ title: 'x' });
  await (await M.lock(id, 'alice')).unlock();
  const locks = operator.db!.collection(M.lockModel().collection.collectionName);
  await locks.dropIndex('expiresAt_ttl');
  await locks.createIndex({ expiresAt: 1 }, { name: 'expiresAt_1' });
  warnings.length = 0;
  setupTiming.recheckMs = 100;

  const purgeAfterSeconds = 86_400;
  const deadline = Date.now() + 10_000;
  let ttl: unknown;
  while (Date.now() < deadline) {
    await (await M.lock(id, 'alice')).unlock(); // the check runs in the background of lock calls
    await sleep(150);
    ttl = (await locks.listIndexes().toArray()).find((index) => index.name === 'expiresAt_1')?.expireAfterSeconds;
    if (ttl !== undefined || warnings.length > 0) break;
  }
  const retimed = ttl !== undefined && Number(ttl) === purgeAfterSeconds;
  const warned = warnings.some((w) => /expiresAt_1/.test(w));
  expect({ retimed, warned }).not.toEqual({ retimed: false, warned: false });
}, 30_000);
