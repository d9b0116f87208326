/**
 * Numeric BSON edge cases where the emulator once answered wrongly (found by an independent attack
 * on the number-type work): infinities across Decimal128 and Double, an exact decimal/double
 * comparison, `$inc`/`$mul` no-ops by SafeNum::isIdentical, `$avg` of longs. A NotImplemented
 * refusal would fail these tests loudly; they never pass with a wrong value.
 *
 * Sources (mongodb/mongo, read via the library's read_file / find_string):
 *  [A] src/mongo/base/compare_numbers.h (commit e6efe1974acfc4c901872bdff38787dfa3f8e427):
 *      compareDecimals(lhs, rhs): `if (lhs.isGreater(rhs)) return 1; if (lhs.isLess(rhs)) return -1;
 *      if (lhs.isNaN()) ...; if (rhs.isNaN()) return 1; else // lhs is necessarily equal to rhs
 *      return 0;` — so Decimal128 +Infinity equals +Infinity (IEEE: neither greater nor less).
 *      compareDecimalToDouble(lhs, rhs): "convert decimal to double with round toward negative.
 *      Check for exact conversion": `decToDouble = lhs.toDouble(&sigFlags, kRoundTowardNegative);
 *      if (decToDouble == rhs) return inexact ? 1 : 0; else if (decToDouble < rhs) return -1; ...`
 *      — an exact comparison; Decimal128 Infinity converts exactly to the double Infinity (equal).
 *  [B] src/mongo/db/exec/document_value/value.cpp, Value::compare: NumberDecimal vs NumberDecimal
 *      -> compareDecimals; vs NumberDouble -> compareDecimalToDouble (the query matcher, $expr,
 *      $cmp, $max/$min accumulators and sort all use this order).
 *  [C] src/mongo/util/safe_num.cpp, SafeNum::isIdentical: same type and `_value.doubleVal ==
 *      rhs._value.doubleVal` for doubles (so -0.0 is identical to 0.0),
 *      `Decimal128(...).isEqual(...)` for decimals (value equality: -0 == 0, 1.0 == 1.00).
 *      src/mongo/db/update/arithmetic_node.cpp: `if (element->getValue().ok() &&
 *      valueToSet.isIdentical(originalValue)) return ModifyResult::kNoOp;` — the field keeps its
 *      original bytes and the update is not a modification.
 *  [D] src/mongo/db/pipeline/accumulator_avg.cpp, AccumulatorAvg::processInternal:
 *      `case NumberLong: // Avoid summation using double as that loses precision.
 *      _nonDecimalTotal.addLong(input.getLong());` and src/mongo/util/summation.cpp
 *      DoubleDoubleSummation::addLong: "Split 64-bit integers into two doubles, so the sum remains
 *      exact." getValue divides the (exact) total's double by the count.
 */
import { Decimal128, Double, Long, type Collection, type Db, type Document, type MongoClient } from 'mongodb';
import { openClient, uniqueDbName } from './support/server';

const dbName = uniqueDbName('attack_numeric');
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
// eslint-disable-next-line @typescript-eslint/no-explicit-any
type Loose = any;

async function fresh(name: string, docs: Loose[]): Promise<Collection<Loose>> {
  const c = db.collection<Loose>(name);
  await c.deleteMany({});
  if (docs.length) await c.insertMany(docs);
  return c;
}

const DEC_INF = Decimal128.fromString('Infinity');

describe('Decimal128 Infinity compares equal to itself and to the double Infinity [A][B]', () => {
  let c: Collection<Loose>;
  beforeAll(async () => {
    c = await fresh('dec_inf', [
      { _id: 'decInf', v: DEC_INF },
      { _id: 'dblInf', v: Infinity },
      { _id: 'decNegInf', v: Decimal128.fromString('-Infinity') },
      { _id: 'one', v: 1 },
    ]);
  });
  const ids = async (filter: Document): Promise<string[]> => (await c.find(filter).toArray()).map((d) => String(d._id)).sort();

  test('$lte Decimal128("Infinity") matches every number, the infinities included', async () => {
    expect(await ids({ v: { $lte: DEC_INF } })).toEqual(['dblInf', 'decInf', 'decNegInf', 'one']);
  });

  test('$lte of the double Infinity matches the Decimal128 Infinity', async () => {
    expect(await ids({ v: { $lte: Infinity } })).toEqual(['dblInf', 'decInf', 'decNegInf', 'one']);
  });

  test('$gte Decimal128("-Infinity") matches the Decimal128 -Infinity', async () => {
    expect(await ids({ v: { $gte: Decimal128.fromString('-Infinity') } })).toEqual(['dblInf', 'decInf', 'decNegInf', 'one']);
  });

  test('$expr $eq with a Decimal128 Infinity literal matches both infinities', async () => {
    expect(await ids({ $expr: { $eq: ['$v', { $literal: DEC_INF }] } })).toEqual(['dblInf', 'decInf']);
  });

  test('$cmp of Decimal128 Infinity with itself is 0', async () => {
    const [out] = await c.aggregate([{ $match: { _id: 'decInf' } }, { $project: { _id: 0, r: { $cmp: ['$v', { $literal: DEC_INF }] } } }]).toArray();
    expect(out.r).toBe(0);
  });

  test('$elemMatch with $gte/$lte Infinity matches an array holding Decimal128 Infinity', async () => {
    const e = await fresh('dec_inf_elem', [{ _id: 1, a: [DEC_INF] }]);
    expect((await e.find({ a: { $elemMatch: { $gte: Infinity, $lte: Infinity } } }).toArray()).map((d) => d._id)).toEqual([1]);
  });

  test('$max accumulator over values including the infinities is Infinity (not null)', async () => {
    const [out] = await c.aggregate([{ $group: { _id: null, m: { $max: '$v' } } }], raw).toArray();
    expect(out.m).not.toBeNull();
    expect(String(out.m)).toBe('Infinity');
  });
});

