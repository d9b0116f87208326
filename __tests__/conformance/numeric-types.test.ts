/**
 * Numeric BSON types: Int32, Int64 (Long), Double and Decimal128 are stored and returned as sent,
 * compared and sorted by value across types, tested by $type, and combined by arithmetic into the
 * type mongod gives.
 *
 * Sources:
 *  - manual, "BSON Types" (type names and numbers: double 1, int 16, long 18, decimal 19; alias
 *    "number"); "$type" (query operator: a field matches when its value, or an element of its array
 *    value, has the type); "Comparison/Sort Order" (numbers compare by value across types).
 *  - Value::compare (src/mongo/db/exec/document_value/value.cpp): numbers of different types compare
 *    by value with src/mongo/base/compare_numbers.h; a double and a decimal compare exactly
 *    (compareDecimalToDouble: the decimal rounded toward negative to a double, ties broken by the
 *    inexact flag).
 *  - SafeNum (src/mongo/util/safe_num.cpp): addInt32Int32 and mulInt32Int32 keep an int when it
 *    fits and return a long otherwise; int/long with long overflowing is invalid; any decimal
 *    operand makes the result decimal; any other double makes it double.
 *  - ArithmeticNode (src/mongo/db/update/arithmetic_node.cpp): $inc/$mul on a missing field create
 *    the argument (multiplied by int 0 for $mul, keeping its type); an invalid result is BadValue
 *    "Failed to apply $inc operations to current value ((NumberLong)<v>) for document {_id: <id>}";
 *    an identical result (same type and value) is a no-op.
 *  - ExpressionAdd / ExpressionMultiply (src/mongo/db/pipeline/expression.cpp) and AccumulatorSum
 *    (accumulator_sum.cpp): the widest operand type; int results via createIntOrLong; a long
 *    overflow becomes double.
 */
import { Decimal128, Double, Int32, Long, type Collection, type Db, type Document, type MongoClient } from 'mongodb';
import { expectServerError, openClient, uniqueDbName, type Loose } from './support/server';

const dbName = uniqueDbName('conf_numbers');
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

const raw = { promoteValues: false, promoteLongs: false } as const;

/** The BSON type name of a value read with promoteValues: false. */
function typeOf(v: unknown): string {
  if (typeof v === 'number') return 'js-number';
  return (v as { _bsontype?: string })?._bsontype ?? typeof v;
}

async function fresh(name: string, docs: Loose[]): Promise<Collection<Loose>> {
  const c = db.collection<Loose>(name);
  await c.deleteMany({});
  if (docs.length) await c.insertMany(docs);
  return c;
}

async function one(c: Collection<Loose>, id: string | number): Promise<Document> {
  return (await c.findOne({ _id: id }, raw))!;
}

