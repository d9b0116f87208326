/**
 * Attack: changing the `purgeAfter` option on a deployment that already has a lock collection.
 *
 * The TTL index is declared with a fixed name (`expiresAt_ttl`) and
 * `expireAfterSeconds: ceil(purgeAfter / 1000)`. When the next deploy runs with another
 * `purgeAfter`, Mongoose's `init()` sends createIndexes with the same name and other options;
 * mongod refuses it (IndexOptionsConflict, 85: "An equivalent index already exists with the same
 * name but different options", `_doesSpecConflictWithExisting` in
 * src/mongo/db/catalog/index_catalog_impl.cpp; the emulator answers the same). Every plugin call awaits that `init()`
 * (`runtime.ready`) and Mongoose caches its rejection, so from then on every `Model.lock`,
 * `unlock`, `getLock`, ... of that process fails with a non-retryable LockDatabaseError: a change
 * of a storage-reclaiming option takes the whole locking feature down, and only a restart after
 * someone drops the index brings it back. (Without the plugin, Mongoose reports an index error and
 * queries keep working.) README's option table says nothing about it.
 * Expected: locking keeps working (the old TTL stays or is updated with collMod, and a warning
 * says so). With collMod (manual, collMod, "Change Expiration Value for Indexes";
 * src/mongo/db/catalog/coll_mod.cpp) the TTL index then really carries the new expireAfterSeconds,
 * as listIndexes shows.
 */
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('atk_purgeafter');
let before: MonitoredConnection;
let after: MonitoredConnection;

beforeAll(async () => {
  before = await connect(db.name);
  after = await connect(db.name); // the next deploy's process
});

afterAll(async () => {
  await db.drop(before.connection);
  await before.close();
  await after.close();
});

test('after a deploy that changes purgeAfter, Model.lock still works', async () => {
  const Old = await workItemModel(before.connection, { ttl: 10_000 }, 'PurgeAfterItem');
  const { _id: id } = await Old.create({ title: 'x' });
  await (await Old.lock(id, 'alice')).unlock();

  // The next deploy: same model, same collections, purgeAfter one hour instead of one day.
  let New: WorkItemModel;
  try {
    New = await workItemModel(after.connection, { ttl: 10_000, purgeAfter: 3_600_000 }, 'PurgeAfterItem');
  } catch {
    New = after.connection.models.PurgeAfterItem as WorkItemModel; // init() rejected; the model exists
  }
  const outcome = await New.lock(id, 'bob').then(
    () => 'locked',
    (error: unknown) => `${(error as Error).name}: ${(error as Error).message}`.slice(0, 120),
  );
  expect(outcome).toBe('locked');

  // The TTL index now has the new expiry (3600 s), not the old one (86400 s).
  const db = after.connection.db!;
  const ttl: Array<{ coll: string; expireAfterSeconds: unknown }> = [];
  for (const { name } of await db.listCollections({}, { nameOnly: true }).toArray()) {
    for (const spec of await db.collection(name).listIndexes().toArray()) {
      if (spec.name === 'expiresAt_ttl') ttl.push({ coll: name, expireAfterSeconds: spec.expireAfterSeconds });
    }
  }
  expect(ttl).toEqual([{ coll: expect.any(String), expireAfterSeconds: 3600 }]);
});
