/**
 * Aggregation comparisons across BSON types, `let` variables, and sort order across types.
 *
 * Sources:
 *  - Manual, "Comparison/Sort Order" (reference/bson-type-comparison-order): "When comparing values
 *    of different BSON types, MongoDB uses the following comparison order, from lowest to highest:
 *    MinKey, Null, Numbers, Symbol/String, Object, Array, BinData, ObjectId, Boolean, Date,
 *    Timestamp, Regular Expression, MaxKey"; "The comparison treats a non-existent field as if it were
 *    null" (sort); BinData is ordered by length, then subtype, then bytes.
 *  - Aggregation $lt/$lte/$gt/$gte/$eq/$ne/$cmp "compare both value and type, using the specified
 *    BSON comparison order for values of different types" (manual, $lte (aggregation)); mongod's
 *    ExpressionCompare (src/mongo/db/pipeline/expression.cpp). So `{ $lte: ['$missing', '$$NOW'] }`
 *    is true: a missing value sorts below every date (shared/MONGOD-SEMANTICS.md "Comparison order").
 *    The query language is different: `{ a: { $lt: date } }` only matches dates (manual, "Type
 *    Bracketing" / "Comparison Query Operators").
 *  - `let` (find, aggregate, update, delete, findAndModify, MongoDB 5.0+): manual, each command's
 *    `let` option; variable-name and undefined-variable errors: src/mongo/db/pipeline/variables.cpp
 *    (16867 "'<name>' starts with an invalid character for a user variable name"; 17276 "Use of
 *    undefined variable: <name>").
 */
import { Binary, type Db, type Document, type MongoClient } from 'mongodb';
import { expectServerError, openClient, uniqueDbName, type Loose } from './support/server';

const dbName = uniqueDbName('conf_expressions');
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

describe('aggregation comparisons order values of different types by BSON type', () => {
  test("{ $lte: ['$expiresAt', '$$NOW'] } is true when expiresAt is missing or null, false for a future date", async () => {
    const coll = db.collection<Loose>('cmp_now');
    await coll.insertMany([
      { _id: 'missing' },
      { _id: 'null', expiresAt: null },
      { _id: 'past', expiresAt: new Date(Date.now() - 60_000) },
      { _id: 'future', expiresAt: new Date(Date.now() + 3_600_000) },
      { _id: 'string', expiresAt: 'tomorrow' },
    ]);
    const expired = await coll.find({ $expr: { $lte: ['$expiresAt', '$$NOW'] } }).sort({ _id: 1 }).toArray();
    // Strings sort below dates too (Numbers < String < ... < Date).
    expect(expired.map((d) => d._id)).toEqual(['missing', 'null', 'past', 'string']);
    // The query-language $lte only matches values of the same type bracket (dates).
    const bracketed = await coll.find({ expiresAt: { $lte: new Date() } }).toArray();
    expect(bracketed.map((d) => d._id)).toEqual(['past']);
  });

  test('$cmp and $gt across types follow the BSON order in an aggregation', async () => {
    const coll = db.collection<Loose>('cmp_types');
    await coll.insertOne({ _id: 1, n: 5, s: 'a', o: { x: 1 }, arr: [1], d: new Date(0), b: true });
    const [r] = await coll
      .aggregate([
        {
          $project: {
            _id: 0,
            numVsString: { $cmp: ['$n', '$s'] },
            stringVsObject: { $cmp: ['$s', '$o'] },
            objectVsArray: { $cmp: ['$o', '$arr'] },
            boolVsDate: { $cmp: ['$b', '$d'] },
            dateGtNumber: { $gt: ['$d', '$n'] },
            missingLtNull: { $lt: ['$nothing', 0] },
          },
        },
      ])
      .toArray();
    expect(r).toEqual({ numVsString: -1, stringVsObject: -1, objectVsArray: -1, boolVsDate: -1, dateGtNumber: true, missingLtNull: true });
  });
});