describe('storage and $type', () => {
  let c: Collection<Loose>;
  beforeAll(async () => {
    c = await fresh('types', [
      { _id: 'int', v: new Int32(1) },
      { _id: 'double', v: new Double(1) },
      { _id: 'fraction', v: 1.5 },
      { _id: 'long', v: Long.fromNumber(1) },
      { _id: 'bigLong', v: Long.fromBigInt(2n ** 60n + 1n) },
      { _id: 'decimal', v: Decimal128.fromString('1.10') },
      { _id: 'array', v: [new Int32(2), new Double(2)] },
    ]);
  });

  test('every value comes back with its own type and value', async () => {
    expect(typeOf((await one(c, 'int')).v)).toBe('Int32');
    expect(typeOf((await one(c, 'double')).v)).toBe('Double');
    expect(typeOf((await one(c, 'fraction')).v)).toBe('Double');
    expect(typeOf((await one(c, 'long')).v)).toBe('Long');
    const big = (await one(c, 'bigLong')).v as Long;
    expect(big.toBigInt()).toBe(2n ** 60n + 1n);
    expect((await one(c, 'decimal')).v.toString()).toBe('1.10');
    expect((await one(c, 'array')).v.map(typeOf)).toEqual(['Int32', 'Double']);
  });

  test('$type by name, number and the "number" alias', async () => {
    const ids = async (type: unknown): Promise<string[]> => (await c.find({ v: { $type: type as never } }).toArray()).map((d) => String(d._id)).sort();
    expect(await ids('int')).toEqual(['array', 'int']);
    expect(await ids('double')).toEqual(['array', 'double', 'fraction']);
    expect(await ids('long')).toEqual(['bigLong', 'long']);
    expect(await ids('decimal')).toEqual(['decimal']);
    expect(await ids(16)).toEqual(['array', 'int']);
    expect(await ids(18)).toEqual(['bigLong', 'long']);
    expect(await ids('number')).toEqual(['array', 'bigLong', 'decimal', 'double', 'fraction', 'int', 'long']);
  });

  test('equality and ranges compare by value across types, exactly', async () => {
    const ids = async (filter: Document): Promise<string[]> => (await c.find(filter).toArray()).map((d) => String(d._id)).sort();
    expect(await ids({ v: 1 })).toEqual(['double', 'int', 'long']);
    expect(await ids({ v: Decimal128.fromString('1.0') })).toEqual(['double', 'int', 'long']);
    expect(await ids({ v: Decimal128.fromString('1.10') })).toEqual(['decimal']);
    // 2^60 + 1 is not a double: greater than the double 2^60, not equal to it.
    expect(await ids({ v: 2 ** 60 })).toEqual([]);
    expect(await ids({ v: { $gt: 2 ** 60 } })).toEqual(['bigLong']);
    expect(await ids({ v: { $gte: 1.05, $lt: 1.5 } })).toEqual(['decimal']);
    // The double 1.1 is exactly 1.100000000000000088817841970012523233890533447265625: above the decimal 1.10.
    expect(await ids({ v: { $gte: 1.1, $lt: 1.5 } })).toEqual([]);
  });

  // compareDecimalToDouble (src/mongo/base/compare_numbers.h): the decimal is converted to a double
  // rounding toward negative, and an inexact conversion that meets the double makes the decimal the
  // greater: the comparison is exact. The double 0.1 is exactly
  // 0.1000000000000000055511151231257827021181583404541015625, so the 34-digit decimal
  // 0.1000000000000000055511151231257827 is below it, not equal to it.
  test('a Decimal128 and a double compare by their exact values', async () => {
    const d = await fresh('decdouble', [{ _id: 1, v: Decimal128.fromString('0.1000000000000000055511151231257827') }]);
    expect(await d.countDocuments({ v: 0.1 })).toBe(0);
    expect(await d.countDocuments({ v: { $lt: 0.1 } })).toBe(1);
    expect(await d.countDocuments({ v: { $gt: 0.09999999999999999 } })).toBe(1);
  });

  test('sort orders numbers of all types by value', async () => {
    const sorted = (await c.find({ _id: { $ne: 'array' } }).sort({ v: 1, _id: 1 }).toArray()).map((d) => d._id);
    expect(sorted).toEqual(['double', 'int', 'long', 'decimal', 'fraction', 'bigLong']);
  });
});

