/**
 * Update semantics: pipeline updates ($set, $unset, $replaceWith, $project, $cond), arrayFilters
 * and positional operators, multi updates and their counts, and findAndModify in all its forms.
 *
 * Sources ((*): location or wording recalled, not re-read for this audit):
 *  - Pipeline updates: manual "Updates with Aggregation Pipeline" (*) (allowed stages $addFields/$set,
 *    $project/$unset, $replaceRoot/$replaceWith); a stage sees the output of the previous one.
 *  - arrayFilters: src/mongo/db/update/update_driver.cpp ("The array filter for identifier '...' was
 *    not used in the update", FailedToParse) and src/mongo/db/update/update_object_node.cpp ("No array
 *    filter found for identifier '...' in path '...'", BadValue); jstests/core/update_arrayFilters.js
 *    asserts both messages.
 *  - "multi update is not supported for replacement-style update", FailedToParse:
 *    src/mongo/db/update/update_driver.cpp (UpdateDriver::parse, kReplacement).
 *  - findAndModify option errors (FailedToParse 9, "Cannot specify both an update and remove=true",
 *    "Either an update or remove=true must be specified"): the findAndModify command's parser
 *    (src/mongo/db/commands/find_and_modify.cpp / write_ops parsing; older servers said BadValue) (*);
 *    the code 9 answer is the one the MongoDB PHP driver's own tests record from a real server.
 *  - Reply shapes (n, nModified, upserted[index,_id], lastErrorObject { n, updatedExisting, upserted }):
 *    manual, "update" and "findAndModify" commands, Output (*).
 */
import type { Collection, Db, Document, MongoClient } from 'mongodb';
import { expectServerError, openClient, uniqueDbName, type Loose } from './support/server';

const dbName = uniqueDbName('conf_updates');
let client: MongoClient;
let db: Db;

beforeAll(async () => {
  client = await openClient();
  db = client.db(dbName);
});

afterAll(async () => {
  await db.dropDatabase();
  await client.close();
});

async function withDocs(name: string, docs: Loose[]): Promise<Collection<Loose>> {
  const coll = db.collection<Loose>(name);
  await coll.deleteMany({});
  if (docs.length) await coll.insertMany(docs);
  return coll;
}