describe('Decimal128 vs double compares exactly (compareDecimalToDouble, round toward negative) [A][B]', () => {
  // The double 0.1 is exactly 0.1000000000000000055511151231257827021181583404541015625; the
  // 34-digit decimal below is strictly smaller (its round-toward-negative double is the double
  // below 0.1, so compareDecimalToDouble answers -1).
  const D34 = Decimal128.fromString('0.1000000000000000055511151231257827');

  test('the 34-digit decimal is not equal to the double 0.1, and is below it', async () => {
    const c = await fresh('dec_vs_dbl', [{ _id: 'dec', v: D34 }]);
    expect((await c.find({ v: 0.1 }).toArray()).map((d) => d._id)).toEqual([]);
    expect((await c.find({ v: { $lt: 0.1 } }).toArray()).map((d) => d._id)).toEqual(['dec']);
  });
});

describe('$inc/$mul whose result is identical by SafeNum::isIdentical is a no-op [C]', () => {
  test('$inc of -0.0 by 0 is a no-op: the field stays -0.0 and nothing is modified', async () => {
    const c = await fresh('inc_negzero', [{ _id: 1, v: -0 }]);
    const r = await c.updateOne({ _id: 1 }, { $inc: { v: 0 } } as never);
    expect(r.modifiedCount).toBe(0);
    const v = (await c.findOne({ _id: 1 }, raw))!.v as Double;
    expect(Object.is(v.valueOf(), -0)).toBe(true);
  });

  test('$mul of 0.0 by -1 is a no-op: the field stays +0.0', async () => {
    const c = await fresh('mul_zero', [{ _id: 1, v: new Double(0) }]);
    const r = await c.updateOne({ _id: 1 }, { $mul: { v: -1 } } as never);
    expect(r.modifiedCount).toBe(0);
    const v = (await c.findOne({ _id: 1 }, raw))!.v as Double;
    expect(Object.is(v.valueOf(), 0)).toBe(true);
  });

  test('$inc of Decimal128 -0 by 0 is a no-op (isEqual): the field stays -0', async () => {
    const c = await fresh('inc_dec_negzero', [{ _id: 1, v: Decimal128.fromString('-0') }]);
    const r = await c.updateOne({ _id: 1 }, { $inc: { v: 0 } } as never);
    expect(r.modifiedCount).toBe(0);
    expect(String((await c.findOne({ _id: 1 }, raw))!.v)).toBe('-0');
  });

  test('$inc of Decimal128 1.0 by Decimal128 0.00 is a no-op (isEqual): the field stays 1.0', async () => {
    const c = await fresh('inc_dec_cohort', [{ _id: 1, v: Decimal128.fromString('1.0') }]);
    const r = await c.updateOne({ _id: 1 }, { $inc: { v: Decimal128.fromString('0.00') } } as never);
    expect(r.modifiedCount).toBe(0);
    expect(String((await c.findOne({ _id: 1 }, raw))!.v)).toBe('1.0');
  });
});

describe('$avg sums longs exactly [D]', () => {
  test('$avg of NumberLong(2^53+1) and NumberLong(1) is 2^52+1', async () => {
    const c = await fresh('avg_long', [
      { _id: 1, n: Long.fromBigInt(2n ** 53n + 1n) },
      { _id: 2, n: Long.fromNumber(1) },
    ]);
    const [out] = await c.aggregate([{ $group: { _id: null, m: { $avg: '$n' } } }]).toArray();
    // exact total 2^53 + 2 is a double; divided by 2: 2^52 + 1.
    expect(out.m).toBe(2 ** 52 + 1);
  });
});