describe('$inc and $mul', () => {
  test('int + int stays int, overflows to long; int + double is double; anything + decimal is decimal', async () => {
    const c = await fresh('inc', [
      { _id: 1, i: new Int32(1), max: new Int32(2147483647), l: Long.fromNumber(5), d: new Double(2), m: Decimal128.fromString('1.5') },
    ]);
    await c.updateOne({ _id: 1 }, { $inc: { i: new Int32(2), max: new Int32(1), l: new Int32(1), d: new Int32(1), m: new Int32(1) } } as never);
    const doc = await one(c, 1);
    expect([typeOf(doc.i), doc.i.valueOf()]).toEqual(['Int32', 3]);
    expect([typeOf(doc.max), doc.max.toString()]).toEqual(['Long', '2147483648']);
    expect([typeOf(doc.l), doc.l.toString()]).toEqual(['Long', '6']);
    expect([typeOf(doc.d), doc.d.valueOf()]).toEqual(['Double', 3]);
    expect([typeOf(doc.m), doc.m.toString()]).toEqual(['Decimal128', '2.5']);
    await c.updateOne({ _id: 1 }, { $inc: { i: 0.5 } } as never);
    expect(typeOf((await one(c, 1)).i)).toBe('Double');
  });

  test('$inc of a double by 0.5 + 0.5 keeps a Double even when the result is integral', async () => {
    const c = await fresh('inc_double', [{ _id: 1, d: 1.5 }]);
    await c.updateOne({ _id: 1 }, { $inc: { d: 1.5 } } as never);
    const doc = await one(c, 1);
    expect([typeOf(doc.d), doc.d.valueOf()]).toEqual(['Double', 3]);
  });

  test('$mul on a missing field creates 0 of the argument type; int * int overflowing is long', async () => {
    const c = await fresh('mul', [{ _id: 1, i: new Int32(65536) }]);
    await c.updateOne({ _id: 1 }, { $mul: { i: new Int32(65536), missingL: Long.fromNumber(3), missingD: new Double(2) } } as never);
    const doc = await one(c, 1);
    expect([typeOf(doc.i), doc.i.toString()]).toEqual(['Long', String(65536 * 65536)]);
    expect([typeOf(doc.missingL), doc.missingL.toString()]).toEqual(['Long', '0']);
    expect([typeOf(doc.missingD), doc.missingD.valueOf()]).toEqual(['Double', 0]);
  });

  test('a long overflow is BadValue naming the current value and the document', async () => {
    const c = await fresh('overflow', [{ _id: 1, l: Long.fromBigInt(2n ** 63n - 1n) }]);
    const err = await expectServerError(c.updateOne({ _id: 1 }, { $inc: { l: new Int32(1) } } as never), 2);
    expect(err.message).toBe('Failed to apply $inc operations to current value ((NumberLong)9223372036854775807) for document {_id: 1}');
  });

  test('a type change is a modification; the identical value is a no-op', async () => {
    const c = await fresh('noop', [{ _id: 1, v: new Int32(1) }]);
    expect((await c.updateOne({ _id: 1 }, { $set: { v: new Int32(1) } } as never)).modifiedCount).toBe(0);
    expect((await c.updateOne({ _id: 1 }, { $set: { v: new Double(1) } } as never)).modifiedCount).toBe(1);
    expect(typeOf((await one(c, 1)).v)).toBe('Double');
    expect((await c.updateOne({ _id: 1 }, { $inc: { v: new Int32(0) } } as never)).modifiedCount).toBe(0);
  });
});