describe('pipeline updates', () => {
  test('$set computes from other fields; $literal keeps a dollar string as data', async () => {
    const coll = await withDocs('pl_set', [{ _id: 1, a: 2, b: 3, tags: ['x'] }]);
    const result = await coll.updateOne({ _id: 1 }, [
      { $set: { total: { $add: ['$a', '$b'] }, copy: '$tags', label: { $literal: '$notAField' }, 'nested.deep': 1 } },
    ]);
    expect(result).toMatchObject({ matchedCount: 1, modifiedCount: 1 });
    expect(await coll.findOne({ _id: 1 })).toEqual({
      _id: 1,
      a: 2,
      b: 3,
      tags: ['x'],
      total: 5,
      copy: ['x'],
      label: '$notAField',
      nested: { deep: 1 },
    });
  });

  test('stages run in order: a later stage sees what an earlier one set', async () => {
    const coll = await withDocs('pl_order', [{ _id: 1, n: 4 }]);
    await coll.updateOne({ _id: 1 }, [{ $set: { n: { $multiply: ['$n', 10] } } }, { $set: { m: { $add: ['$n', 1] } } }]);
    expect(await coll.findOne({ _id: 1 })).toEqual({ _id: 1, n: 40, m: 41 });
  });

  test('$unset removes one field or a list of fields', async () => {
    const coll = await withDocs('pl_unset', [{ _id: 1, a: 1, b: 2, c: 3, d: { e: 4, f: 5 } }]);
    await coll.updateOne({ _id: 1 }, [{ $unset: ['a', 'd.e'] }, { $unset: 'c' }]);
    expect(await coll.findOne({ _id: 1 })).toEqual({ _id: 1, b: 2, d: { f: 5 } });
  });

  test('$replaceWith replaces the whole document; _id is kept by $mergeObjects with $$ROOT', async () => {
    const coll = await withDocs('pl_replace', [
      { _id: 1, name: 'ada', old: true },
      { _id: 2, name: 'bob', profile: { city: 'Oslo', zip: '0150' } },
    ]);
    await coll.updateOne({ _id: 1 }, [{ $replaceWith: { _id: '$_id', name: { $toUpper: '$name' } } }]);
    await coll.updateOne({ _id: 2 }, [{ $replaceWith: { $mergeObjects: ['$$ROOT', '$profile'] } }, { $unset: 'profile' }]);
    expect(await coll.find().sort({ _id: 1 }).toArray()).toEqual([
      { _id: 1, name: 'ADA' },
      { _id: 2, name: 'bob', city: 'Oslo', zip: '0150' },
    ]);
  });

  test('$project in an update keeps _id and the listed fields', async () => {
    const coll = await withDocs('pl_project', [{ _id: 1, keep: 'y', drop: 'n', other: 0 }]);
    await coll.updateOne({ _id: 1 }, [{ $project: { keep: 1 } }]);
    expect(await coll.findOne({ _id: 1 })).toEqual({ _id: 1, keep: 'y' });
  });

  test('$cond picks a value per document in an updateMany', async () => {
    const coll = await withDocs('pl_cond', [
      { _id: 1, n: 3 },
      { _id: 2, n: 10 },
      { _id: 3, n: 25 },
      { _id: 4 },
    ]);
    const result = await coll.updateMany({}, [
      {
        $set: {
          size: { $cond: { if: { $gte: ['$n', 10] }, then: 'big', else: 'small' } },
          tier: { $switch: { branches: [{ case: { $gte: ['$n', 20] }, then: 2 }, { case: { $gte: ['$n', 10] }, then: 1 }], default: 0 } },
          owner: { $cond: [{ $eq: [{ $type: '$n' }, 'missing'] }, 'nobody', '$$REMOVE'] },
        },
      },
    ]);
    expect(result).toMatchObject({ matchedCount: 4, modifiedCount: 4 });
    expect(await coll.find().sort({ _id: 1 }).toArray()).toEqual([
      { _id: 1, n: 3, size: 'small', tier: 0 },
      { _id: 2, n: 10, size: 'big', tier: 1 },
      { _id: 3, n: 25, size: 'big', tier: 2 },
      { _id: 4, size: 'small', tier: 0, owner: 'nobody' },
    ]);
  });

  test('a pipeline update that leaves the document as it was is matched but not modified', async () => {
    const coll = await withDocs('pl_noop', [{ _id: 1, a: 1 }]);
    const result = await coll.updateOne({ _id: 1 }, [{ $set: { a: '$a' } }]);
    expect(result).toMatchObject({ matchedCount: 1, modifiedCount: 0, upsertedCount: 0 });
  });
});

