/**
 * Unique indexes: the shape of duplicate-key errors on every write path, the concurrent-upsert
 * race (which filters the server retries itself and which reach the client as E11000), and how
 * an upsert seeds the inserted document from the filter.
 *
 * Sources ((*): location or wording recalled, not re-read for this audit):
 *  - errmsg "E11000 duplicate key error collection: <ns> index: <name> dup key: { <field>: <value> }":
 *    buildDupKeyErrorStatus, src/mongo/db/storage/index_entry_comparison.cpp; keyPattern/keyValue are
 *    the extra info of DuplicateKeyErrorInfo (same file); a missing field is indexed as null (manual,
 *    "Unique Indexes", Missing Document Field in a Unique Single-Field Index) (*).
 *  - Ordered/unordered insertMany: CRUD spec (mongodb/specifications source/crud/crud.md, "ordered"):
 *    an ordered bulk stops at the first error, an unordered one attempts every write.
 *  - ImmutableField 66 for a changed _id: error_codes.yml (ImmutableField: 66);
 *    src/mongo/db/update/update_driver.cpp checks _id immutability after applying an update (*).
 *  - Concurrent upserts: shouldRetryDuplicateKeyException in
 *    src/mongo/db/query/write_ops/write_ops_exec.cpp (server retries only an equality-only filter on
 *    the violated unique index's fields; SERVER-47212 for findAndModify), see
 *    shared/MONGOD-SEMANTICS.md "Upserts and unique indexes".
 *  - Upsert seeding: UpdateDriver::populateDocumentWithQueryFields (update_driver.cpp) (*) extracts the
 *    equality conditions of the filter (including those of $and) into the new document.
 */
import { ObjectId, type Collection, type Db, type MongoClient, MongoBulkWriteError, MongoServerError } from 'mongodb';
import mongoose from 'mongoose';
import { expectServerError, openClient, settle, testUri, uniqueDbName, type Loose } from './support/server';

const dbName = uniqueDbName('conf_dupkeys');
let client: MongoClient;
let db: Db;

beforeAll(async () => {
  client = await openClient({ maxPoolSize: 30 });
  db = client.db(dbName);
});

afterAll(async () => {
  await db.dropDatabase();
  await client.close();
});

async function freshCollection(name: string): Promise<Collection<Loose>> {
  await db.collection(name).drop().catch(() => undefined);
  return db.createCollection<Loose>(name);
}

function firstWriteError(error: MongoBulkWriteError): { index: number; code: number } {
  const list = Array.isArray(error.writeErrors) ? error.writeErrors : [error.writeErrors];
  return list[0];
}

function writeErrorCount(error: MongoBulkWriteError): number {
  return Array.isArray(error.writeErrors) ? error.writeErrors.length : 1;
}