describe('aggregation', () => {
  async function project(expr: Document, doc: Document = {}): Promise<unknown> {
    const c = await fresh('agg', [{ _id: 1, ...doc }]);
    const [out] = await c.aggregate([{ $project: { _id: 0, r: expr } }], raw).toArray();
    return out.r;
  }

  test('$add: int + int overflows to long, a long overflow becomes double; int + double is double', async () => {
    let r = await project({ $add: [new Int32(2147483647), new Int32(1)] });
    expect([typeOf(r), String(r)]).toEqual(['Long', '2147483648']);
    r = await project({ $add: [Long.fromBigInt(2n ** 63n - 1n), new Int32(1)] });
    expect(typeOf(r)).toBe('Double');
    r = await project({ $add: [new Int32(1), new Double(2)] });
    expect([typeOf(r), (r as Double).valueOf()]).toEqual(['Double', 3]);
    r = await project({ $add: ['$a', '$b'] }, { a: new Int32(2), b: Long.fromNumber(3) });
    expect([typeOf(r), String(r)]).toEqual(['Long', '5']);
  });

  test('$multiply and $sum follow the same widening; $avg is a double', async () => {
    let r = await project({ $multiply: [new Int32(65536), new Int32(65536)] });
    expect([typeOf(r), String(r)]).toEqual(['Long', String(2 ** 32)]);
    r = await project({ $multiply: [new Int32(3), new Double(1)] });
    expect([typeOf(r), (r as Double).valueOf()]).toEqual(['Double', 3]);
    r = await project({ $sum: [new Int32(1), Long.fromNumber(2)] });
    expect([typeOf(r), String(r)]).toEqual(['Long', '3']);
    r = await project({ $avg: [new Int32(1), new Int32(3)] });
    expect([typeOf(r), (r as Double).valueOf()]).toEqual(['Double', 2]);
  });

  // ExpressionAdd::evaluate (src/mongo/db/pipeline/expression.cpp) and AccumulatorSum /
  // AccumulatorAvg (accumulator_sum.cpp, accumulator_avg.cpp) add non-decimals in a
  // DoubleDoubleSummation (src/mongo/util/summation.h): an overflowing intermediate double becomes
  // Infinity (the plain running sum is returned once the compensated one is NaN), not the exact sum.
  // jstests/aggregation/expressions/arith_overflow.js: long overflow in $add/$subtract/$multiply
  // gives a double.
  test('sums are compensated double-double sums: an overflowing intermediate is Infinity; longs are exact', async () => {
    let r = await project({ $add: [1e308, 1e308, -1e308] });
    expect([typeOf(r), Number(r)]).toEqual(['Double', Infinity]);
    r = await project({ $sum: [1e308, 1e308, -1e308] });
    expect([typeOf(r), Number(r)]).toEqual(['Double', Infinity]);
    // getDouble() is the rounded part alone: after 0.1 + 0.2 the compensation holds the rounding
    // error, and -0.3 cancels the rounded part exactly, so the sum reads 0 (the exact sum of the
    // three doubles is 2.78e-17; plain double addition gives 5.55e-17).
    r = await project({ $add: [0.1, 0.2, -0.3] });
    expect([typeOf(r), Number(r)]).toEqual(['Double', 0]);
    // Longs are added exactly (addLong), then divided: 3 * (2^53 + 1) rounds to 27021597764222980.
    const big = Long.fromBigInt(2n ** 53n + 1n);
    r = await project({ $avg: [big, big, big] });
    expect([typeOf(r), Number(r)]).toEqual(['Double', 9007199254740994]);
    r = await project({ $subtract: [Long.fromBigInt(9000000000000000000n), Long.fromBigInt(-9000000000000000000n)] });
    expect([typeOf(r), Number(r)]).toEqual(['Double', 1.8e19]);
    r = await project({ $multiply: [Long.fromBigInt(9000000000000000000n), Long.fromBigInt(-9000000000000000000n)] });
    expect([typeOf(r), Number(r)]).toEqual(['Double', -8.1e37]);
  });

  // ExpressionAdd / ExpressionMultiply take the operands in order and answer null at the first
  // null or missing one.
  test('$add and $multiply answer null at a null operand', async () => {
    expect(await project({ $add: [new Int32(1), null, 'x'] })).toBeNull();
    expect(await project({ $multiply: ['$missing', new Int32(2)] })).toBeNull();
  });

  // evaluateAccumulator (src/mongo/db/pipeline/accumulator_helpers.h): several arguments are taken
  // as they are, so an array among them is not summed; one array argument gives its elements.
  test('$sum with several arguments ignores an array argument; one array argument is summed', async () => {
    const sum = async (expr: Document, doc: Document): Promise<string> => String(await project(expr, doc));
    expect(await sum({ $sum: ['$a', '$b'] }, { a: [new Int32(1), new Int32(2)], b: new Int32(3) })).toBe('3');
    expect(await sum({ $sum: '$a' }, { a: [new Int32(1), new Int32(2)] })).toBe('3');
    expect(await sum({ $sum: ['$a'] }, { a: [new Int32(1), new Int32(2)] })).toBe('3');
  });

  // AccumulatorSum::getConstantArgument / _processInternalConstant (accumulator_sum.cpp): a constant
  // double argument is added with plain double additions, one per document.
  test('$group $sum of a constant double adds plainly, once per document', async () => {
    const c = await fresh('constsum', Array.from({ length: 10 }, (_, i) => ({ _id: i, g: 1 })));
    const [out] = await c.aggregate([{ $group: { _id: '$g', n: { $sum: 0.1 }, k: { $sum: 1 } } }], raw).toArray();
    let plain = 0;
    for (let i = 0; i < 10; i++) plain += 0.1;
    expect([Number(out.n), typeOf(out.k), Number(out.k)]).toEqual([plain, 'Int32', 10]);
    expect(plain).not.toBe(1);
  });

  test('$group sums ints to an int and mixed types to the widest', async () => {
    const c = await fresh('group', [
      { _id: 1, g: 'a', n: new Int32(1) },
      { _id: 2, g: 'a', n: new Int32(2) },
      { _id: 3, g: 'b', n: new Int32(1) },
      { _id: 4, g: 'b', n: Long.fromNumber(2) },
    ]);
    const out = await c.aggregate([{ $group: { _id: '$g', total: { $sum: '$n' } } }, { $sort: { _id: 1 } }], raw).toArray();
    expect(out.map((d) => [d._id, typeOf(d.total), String(d.total)])).toEqual([
      ['a', 'Int32', '3'],
      ['b', 'Long', '3'],
    ]);
  });

  test('$type names the BSON type; comparisons in $expr are by value across types', async () => {
    expect(await project({ $type: '$v' }, { v: new Double(1) })).toBe('double');
    expect(await project({ $type: '$v' }, { v: Long.fromNumber(1) })).toBe('long');
    expect(await project({ $type: '$v' }, { v: new Int32(1) })).toBe('int');
    expect(await project({ $type: '$v' }, { v: Decimal128.fromString('1') })).toBe('decimal');
    expect(await project({ $eq: ['$a', '$b'] }, { a: new Int32(1), b: Decimal128.fromString('1.000') })).toBe(true);
    expect(await project({ $lt: ['$a', '$b'] }, { a: Long.fromBigInt(2n ** 60n), b: Long.fromBigInt(2n ** 60n + 1n) })).toBe(true);
  });

  test('$toLong and $toDouble convert; a pipeline update stores the computed type', async () => {
    expect(typeOf(await project({ $toLong: new Int32(5) }))).toBe('Long');
    expect(typeOf(await project({ $toDouble: new Int32(5) }))).toBe('Double');
    const c = await fresh('pipeline_update', [{ _id: 1, n: new Int32(2147483647) }]);
    await c.updateOne({ _id: 1 }, [{ $set: { n: { $add: ['$n', 1] }, t: { $toLong: '$$NOW' } } }]);
    const doc = await one(c, 1);
    expect([typeOf(doc.n), String(doc.n)]).toEqual(['Long', '2147483648']);
    expect(typeOf(doc.t)).toBe('Long');
  });
});