describe('arrayFilters and positional operators', () => {
  test('$[identifier] updates only the elements its filter matches', async () => {
    const coll = await withDocs('af_scalar', [{ _id: 1, grades: [95, 92, 90, 70] }]);
    const result = await coll.updateOne({ _id: 1 }, { $set: { 'grades.$[g]': 100 } }, { arrayFilters: [{ g: { $gte: 91 } }] });
    expect(result).toMatchObject({ matchedCount: 1, modifiedCount: 1 });
    expect(await coll.findOne({ _id: 1 })).toEqual({ _id: 1, grades: [100, 100, 90, 70] });
  });

  test('filters on fields of embedded documents, across many documents', async () => {
    const coll = await withDocs('af_embedded', [
      { _id: 1, items: [{ sku: 'a', qty: 1 }, { sku: 'b', qty: 2 }, { sku: 'a', qty: 3 }] },
      { _id: 2, items: [{ sku: 'c', qty: 5 }] },
      { _id: 3, items: [{ sku: 'a', qty: 0 }] },
    ]);
    const result = await coll.updateMany({}, { $inc: { 'items.$[it].qty': 10 } } as Document, { arrayFilters: [{ 'it.sku': 'a' }] });
    expect(result).toMatchObject({ matchedCount: 3, modifiedCount: 2 });
    expect(await coll.find().sort({ _id: 1 }).toArray()).toEqual([
      { _id: 1, items: [{ sku: 'a', qty: 11 }, { sku: 'b', qty: 2 }, { sku: 'a', qty: 13 }] },
      { _id: 2, items: [{ sku: 'c', qty: 5 }] },
      { _id: 3, items: [{ sku: 'a', qty: 10 }] },
    ]);
  });

  test('$[] updates every element; $ updates the first element the query matched', async () => {
    const coll = await withDocs('af_all', [{ _id: 1, a: [1, 2, 3], b: [5, 7, 7] }]);
    await coll.updateOne({ _id: 1 }, { $inc: { 'a.$[]': 1 } } as Document);
    await coll.updateOne({ _id: 1, b: 7 }, { $set: { 'b.$': 70 } });
    expect(await coll.findOne({ _id: 1 })).toEqual({ _id: 1, a: [2, 3, 4], b: [5, 70, 7] });
  });

  test('findOneAndUpdate honours arrayFilters', async () => {
    const coll = await withDocs('af_fam', [{ _id: 1, locks: [{ owner: 'x', n: 1 }, { owner: 'y', n: 1 }] }]);
    const doc = await coll.findOneAndUpdate(
      { _id: 1 },
      { $set: { 'locks.$[l].n': 2 } },
      { arrayFilters: [{ 'l.owner': 'y' }], returnDocument: 'after' },
    );
    expect(doc).toEqual({ _id: 1, locks: [{ owner: 'x', n: 1 }, { owner: 'y', n: 2 }] });
  });

  test('an array filter the update does not use fails with FailedToParse (9)', async () => {
    const coll = await withDocs('af_unused', [{ _id: 1, a: [1, 2] }]);
    const error = await expectServerError(
      coll.updateOne({ _id: 1 }, { $set: { 'a.$[i]': 5 } }, { arrayFilters: [{ i: 1 }, { unused: 2 }] }),
      9,
    );
    expect(error.message).toContain("The array filter for identifier 'unused' was not used in the update");
    expect(await coll.findOne({ _id: 1 })).toEqual({ _id: 1, a: [1, 2] });
  });

  test('an identifier without an array filter fails with BadValue (2)', async () => {
    const coll = await withDocs('af_missing', [{ _id: 1, a: [1, 2] }]);
    const error = await expectServerError(coll.updateOne({ _id: 1 }, { $set: { 'a.$[x]': 5 } }), 2);
    expect(error.message).toContain("No array filter found for identifier 'x' in path 'a.$[x]'");
  });
});

