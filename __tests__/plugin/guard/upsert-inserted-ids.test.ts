/**
 * The `_id`s an upsert may insert, as the guard reads them before sending it
 * (src/guard/upsert-id.ts, idsUpsertMayInsert; issue 16 item 2): every value the query compares
 * `_id` with under an even number of negations (canonicalizing may turn it into the seeding
 * equality, R21; a value only excluded, by `$ne` / `$nin` / `$not` / `$nor`, never), the `_id` a `$set` /
 * `$setOnInsert` or a replacement names (R22), nothing for a server-generated one, and
 * `undefined` (the write is refused) where the guard cannot tell. No server involved.
 */
import { mongo } from 'mongoose';
import { idsUpsertMayInsert } from '../../../src/guard/upsert-id';

const X = new mongo.ObjectId();
const Y = new mongo.ObjectId();
const Z = new mongo.ObjectId();

describe('ids an update-style upsert may insert', () => {
  test.each<[string, unknown, unknown, unknown[] | undefined]>([
    ['no _id anywhere: server-generated, nothing to check', { title: 't' }, { $set: { n: 1 } }, []],
    ['$setOnInsert of _id', { title: 't' }, { $setOnInsert: { _id: X } }, [X]],
    ['$set of _id', { title: 't' }, { $set: { _id: X, n: 1 } }, [X]],
    ['$setOnInsert given as a Map (the driver serializes it as a document)', { title: 't' }, { $setOnInsert: new Map([['_id', X]]) }, [X]],
    ['_id by equality', { _id: X }, { $set: { n: 1 } }, [X]],
    ['$in of ids', { _id: { $in: [X, Y] } }, { $set: { n: 1 } }, [X, Y]],
    ['a one-child $or (canonicalized into _id: X)', { $or: [{ _id: X }] }, { $set: { n: 1 } }, [X]],
    ['$all of one value', { _id: { $all: [X] } }, { $set: { n: 1 } }, [X]],
    ['nested $and / $nor / $not: a double negation is a candidate, a single one is not', { $and: [{ $nor: [{ _id: { $ne: X } }] }, { _id: { $not: { $in: [Y] } } }] }, { $set: { n: 1 } }, [X]],
    ['$ne, $nin, $not: { $eq }, a one-clause $nor exclude their values (NOT(EQ), NOT(IN)): no candidate', { _id: { $ne: X, $nin: [Y] }, $nor: [{ _id: Z }], $and: [{ _id: { $not: { $eq: X } } }] }, { $set: { n: 1 } }, []],
    ['$not: { $ne } and $not: { $nin } are positive again', { $or: [{ _id: { $not: { $ne: X } } }, { _id: { $not: { $nin: [Y] } } }] }, { $set: { n: 1 } }, [X, Y]],
    ['a value excluded in one place and named in another is a candidate', { $or: [{ _id: X }, { _id: { $ne: X } }] }, { $set: { n: 1 } }, [X]],
    ['a range on _id seeds nothing', { _id: { $gt: X } }, { $set: { n: 1 } }, []],
    ['a path under _id seeds an embedded _id, which cannot be locked', { '_id.a': 1 }, { $set: { n: 1 } }, []],
    ['a null _id cannot be locked', { title: 't' }, { $setOnInsert: { _id: null } }, []],
    ['$rename onto _id from a path the query does not mention: a no-op', { title: 't' }, { $rename: { old: '_id' } }, []],
    ['a pipeline that keeps _id', { title: 't' }, [{ $set: { n: 1 } }, { $unset: 'x' }, { $project: { _id: 1, n: 1 } }], []],
    ['$inc of _id', { title: 't' }, { $inc: { _id: 1 } }, undefined],
    ['$currentDate of _id', { title: 't' }, { $currentDate: { _id: true } }, undefined],
    ['$rename onto _id from a path the query seeds', { old: 5 }, { $rename: { old: '_id' } }, undefined],
    ['a pipeline $set of _id', { title: 't' }, [{ $set: { _id: 'z' } }], undefined],
    ['a pipeline $replaceWith', { title: 't' }, [{ $replaceWith: { $mergeObjects: ['$$ROOT', { a: 1 }] } }], undefined],
    ['$elemMatch on _id', { _id: { $elemMatch: { $eq: 1 } } }, { $set: { n: 1 } }, undefined],
    ['$jsonSchema at the top level', { $jsonSchema: { properties: { _id: { enum: [1] } } } }, { $set: { n: 1 } }, undefined],
  ])('%s', (_name, filter, update, expected) => {
    expect(idsUpsertMayInsert(filter, update, 'update')).toEqual(expected);
  });
});

describe('ids a replacement upsert may insert', () => {
  test.each<[string, unknown, unknown, unknown[] | undefined]>([
    ['the replacement has no _id', { title: 't' }, { title: 'r' }, []],
    ["the replacement's _id", { title: 't' }, { _id: X, title: 'r' }, [X]],
    ["the filter's _id", { _id: X }, { title: 'r' }, [X]],
    ['a replacement with toBSON (serialized otherwise than it reads)', { title: 't' }, { _id: X, toBSON: () => ({ _id: Y }) }, undefined],
  ])('%s', (_name, filter, replacement, expected) => {
    expect(idsUpsertMayInsert(filter, replacement, 'replacement')).toEqual(expected);
  });
});