describe('$add of a date and whole numbers of any type', () => {
  // ExpressionAdd::evaluate (src/mongo/db/pipeline/expression.cpp): with a date among the operands,
  // the date's milliseconds and the numbers are summed exactly (DoubleDoubleSummation) and the result
  // is a date; a sum outside the 64-bit range is Overflow (15) "date overflow in $add"
  // (error_codes.yml). A ttl above 2^31 - 1 ms reaches the server as a Double, which is why the
  // plugin's acquire needs the Double case.
  test('a Date plus an integral Double, a Long and an Int32 is a Date', async () => {
    const c = await fresh('add_date', [{ _id: 1, at: new Date(1_000) }]);
    const [row] = await c
      .aggregate([{ $project: { _id: 0, d: { $add: ['$at', new Double(3_456_000_000), Long.fromNumber(10), new Int32(5)] } } }])
      .toArray();
    expect(row.d).toEqual(new Date(1_000 + 3_456_000_000 + 15));
  });

  test('a sum beyond the 64-bit range is Overflow', async () => {
    const c = await fresh('add_date_overflow', [{ _id: 1, at: new Date(1_000) }]);
    const error = await expectServerError(c.aggregate([{ $project: { d: { $add: ['$at', Long.MAX_VALUE] } } }]).toArray(), 15);
    expect(error.codeName).toBe('Overflow');
    expect(error.message).toContain('date overflow in $add');
  });
});