describe('multi updates and counts', () => {
  test('updateMany counts matched and modified separately; updateOne touches one document', async () => {
    const coll = await withDocs('multi_counts', [
      { _id: 1, kind: 'a', status: 'open' },
      { _id: 2, kind: 'a', status: 'closed' },
      { _id: 3, kind: 'a', status: 'open' },
      { _id: 4, kind: 'b', status: 'open' },
    ]);
    const many = await coll.updateMany({ kind: 'a' }, { $set: { status: 'closed' } });
    expect(many).toMatchObject({ acknowledged: true, matchedCount: 3, modifiedCount: 2, upsertedCount: 0, upsertedId: null });

    const one = await coll.updateOne({ status: 'closed' }, { $set: { flagged: true } });
    expect(one).toMatchObject({ matchedCount: 1, modifiedCount: 1 });
    expect(await coll.countDocuments({ flagged: true })).toBe(1);
    expect(await coll.countDocuments({ status: 'closed' })).toBe(3);
    expect(await coll.findOne({ _id: 4 })).toEqual({ _id: 4, kind: 'b', status: 'open' });
  });

  test('the raw update command reports n, nModified and upserted per statement', async () => {
    await withDocs('multi_raw', [{ _id: 1, v: 1 }, { _id: 2, v: 1 }]);
    const reply = await db.command({
      update: 'multi_raw',
      updates: [
        { q: {}, u: { $set: { v: 2 } }, multi: true },
        { q: { _id: 'new' }, u: { $set: { v: 9 } }, upsert: true },
        { q: { _id: 1 }, u: { $set: { v: 2 } } },
      ],
    });
    expect(reply.ok).toBe(1);
    expect(reply.n).toBe(4);
    expect(reply.nModified).toBe(2);
    expect(reply.upserted).toEqual([{ index: 1, _id: 'new' }]);
    expect(reply.writeErrors).toBeUndefined();
  });

  test('a multi update with a replacement document is refused with FailedToParse (9)', async () => {
    await withDocs('multi_replace', [{ _id: 1, v: 1 }]);
    const reply = await db.command({ update: 'multi_replace', updates: [{ q: {}, u: { v: 2 }, multi: true }] });
    expect(reply.ok).toBe(1);
    expect(reply.n).toBe(0);
    const writeErrors = reply.writeErrors as Document[];
    expect(writeErrors).toHaveLength(1);
    expect(writeErrors[0]).toMatchObject({ index: 0, code: 9 });
    expect(writeErrors[0].errmsg).toContain('multi update is not supported for replacement-style update');
  });

  test('deleteOne and deleteMany report deletedCount', async () => {
    const coll = await withDocs('multi_delete', [{ _id: 1, k: 'x' }, { _id: 2, k: 'x' }, { _id: 3, k: 'x' }, { _id: 4, k: 'y' }]);
    expect(await coll.deleteOne({ k: 'x' })).toEqual({ acknowledged: true, deletedCount: 1 });
    expect(await coll.deleteMany({ k: 'x' })).toEqual({ acknowledged: true, deletedCount: 2 });
    expect(await coll.deleteMany({ k: 'none' })).toEqual({ acknowledged: true, deletedCount: 0 });
    expect(await coll.find().toArray()).toEqual([{ _id: 4, k: 'y' }]);
  });
});