describe('duplicate key errors', () => {
  test('insert with an existing _id: code 11000, keyPattern, keyValue, errmsg naming collection and index', async () => {
    const coll = await freshCollection('dup_id');
    await coll.insertOne({ _id: 'a', v: 1 });
    const error = await expectServerError(coll.insertOne({ _id: 'a', v: 2 }), 11000);
    expect(error.keyPattern).toEqual({ _id: 1 });
    expect(error.keyValue).toEqual({ _id: 'a' });
    expect(error.message).toContain('E11000 duplicate key error');
    expect(error.message).toContain(`collection: ${dbName}.dup_id`);
    expect(error.message).toContain('index: _id_');
    expect(error.message).toContain('dup key: { _id: "a" }');
    expect(await coll.find().toArray()).toEqual([{ _id: 'a', v: 1 }]);
  });

  test('user unique index: insert and update violating it report the index name and the key', async () => {
    const coll = await freshCollection('dup_user');
    const name = await coll.createIndex({ email: 1 }, { unique: true, name: 'email_unique' });
    expect(name).toBe('email_unique');
    await coll.insertMany([
      { _id: 1, email: 'a@x.io' },
      { _id: 2, email: 'b@x.io' },
    ]);

    const onInsert = await expectServerError(coll.insertOne({ _id: 3, email: 'a@x.io' }), 11000);
    expect(onInsert.keyPattern).toEqual({ email: 1 });
    expect(onInsert.keyValue).toEqual({ email: 'a@x.io' });
    expect(onInsert.message).toContain('E11000 duplicate key error');
    expect(onInsert.message).toContain(`collection: ${dbName}.dup_user`);
    expect(onInsert.message).toContain('index: email_unique');
    expect(onInsert.message).toContain('dup key: { email: "a@x.io" }');

    const onUpdate = await expectServerError(coll.updateOne({ _id: 2 }, { $set: { email: 'a@x.io' } }), 11000);
    expect(onUpdate.keyPattern).toEqual({ email: 1 });
    expect(onUpdate.keyValue).toEqual({ email: 'a@x.io' });
    expect(onUpdate.message).toContain('index: email_unique');

    const onUpsert = await expectServerError(
      coll.updateOne({ _id: 9 }, { $set: { email: 'b@x.io' } }, { upsert: true }),
      11000,
    );
    expect(onUpsert.keyValue).toEqual({ email: 'b@x.io' });

    const onReplace = await expectServerError(coll.replaceOne({ _id: 1 }, { email: 'b@x.io' }), 11000);
    expect(onReplace.keyValue).toEqual({ email: 'b@x.io' });

    // Nothing was written by the failed operations.
    expect(await coll.find().sort({ _id: 1 }).toArray()).toEqual([
      { _id: 1, email: 'a@x.io' },
      { _id: 2, email: 'b@x.io' },
    ]);
  });

  test('compound unique index reports every key field; a missing field indexes as null', async () => {
    const coll = await freshCollection('dup_compound');
    await coll.createIndex({ tenant: 1, code: 1 }, { unique: true });
    await coll.insertOne({ tenant: 't1', code: 'c1' });
    await coll.insertOne({ tenant: 't2', code: 'c1' });
    const error = await expectServerError(coll.insertOne({ tenant: 't1', code: 'c1' }), 11000);
    expect(error.keyPattern).toEqual({ tenant: 1, code: 1 });
    expect(error.keyValue).toEqual({ tenant: 't1', code: 'c1' });
    expect(error.message).toContain('index: tenant_1_code_1');

    const single = await freshCollection('dup_missing');
    await single.createIndex({ email: 1 }, { unique: true });
    await single.insertOne({ name: 'no email' });
    const missing = await expectServerError(single.insertOne({ name: 'no email either' }), 11000);
    expect(missing.keyValue).toEqual({ email: null });
    expect(await single.countDocuments()).toBe(1);
  });

  test('findAndModify upsert violating a unique index fails the command with DuplicateKey', async () => {
    const coll = await freshCollection('dup_fam');
    await coll.createIndex({ slot: 1 }, { unique: true });
    await coll.insertOne({ _id: 'taken', slot: 7 });
    const error = await expectServerError(
      coll.findOneAndUpdate({ _id: 'other' }, { $set: { slot: 7 } }, { upsert: true }),
      11000,
    );
    expect(error.codeName).toBe('DuplicateKey');
    expect(error.keyPattern).toEqual({ slot: 1 });
    expect(error.keyValue).toEqual({ slot: 7 });
    expect(error.message).toContain('E11000 duplicate key error');
    expect(error.message).toContain(`collection: ${dbName}.dup_fam`);
    expect(await coll.countDocuments()).toBe(1);
  });

  test('insertMany: ordered stops at the first duplicate, unordered inserts the rest', async () => {
    const ordered = await freshCollection('dup_ordered');
    const docs = [1, 2, 1, 3].map((n) => ({ _id: n }));
    const orderedResult = await settle(ordered.insertMany(docs, { ordered: true }));
    expect(orderedResult.ok).toBe(false);
    const orderedError = (orderedResult as { error: unknown }).error;
    expect(orderedError).toBeInstanceOf(MongoBulkWriteError);
    const bulk = orderedError as MongoBulkWriteError;
    expect(bulk.code).toBe(11000);
    expect(writeErrorCount(bulk)).toBe(1);
    expect(firstWriteError(bulk).index).toBe(2);
    expect(firstWriteError(bulk).code).toBe(11000);
    expect(bulk.insertedCount).toBe(2);
    expect((await ordered.find().sort({ _id: 1 }).toArray()).map((d) => d._id)).toEqual([1, 2]);

    const unordered = await freshCollection('dup_unordered');
    const unorderedResult = await settle(unordered.insertMany(docs, { ordered: false }));
    expect(unorderedResult.ok).toBe(false);
    const unorderedError = (unorderedResult as { error: unknown }).error as MongoBulkWriteError;
    expect(writeErrorCount(unorderedError)).toBe(1);
    expect(firstWriteError(unorderedError).index).toBe(2);
    expect(unorderedError.insertedCount).toBe(3);
    expect((await unordered.find().sort({ _id: 1 }).toArray()).map((d) => d._id)).toEqual([1, 2, 3]);
  });

  test('creating a unique index over existing duplicates fails with 11000 and creates nothing', async () => {
    const coll = await freshCollection('dup_build');
    await coll.insertMany([{ k: 1 }, { k: 1 }]);
    const error = await expectServerError(coll.createIndex({ k: 1 }, { unique: true }), 11000);
    expect(error.message).toContain('E11000');
    const names = (await coll.listIndexes().toArray()).map((ix) => ix.name as string);
    expect(names).toEqual(['_id_']);
  });

  test('changing _id in an update is refused with ImmutableField (66)', async () => {
    const coll = await freshCollection('dup_immutable');
    await coll.insertOne({ _id: 'x' });
    const error = await expectServerError(coll.updateOne({ _id: 'x' }, { $set: { _id: 'y' } }), 66);
    expect(error.message).toContain("_id");
    expect(await coll.find().toArray()).toEqual([{ _id: 'x' }]);
  });

  test('Mongoose surfaces a duplicate key as MongoServerError 11000 with keyValue', async () => {
    const connection = await mongoose.createConnection(testUri(), { dbName }).asPromise();
    try {
      const User = connection.model('ConfDupUser', new mongoose.Schema({ email: { type: String, unique: true } }), 'dup_mongoose');
      await User.init();
      await User.create({ email: 'm@x.io' });
      const outcome = await settle(User.create({ email: 'm@x.io' }));
      expect(outcome.ok).toBe(false);
      const error = (outcome as { error: unknown }).error;
      expect(error).toBeInstanceOf(MongoServerError);
      const serverError = error as MongoServerError;
      expect(serverError.name).toBe('MongoServerError');
      expect(serverError.code).toBe(11000);
      expect(serverError.keyValue).toEqual({ email: 'm@x.io' });
      expect(serverError.keyPattern).toEqual({ email: 1 });
      expect(serverError.message).toContain('index: email_1');
      expect(await User.countDocuments()).toBe(1);
    } finally {
      await connection.close();
    }
  });
});