describe('sort order across types', () => {
  test('find sorts null (and missing) < numbers < strings < objects < BinData < booleans < dates', async () => {
    const coll = db.collection<Loose>('sort_types');
    await coll.insertMany([
      { _id: 'date', v: new Date(0) },
      { _id: 'bool', v: false },
      { _id: 'bin', v: new Binary(Buffer.from([1])) },
      { _id: 'obj', v: { a: 1 } },
      { _id: 'str', v: 'x' },
      { _id: 'num', v: 3 },
      { _id: 'null', v: null },
    ]);
    const asc = await coll.find().sort({ v: 1 }).toArray();
    expect(asc.map((d) => d._id)).toEqual(['null', 'num', 'str', 'obj', 'bin', 'bool', 'date']);
  });

  test('BinData sorts by length first, then subtype, then bytes', async () => {
    const coll = db.collection<Loose>('sort_bindata');
    await coll.insertMany([
      { _id: 'long', v: new Binary(Buffer.from([0, 0, 0])) },
      { _id: 'short-ff', v: new Binary(Buffer.from([0xff])) },
      { _id: 'short-sub5', v: new Binary(Buffer.from([0x00]), 5) },
      { _id: 'short-00', v: new Binary(Buffer.from([0x00])) },
    ]);
    const asc = await coll.find().sort({ v: 1 }).toArray();
    expect(asc.map((d) => d._id)).toEqual(['short-00', 'short-ff', 'short-sub5', 'long']);
  });
});

describe('let variables', () => {
  beforeAll(async () => {
    await db.collection<Loose>('let').insertMany([
      { _id: 1, name: 'a', n: 1 },
      { _id: 2, name: 'b', n: 2 },
    ]);
  });

  test('find, aggregate, update, findAndModify and delete read $$name from let', async () => {
    const coll = db.collection<Loose>('let');
    expect(await coll.find({ $expr: { $eq: ['$name', '$$target'] } }, { let: { target: 'b' } }).toArray()).toEqual([{ _id: 2, name: 'b', n: 2 }]);
    expect(await coll.aggregate([{ $match: { $expr: { $eq: ['$_id', '$$id'] } } }, { $project: { _id: 1, twice: { $multiply: ['$n', '$$k'] } } }], { let: { id: 1, k: 2 } }).toArray()).toEqual([{ _id: 1, twice: 2 }]);
    const updated = await coll.updateOne({ $expr: { $eq: ['$_id', '$$id'] } }, [{ $set: { label: '$$label' } }], { let: { id: 1, label: 'first' } });
    expect(updated).toMatchObject({ matchedCount: 1, modifiedCount: 1 });
    const fam = await coll.findOneAndUpdate({ $expr: { $eq: ['$_id', '$$id'] } }, [{ $set: { label: '$$label' } }], { let: { id: 2, label: 'second' }, returnDocument: 'after' });
    expect(fam).toEqual({ _id: 2, name: 'b', n: 2, label: 'second' });
    expect(await coll.find().sort({ _id: 1 }).toArray()).toEqual([
      { _id: 1, name: 'a', n: 1, label: 'first' },
      { _id: 2, name: 'b', n: 2, label: 'second' },
    ]);
    const deleted = await db.collection<Loose>('let_del').insertMany([{ _id: 1 }, { _id: 2 }]).then(() => db.collection<Loose>('let_del').deleteMany({ $expr: { $gt: ['$_id', '$$min'] } }, { let: { min: 1 } }));
    expect(deleted.deletedCount).toBe(1);
  });

  test('a let value may be an expression of $$NOW', async () => {
    const [doc] = await db.collection<Loose>('let').find({ _id: 1 }, { projection: { at: '$$then' }, let: { then: { $add: ['$$NOW', 1000] } } }).toArray();
    expect(doc.at).toBeInstanceOf(Date);
  });

  test('an undefined variable fails with 17276; an invalid name with 16867', async () => {
    const undef = await expectServerError(db.collection<Loose>('let').find({ $expr: { $eq: ['$_id', '$$nope'] } }).toArray(), 17276);
    expect(undef.message).toContain('Use of undefined variable: nope');
    const bad = await expectServerError(db.collection<Loose>('let').find({}, { let: { Bad: 1 } } as Document).toArray(), 16867);
    expect(bad.message).toBe("'Bad' starts with an invalid character for a user variable name");
  });
});