describe('findAndModify', () => {
  const queue = (): Loose[] => [
    { _id: 1, priority: 1, state: 'ready', payload: 'p1' },
    { _id: 2, priority: 5, state: 'ready', payload: 'p2' },
    { _id: 3, priority: 3, state: 'ready', payload: 'p3' },
  ];

  test('returns the document before the update by default, after it with returnDocument: after', async () => {
    const coll = await withDocs('fam_before_after', queue());
    const before = await coll.findOneAndUpdate({ _id: 1 }, { $set: { state: 'taken' } });
    expect(before).toEqual({ _id: 1, priority: 1, state: 'ready', payload: 'p1' });
    const after = await coll.findOneAndUpdate({ _id: 1 }, { $set: { state: 'done' } }, { returnDocument: 'after' });
    expect(after).toEqual({ _id: 1, priority: 1, state: 'done', payload: 'p1' });
    expect(await coll.findOneAndUpdate({ _id: 99 }, { $set: { state: 'x' } })).toBeNull();
  });

  test('sort decides which matching document is modified; projection shapes the result', async () => {
    const coll = await withDocs('fam_sort', queue());
    const first = await coll.findOneAndUpdate(
      { state: 'ready' },
      { $set: { state: 'taken' } },
      { sort: { priority: -1 }, projection: { payload: 1, _id: 0 }, returnDocument: 'after' },
    );
    expect(first).toEqual({ payload: 'p2' });
    const second = await coll.findOneAndUpdate({ state: 'ready' }, { $set: { state: 'taken' } }, { sort: { priority: -1 }, projection: { state: 1 } });
    expect(second).toEqual({ _id: 3, state: 'ready' });
    expect((await coll.find({ state: 'ready' }).toArray()).map((d) => d._id)).toEqual([1]);
  });

  test('upsert: null before, the new document after; metadata reports the upserted id', async () => {
    const coll = await withDocs('fam_upsert', []);
    const before = await coll.findOneAndUpdate({ _id: 'u1' }, { $set: { v: 1 } }, { upsert: true, returnDocument: 'before' });
    expect(before).toBeNull();
    expect(await coll.findOne({ _id: 'u1' })).toEqual({ _id: 'u1', v: 1 });

    const meta = await coll.findOneAndUpdate(
      { _id: 'u2', kind: 'k' },
      { $set: { v: 2 } },
      { upsert: true, returnDocument: 'after', includeResultMetadata: true },
    );
    expect(meta.ok).toBe(1);
    expect(meta.value).toEqual({ _id: 'u2', kind: 'k', v: 2 });
    expect(meta.lastErrorObject).toEqual({ n: 1, updatedExisting: false, upserted: 'u2' });

    const existing = await coll.findOneAndUpdate({ _id: 'u2' }, { $set: { v: 3 } }, { upsert: true, includeResultMetadata: true });
    expect(existing.value).toEqual({ _id: 'u2', kind: 'k', v: 2 });
    expect(existing.lastErrorObject).toEqual({ n: 1, updatedExisting: true });
  });

  test('the raw command: query, sort, update, new, fields, upsert', async () => {
    await withDocs('fam_raw', queue());
    const updated = await db.command({
      findAndModify: 'fam_raw',
      query: { state: 'ready' },
      sort: { priority: 1 },
      update: { $set: { state: 'taken' } },
      new: true,
      fields: { state: 1 },
    });
    expect(updated.ok).toBe(1);
    expect(updated.value).toEqual({ _id: 1, state: 'taken' });
    expect(updated.lastErrorObject).toEqual({ n: 1, updatedExisting: true });

    const none = await db.command({ findAndModify: 'fam_raw', query: { state: 'nope' }, update: { $set: { x: 1 } } });
    expect(none.value).toBeNull();
    expect(none.lastErrorObject).toEqual({ n: 0, updatedExisting: false });

    const upserted = await db.command({ findAndModify: 'fam_raw', query: { _id: 10 }, update: { $set: { state: 'new' } }, upsert: true, new: true });
    expect(upserted.value).toEqual({ _id: 10, state: 'new' });
    expect(upserted.lastErrorObject).toEqual({ n: 1, updatedExisting: false, upserted: 10 });
  });

  test('remove returns and deletes the first document in sort order', async () => {
    const coll = await withDocs('fam_remove', queue());
    const removed = await db.command({ findAndModify: 'fam_remove', query: {}, sort: { priority: -1 }, remove: true });
    expect(removed.value).toEqual({ _id: 2, priority: 5, state: 'ready', payload: 'p2' });
    expect(removed.lastErrorObject).toEqual({ n: 1 });
    const nothing = await db.command({ findAndModify: 'fam_remove', query: { _id: 2 }, remove: true });
    expect(nothing.value).toBeNull();
    expect(nothing.lastErrorObject).toEqual({ n: 0 });

    const deleted = await coll.findOneAndDelete({}, { sort: { priority: 1 } });
    expect(deleted).toEqual({ _id: 1, priority: 1, state: 'ready', payload: 'p1' });
    expect((await coll.find().toArray()).map((d) => d._id)).toEqual([3]);
  });

  test('findOneAndReplace replaces the body and keeps _id', async () => {
    const coll = await withDocs('fam_replace', queue());
    const after = await coll.findOneAndReplace({ _id: 3 }, { fresh: true }, { returnDocument: 'after' });
    expect(after).toEqual({ _id: 3, fresh: true });
  });

  test('a pipeline update works through findAndModify', async () => {
    const coll = await withDocs('fam_pipeline', [{ _id: 1, n: 2 }]);
    const after = await coll.findOneAndUpdate({ _id: 1 }, [{ $set: { n: { $pow: ['$n', 3] } } }], { returnDocument: 'after' });
    expect(after).toEqual({ _id: 1, n: 8 });
  });

  test('update together with remove=true is refused with FailedToParse (9)', async () => {
    await withDocs('fam_invalid', queue());
    const both = await expectServerError(
      db.command({ findAndModify: 'fam_invalid', query: { _id: 1 }, update: { $set: { x: 1 } }, remove: true }),
      9,
    );
    expect(both.message).toContain('Cannot specify both an update and remove=true');
    const neither = await expectServerError(db.command({ findAndModify: 'fam_invalid', query: { _id: 1 } }), 9);
    expect(neither.message).toContain('Either an update or remove=true must be specified');
    expect(await db.collection('fam_invalid').countDocuments()).toBe(3);
  });
});