describe('concurrent upserts on one _id', () => {
  const N = 12;

  function rejectionCodes(results: PromiseSettledResult<unknown>[]): unknown[] {
    return results
      .filter((r): r is PromiseRejectedResult => r.status === 'rejected')
      .map((r) => (r.reason instanceof MongoServerError ? r.reason.code : `not a server error: ${String(r.reason)}`));
  }

  test('filter with another condition against an existing doc held by another owner: every upsert gets E11000', async () => {
    const coll = await freshCollection('race_owned');
    await coll.insertOne({ _id: 'k', owner: 'y' });
    const viaUpdate = await Promise.allSettled(
      Array.from({ length: N }, () =>
        coll.updateOne({ _id: 'k', owner: 'x' }, { $set: { owner: 'x' } }, { upsert: true }),
      ),
    );
    const viaFam = await Promise.allSettled(
      Array.from({ length: N }, () =>
        coll.findOneAndUpdate({ _id: 'k', owner: 'x' }, { $set: { owner: 'x' } }, { upsert: true, returnDocument: 'after' }),
      ),
    );
    expect(rejectionCodes(viaUpdate)).toEqual(Array(N).fill(11000));
    expect(rejectionCodes(viaFam)).toEqual(Array(N).fill(11000));
    expect(await coll.find().toArray()).toEqual([{ _id: 'k', owner: 'y' }]);
  });

  test('filter not only equality on _id, nothing matches: exactly one inserts, the rest get E11000 (updateOne)', async () => {
    const coll = await freshCollection('race_gt_update');
    // The inserted document (n: 1) never matches the filter (n > 5), so every later upsert tries to insert too.
    const results = await Promise.allSettled(
      Array.from({ length: N }, () =>
        coll.updateOne({ _id: 'k', n: { $gt: 5 } }, { $set: { n: 1 } }, { upsert: true }),
      ),
    );
    const fulfilled = results.filter((r) => r.status === 'fulfilled');
    expect(fulfilled).toHaveLength(1);
    expect((fulfilled[0] as PromiseFulfilledResult<{ upsertedCount: number; upsertedId: unknown }>).value).toMatchObject({
      upsertedCount: 1,
      upsertedId: 'k',
      matchedCount: 0,
    });
    expect(rejectionCodes(results)).toEqual(Array(N - 1).fill(11000));
    expect(await coll.find().toArray()).toEqual([{ _id: 'k', n: 1 }]);
  });

  test('filter not only equality on _id, nothing matches: exactly one inserts, the rest get E11000 (findOneAndUpdate)', async () => {
    const coll = await freshCollection('race_gt_fam');
    const results = await Promise.allSettled(
      Array.from({ length: N }, (_, i) =>
        coll.findOneAndUpdate(
          { _id: 'k', owner: 'nobody' },
          { $set: { owner: `w${i}` } },
          { upsert: true, returnDocument: 'after' },
        ),
      ),
    );
    const fulfilled = results.filter((r) => r.status === 'fulfilled');
    expect(fulfilled).toHaveLength(1);
    const winner = (fulfilled[0] as PromiseFulfilledResult<unknown>).value as { _id: string; owner: string };
    expect(winner._id).toBe('k');
    expect(winner.owner).toMatch(/^w\d+$/);
    expect(rejectionCodes(results)).toEqual(Array(N - 1).fill(11000));
    expect(await coll.find().toArray()).toEqual([winner]);
  });

  test('filter of only { _id }: the server retries the duplicate key itself and no upsert fails', async () => {
    await freshCollection('race_eq');
    const coll = db.collection<{ _id: string; hits?: number }>('race_eq');
    const viaUpdate = await Promise.allSettled(
      Array.from({ length: N }, () => coll.updateOne({ _id: 'k' }, { $inc: { hits: 1 } }, { upsert: true })),
    );
    expect(rejectionCodes(viaUpdate)).toEqual([]);
    const upserted = viaUpdate.filter(
      (r) => r.status === 'fulfilled' && (r.value as { upsertedCount: number }).upsertedCount === 1,
    );
    expect(upserted).toHaveLength(1);
    expect(await coll.find().toArray()).toEqual([{ _id: 'k', hits: N }]);

    const viaFam = await Promise.allSettled(
      Array.from({ length: N }, () =>
        coll.findOneAndUpdate({ _id: 'k2' }, { $inc: { hits: 1 } }, { upsert: true, returnDocument: 'after' }),
      ),
    );
    expect(rejectionCodes(viaFam)).toEqual([]);
    const seen = viaFam.map((r) => (r as PromiseFulfilledResult<{ hits?: number } | null>).value?.hits ?? -1).sort((a, b) => a - b);
    expect(seen).toEqual(Array.from({ length: N }, (_, i) => i + 1));
    expect(await coll.findOne({ _id: 'k2' })).toEqual({ _id: 'k2', hits: N });
  });
});

describe('upsert seeding from the filter', () => {
  test('equality conditions (plain, $eq, dotted, inside $and) seed the new document; the update then applies', async () => {
    const coll = await freshCollection('seed_eq');
    const result = await coll.updateOne(
      { _id: 's1', status: 'new', 'meta.kind': 'a', level: { $eq: 3 }, n: { $gt: 1 }, $and: [{ x: 1 }, { y: 2 }] },
      { $set: { touched: true }, $setOnInsert: { created: 'yes' } },
      { upsert: true },
    );
    expect(result).toMatchObject({ acknowledged: true, matchedCount: 0, modifiedCount: 0, upsertedCount: 1, upsertedId: 's1' });
    expect(await coll.findOne({ _id: 's1' })).toEqual({
      _id: 's1',
      status: 'new',
      meta: { kind: 'a' },
      level: 3,
      x: 1,
      y: 2,
      touched: true,
      created: 'yes',
    });
  });

  test('the update overrides a seeded field; $setOnInsert is ignored when the upsert matches', async () => {
    const coll = await freshCollection('seed_override');
    await coll.updateOne({ _id: 'o', status: 'free' }, { $set: { status: 'claimed' }, $setOnInsert: { first: 1 } }, { upsert: true });
    expect(await coll.findOne({ _id: 'o' })).toEqual({ _id: 'o', status: 'claimed', first: 1 });
    const again = await coll.updateOne({ _id: 'o' }, { $set: { status: 'again' }, $setOnInsert: { first: 2 } }, { upsert: true });
    expect(again).toMatchObject({ matchedCount: 1, modifiedCount: 1, upsertedCount: 0, upsertedId: null });
    expect(await coll.findOne({ _id: 'o' })).toEqual({ _id: 'o', status: 'again', first: 1 });
  });

  // Only equality conditions seed the upsert; a range condition contributes nothing, and with no
  // _id equality the server generates an ObjectId (manual, "Upsert Behavior": "creates a new
  // document with the equality conditions of the query"; src/mongo/db/update/update_driver.cpp,
  // populateDocumentWithQueryFields). $expr cannot appear in an upsert's filter at all
  // (QueryFeatureNotAllowed 224): see upsert-expr.test.ts.
  test('$gt and $lt conditions seed nothing; the server generates an ObjectId _id', async () => {
    const coll = await freshCollection('seed_none');
    const gt = await coll.updateOne({ n: { $gt: 5 } }, { $set: { v: 1 } }, { upsert: true });
    expect(gt.upsertedCount).toBe(1);
    expect(gt.upsertedId).toBeInstanceOf(ObjectId);
    const gtDoc = await coll.findOne({ _id: gt.upsertedId as ObjectId });
    expect(gtDoc).toEqual({ _id: gt.upsertedId, v: 1 });

    const fam = await coll.findOneAndUpdate({ _id: 'f', expiresAt: { $lt: new Date() } }, { $set: { v: 3 } }, { upsert: true, returnDocument: 'after' });
    expect(fam).toEqual({ _id: 'f', v: 3 });
  });

  test('a pipeline-update upsert starts from the seeded document', async () => {
    const coll = await freshCollection('seed_pipeline');
    await coll.updateOne(
      { _id: 'p', base: 10 },
      [{ $set: { doubled: { $multiply: ['$base', 2] } } }],
      { upsert: true },
    );
    expect(await coll.findOne({ _id: 'p' })).toEqual({ _id: 'p', base: 10, doubled: 20 });
  });
});
