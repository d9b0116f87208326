/**
 * Aggregation operators over BSON numbers (numbers.ts): mingo computes with JavaScript numbers, so
 * every operator whose result's BSON type or value depends on the operands' numeric types is
 * either computed here or refused; the others are guarded so that a Long, Decimal128 or integral
 * Double never reaches code that would treat it as an opaque object.
 *
 * Computed here (src/mongo/db/pipeline/expression.cpp unless noted):
 *  - `$add`: ExpressionAdd::evaluate (re-read): a DoubleDoubleSummation of the operands
 *    (numbers.ts sumNumbers, src/mongo/util/summation.h), the widest operand type, ints via
 *    createIntOrLong, a total beyond the long range a double; a Decimal128 operand is refused (the
 *    digits of mongod's decimal sum differ between releases); a date plus integers is a date; the
 *    first null/missing operand gives null.
 *  - `$subtract`: ExpressionSubtract, numbers as `$add` with the second negated; date minus date is
 *    the difference in milliseconds as a long; date minus an integer is a date.
 *  - `$multiply`: ExpressionMultiply::evaluate (re-read; numbers.ts multiplyNumbers).
 *    jstests/aggregation/expressions/arith_overflow.js: a long overflow in $add, $subtract and
 *    $multiply gives a double.
 *  - `$sum`, `$avg`, `$min`, `$max` (expression and accumulator): AccumulatorSum (accumulator_sum.cpp,
 *    re-read: non-numbers ignored, a constant argument summed plainly), AccumulatorAvg
 *    (accumulator_avg.cpp, re-read: getDouble() / count, null when nothing was numeric),
 *    AccumulatorMinMax (BSON order, null/missing ignored; bson-order.ts); the expression forms as
 *    evaluateAccumulator (accumulator_helpers.h, re-read).
 *  - `$abs`, `$ceil`, `$floor`, `$trunc` (one argument): the operand's type kept (an Int32 stays
 *    Int32 except abs(INT32_MIN), which is a long: ExpressionAbs).
 *  - `$mod`: ExpressionMod, ints stay int, a long makes long, a double makes double (fmod, the
 *    sign of the dividend).
 *  - `$divide`, `$exp`, `$ln`, `$log`, `$log10`, `$sqrt` and the trigonometric operators: a double for
 *    non-decimal operands (coerceToDouble).
 *  - `$toInt`, `$toLong`, `$toDouble` (ExpressionConvert: a double truncated toward zero, a date's
 *    milliseconds for long/double, booleans 0/1), `$type` (manual "$type (aggregation)": "double",
 *    "int", "long", "decimal"), `$isNumber`.
 *  - `$and`, `$or`, `$not`, `$cond`, `$switch`, `$filter`: Value::coerceToBool (every number but
 *    zero is true; query-operators.ts bsonTruthy) — mingo would take a wrapped zero for true.
 *  - `$pow`: ExpressionPow::evaluate (below).
 * Refused (NotImplemented) rather than guessed: Decimal128 division and conversions, division by
 * zero, `$round`/`$trunc` with a place, `$dateDiff`, `$toDecimal`, `$convert` to a numeric type,
 * string-to-number conversions, `$toHashedIndexKey`.
 * Guarded: every other operator runs in mingo only when its evaluated arguments hold no number
 * wrapper; `$group` keys, `$sort` (done here in BSON order, writes.ts sortDocs) and the stages that
 * compare values ($lookup, $bucket, ...) likewise.
 */
import type { Document } from 'bson';
import { compareValues } from './bson-order';
import { MongoCommandError, unsupported } from './errors';
import { containsWrapper, dbl, decAdd, decNeg, DoubleDoubleSummation, fitsLong, intOrLong, isNumeric, long, multiplyNumbers, numKind, sumNumbers, toBigInt, toDec, toNumber } from './numbers';
import { bsonTruthy } from './query-operators';
import { sortDocs } from './sort';
import { isPlainObject } from './values';

type Options = Record<string, unknown>;
type Ev = (obj: unknown, expr: unknown, options: Options) => unknown;
type Acc = (coll: unknown[], expr: unknown, options: Options) => unknown;
type Stage = (coll: LazyIter, expr: unknown, options: Options) => LazyIter;
interface LazyIter {
  map(f: (x: unknown) => unknown): LazyIter;
  transform(f: (xs: unknown[]) => unknown): LazyIter;
}

/* eslint-disable @typescript-eslint/no-require-imports */
const { evalExpr } = require('mingo/core') as { evalExpr: (obj: unknown, expr: unknown, options: Options) => unknown };
// ComputeOptions is not in mingo's package exports (see mingo-context.ts).
const { ComputeOptions } = require(require('node:path').join(require('node:path').dirname(require.resolve('mingo')), 'core', '_internal.js')) as {
  ComputeOptions: { init(o: Options): { update(locals: Document): Options } };
};
const { Lazy } = require('mingo/lazy') as { Lazy: (xs: unknown[]) => LazyIter };
/* eslint-enable @typescript-eslint/no-require-imports */

const nil = (v: unknown): boolean => v === null || v === undefined;

function args(obj: unknown, expr: unknown, options: Options): unknown[] {
  const v = evalExpr(obj, expr, options);
  return Array.isArray(expr) ? (v as unknown[]) : [v];
}

/** A mingo operator run only when no number wrapper is among its evaluated arguments. */
function guarded(name: string, original: Ev): Ev {
  return (obj, expr, options) => {
    if (containsWrapper(evalExpr(obj, expr, options))) throw unsupported(`${name} with Int64, Decimal128 or integral Double operands`);
    return original(obj, expr, options);
  };
}

const isDate = (v: unknown): v is Date => v instanceof Date;

/** The values as literals, for handing evaluated values back to a mingo operator. */
function literals(vals: unknown[], expr: unknown): unknown {
  const lit = vals.map((v) => ({ $literal: v }));
  return Array.isArray(expr) ? lit : lit[0];
}

function integral(v: unknown): boolean {
  const k = numKind(v);
  return k === 'int' || k === 'long';
}

/**
 * ExpressionAdd::evaluate: the operands are taken in order and the first null or missing one answers
 * null at once (an earlier non-number, non-date is mongod's error 16554, refused here); one date
 * plus numbers is a date (a second date is mongod's 16612, refused here).
 */
const $add: Ev = (obj, expr, options) => {
  const vals = args(obj, expr, options);
  const nums: unknown[] = [];
  let date: Date | undefined;
  for (const v of vals) {
    if (isNumeric(v)) nums.push(v);
    else if (isDate(v) && date === undefined) date = v;
    else if (nil(v)) return null;
    else throw unsupported(`$add of ${isDate(v) ? 'a second date' : typeof v}`);
  }
  if (date === undefined) return sumNumbers(nums);
  // A date plus whole numbers (Int32, Int64, or a Double holding an integer, such as a ttl above
  // 2^31 ms, which the driver sends as a double): the haveDate branch sums the date's milliseconds
  // and the numbers in a DoubleDoubleSummation, exact for these, and answers a date, or Overflow
  // (15, error_codes.yml) "date overflow in $add" when the sum does not fit a long. A fractional
  // double or a Decimal128 is still refused: how getLong() rounds them is not traced here.
  const whole = (v: unknown) => integral(v) || (numKind(v) === 'double' && Number.isInteger(toNumber(v)));
  if (!nums.every(whole)) throw unsupported('$add of a date and a fractional double or a Decimal128');
  const ms = nums.reduce((s: bigint, v) => s + (integral(v) ? toBigInt(v) : BigInt(toNumber(v))), BigInt(date.getTime()));
  if (!fitsLong(ms)) throw new MongoCommandError(15, 'date overflow in $add', {}, 'Overflow');
  if (ms < -8640000000000000n || ms > 8640000000000000n) throw unsupported('$add giving a date outside the JavaScript Date range');
  return new Date(Number(ms));
};

const $subtract: Ev = (obj, expr, options) => {
  const vals = args(obj, expr, options);
  if (vals.length !== 2) throw unsupported('$subtract without exactly two arguments');
  const [a, b] = vals;
  if (nil(a) || nil(b)) return null;
  if (isNumeric(a) && isNumeric(b)) {
    const ka = numKind(a)!;
    const kb = numKind(b)!;
    if (ka === 'decimal' || kb === 'decimal') {
      // left.subtract(right) of coerceToDecimal values (value.cpp: Decimal128(int32/int64) exact,
      // Decimal128(double) with the header's default rounding, not re-read): a double operand is refused.
      if (ka === 'double' || kb === 'double') throw unsupported('$subtract of a Decimal128 and a double');
      return decAdd(toDec(a), decNeg(toDec(b)));
    }
    if (ka === 'double' || kb === 'double') return dbl(toNumber(a) - toNumber(b));
    const r = toBigInt(a) - toBigInt(b);
    if (ka === 'int' && kb === 'int') return intOrLong(r);
    return fitsLong(r) ? long(r) : dbl(Number(r));
  }
  if (isDate(a) && isDate(b)) return long(BigInt(a.getTime()) - BigInt(b.getTime()));
  if (isDate(a) && integral(b)) return new Date(Number(BigInt(a.getTime()) - toBigInt(b)));
  throw unsupported(`$subtract of ${[a, b].map((v) => numKind(v) ?? (isDate(v) ? 'date' : typeof v)).join(', ')}`);
};

/** ExpressionMultiply::evaluate: operands in order, the first null or missing one answers null (an earlier non-number is mongod's 16555, refused here). */
const $multiply: Ev = (obj, expr, options) => {
  const vals = args(obj, expr, options);
  for (const v of vals) {
    if (nil(v)) return null;
    if (!isNumeric(v)) throw unsupported('$multiply of a non-number');
  }
  return multiplyNumbers(vals);
};

/** Operators whose result is a double for non-decimal operands (coerceToDouble). */
function toDouble(name: string, original: Ev): Ev {
  return (obj, expr, options) => {
    const vals = args(obj, expr, options);
    if (vals.some(nil)) return original(obj, expr, options);
    if (vals.some((v) => numKind(v) === 'decimal')) throw unsupported(`${name} with Decimal128 operands`);
    if (name === '$divide' && vals.length === 2 && isNumeric(vals[1]) && toNumber(vals[1]) === 0) throw unsupported('$divide by zero');
    const plain = vals.map((v) => (isNumeric(v) ? toNumber(v) : v));
    if (plain.some((v) => v !== null && typeof v === 'object')) throw unsupported(`${name} of a non-number`);
    const r = original(obj, literals(plain, expr), options);
    return typeof r === 'number' ? dbl(r) : r;
  };
}

/** $abs, $ceil, $floor, $trunc with one argument: the operand's type is kept. */
function sameType(name: string, f: (x: number) => number): Ev {
  return (obj, expr, options) => {
    const vals = args(obj, expr, options);
    if (vals.length !== 1) throw unsupported(`${name} with more than one argument`);
    const v = vals[0];
    if (nil(v)) return null;
    const k = numKind(v);
    if (!k || k === 'decimal') throw unsupported(`${name} of a ${k ?? typeof v}`);
    if (k === 'double') return dbl(f(toNumber(v)));
    const b = toBigInt(v);
    const r = name === '$abs' && b < 0n ? -b : b;
    if (k === 'int') return intOrLong(r);
    if (!fitsLong(r)) throw unsupported('$abs of the smallest long');
    return long(r);
  };
}

const $mod: Ev = (obj, expr, options) => {
  const vals = args(obj, expr, options);
  if (vals.length !== 2) throw unsupported('$mod without exactly two arguments');
  const [a, b] = vals;
  if (nil(a) || nil(b)) return null;
  const ka = numKind(a);
  const kb = numKind(b);
  if (!ka || !kb || ka === 'decimal' || kb === 'decimal') throw unsupported('$mod of a non-number or a Decimal128');
  if (toNumber(b) === 0) throw unsupported('$mod by zero');
  if (ka === 'double' || kb === 'double') return dbl(toNumber(a) % toNumber(b));
  const r = toBigInt(a) % toBigInt(b);
  return ka === 'int' && kb === 'int' ? intOrLong(r) : long(r);
};

function convertTo(target: 'int' | 'long' | 'double'): Ev {
  return (obj, expr, options) => {
    const [v] = args(obj, expr, options);
    if (nil(v)) return null;
    const k = numKind(v);
    let b: bigint | undefined;
    if (typeof v === 'boolean') b = v ? 1n : 0n;
    else if (isDate(v) && target !== 'int') b = BigInt(v.getTime());
    else if (k === 'int' || k === 'long') b = toBigInt(v);
    else if (k === 'double') {
      const x = toNumber(v);
      if (target === 'double') return dbl(x);
      if (!Number.isFinite(x) || Math.abs(x) >= 2 ** 63) throw unsupported(`$to${target === 'int' ? 'Int' : 'Long'} of ${x}`);
      b = BigInt(Math.trunc(x));
    } else throw unsupported(`converting a ${k ?? (isDate(v) ? 'date' : typeof v)} to ${target}`);
    if (target === 'double') return dbl(Number(b));
    if (target === 'long') return long(b);
    if (b < -2147483648n || b > 2147483647n) throw unsupported(`$toInt of ${b} (out of the Int32 range)`);
    return Number(b);
  };
}

/**
 * ExpressionPow::evaluate: null for a null operand; 28764 for a zero base and a negative exponent; a
 * double when either operand is a double; integers by repeated multiplication when the result is
 * representable as a long (exponent 0..63 within kBaseLimits, or a base of -1, 0, 1 otherwise — the
 * loop then runs `exp` times, not at all for a negative one), a long when either operand is a long,
 * else createIntOrLong; not representable: std::pow as a double.
 */
const $pow: Ev = (obj, expr, options) => {
  const vals = args(obj, expr, options);
  if (vals.length !== 2) throw unsupported('$pow without exactly two arguments');
  const [base, exp] = vals;
  if (nil(base) || nil(exp)) return null;
  const kb = numKind(base);
  const ke = numKind(exp);
  if (!kb || !ke || kb === 'decimal' || ke === 'decimal') throw unsupported('$pow of a non-number or a Decimal128');
  if (toNumber(base) === 0 && toNumber(exp) < 0) throw new MongoCommandError(28764, '$pow cannot take a base of 0 and a negative exponent');
  if (kb === 'double' || ke === 'double') return dbl(Math.pow(toNumber(base), toNumber(exp)));
  const b = toBigInt(base);
  const e = toBigInt(exp);
  let result: bigint;
  if (e < 0n || e > 63n) {
    if (b < -1n || b > 1n) return dbl(Math.pow(Number(b), Number(e)));
    result = 1n;
    for (let i = 0n; i < e; i++) result *= b;
  } else {
    result = b ** e;
    if (!fitsLong(result)) return dbl(Math.pow(Number(b), Number(e)));
  }
  return kb === 'long' || ke === 'long' ? long(result) : intOrLong(result);
};

const TYPE_NAMES = { int: 'int', long: 'long', double: 'double', decimal: 'decimal' } as const;

function typeOp(original: Ev): Ev {
  return (obj, expr, options) => {
    const [v] = args(obj, Array.isArray(expr) ? expr : [expr], options);
    const k = numKind(v);
    return k ? TYPE_NAMES[k] : original(obj, expr, options);
  };
}

function isNumberOp(original: Ev): Ev {
  return (obj, expr, options) => {
    const [v] = args(obj, Array.isArray(expr) ? expr : [expr], options);
    return isNumeric(v) ? true : original(obj, expr, options);
  };
}

// Truthiness.
const $and: Ev = (obj, expr, options) => (Array.isArray(expr) ? expr : [expr]).every((e) => bsonTruthy(evalExpr(obj, e, options)));
const $or: Ev = (obj, expr, options) => (Array.isArray(expr) ? expr : [expr]).some((e) => bsonTruthy(evalExpr(obj, e, options)));
const $not: Ev = (obj, expr, options) => !bsonTruthy(evalExpr(obj, Array.isArray(expr) ? expr[0] : expr, options));
const $cond: Ev = (obj, expr, options) => {
  let parts: unknown[];
  if (Array.isArray(expr)) parts = expr;
  else if (isPlainObject(expr)) parts = [expr.if, expr.then, expr.else];
  else throw unsupported('$cond without an array or an if/then/else object');
  if (parts.length !== 3) throw unsupported('$cond without three arguments');
  return evalExpr(obj, bsonTruthy(evalExpr(obj, parts[0], options)) ? parts[1] : parts[2], options);
};
const $switch: Ev = (obj, expr, options) => {
  if (!isPlainObject(expr) || !Array.isArray(expr.branches)) throw unsupported('$switch without branches');
  for (const b of expr.branches as Document[]) if (bsonTruthy(evalExpr(obj, b.case, options))) return evalExpr(obj, b.then, options);
  if (!('default' in expr)) throw unsupported('$switch with no matching branch and no default');
  return evalExpr(obj, expr.default, options);
};
function filterOp(original: Ev): Ev {
  return (obj, expr, options) => {
    if (!isPlainObject(expr)) return original(obj, expr, options);
    const limit = expr.limit === undefined ? undefined : evalExpr(obj, expr.limit, options);
    return original(obj, { ...expr, cond: { $cond: [expr.cond, true, false] }, ...(limit === undefined ? {} : { limit: isNumeric(limit) ? toNumber(limit) : limit }) }, options);
  };
}

// Accumulators ($sum/$avg/$min/$max also serve the expression forms: mingo calls them with the
// evaluated argument list and a null expression).
/** Passed as the expression by fromAccumulator: the values are already the accumulator's inputs. */
const EVALUATED = Symbol('evaluated');

function values(coll: unknown[], expr: unknown, options: Options): unknown[] {
  if (expr === EVALUATED) return coll;
  if (expr === null || expr === undefined) return coll.flatMap((v) => (Array.isArray(v) ? v : [v]));
  const copts = ComputeOptions.init(options);
  return coll.map((root) => evalExpr(root, expr, copts.update({ root })));
}

/**
 * AccumulatorSum (accumulator_sum.cpp). A `$group` `$sum` whose argument is a constant Int32, Int64
 * or Double (AccumulatorSum::getConstantArgument) keeps a plain total (_processInternalConstant: int
 * overflows to long, long to double, then plain double additions), one addition per document; any
 * other argument is summed as sumNumbers does (the non-constant state). mongod also folds constant
 * expressions (`{$add: [1, 0.5]}`) into constants before this choice: an argument that is neither a
 * literal number nor a field path is answered only when every value is an Int32 or Int64 and the total
 * fits a long, where both states give the same result.
 */
const $sum: Acc = (coll, expr, options) => {
  if (isNumeric(expr) && numKind(expr) !== 'decimal') return constantSum(expr, coll.length);
  const nums = values(coll, expr, options).filter(isNumeric);
  const fieldPath = typeof expr === 'string' && expr.startsWith('$') && !expr.startsWith('$$');
  if (!fieldPath && expr !== null && expr !== undefined && expr !== EVALUATED) {
    const total = nums.every(integral) ? nums.reduce((s: bigint, v) => s + toBigInt(v), 0n) : undefined;
    if (total === undefined || !fitsLong(total)) throw unsupported('$sum of a computed expression: over doubles, Decimal128 or beyond the long range (mongod may fold it into a constant, summed differently)');
  }
  return sumNumbers(nums);
};

/** AccumulatorSum::_processInternalConstant, `count` times, then getValue of the constant state. */
function constantSum(c: unknown, count: number): unknown {
  let type = numKind(c)!;
  let total: bigint | number = type === 'double' ? 0 : 0n;
  for (let i = 0; i < count; i++) {
    if (type === 'int' || type === 'long') {
      const r = (total as bigint) + toBigInt(c);
      if (type === 'int' && r >= -2147483648n && r <= 2147483647n) {
        total = r;
        continue;
      }
      if (fitsLong(r)) {
        type = 'long';
        total = r;
        continue;
      }
      type = 'double';
      total = Number(total as bigint);
    }
    total = (total as number) + toNumber(c);
  }
  if (type === 'int') return Number(total);
  if (type === 'long') return long(total as bigint);
  return dbl(total as number);
}

/** AccumulatorAvg (accumulator_avg.cpp): numeric values only; nonDecimalTotal.getDouble() / count; null for none. */
const $avg: Acc = (coll, expr, options) => {
  const nums = values(coll, expr, options).filter(isNumeric);
  if (!nums.length) return null;
  if (nums.some((v) => numKind(v) === 'decimal')) throw unsupported('$avg of Decimal128 values');
  const dd = new DoubleDoubleSummation();
  for (const v of nums) if (numKind(v) === 'long') dd.addLong(toBigInt(v));
  else dd.addDouble(toNumber(v));
  return dbl(dd.getDouble() / nums.length);
};

/**
 * The expression forms `{$sum|$avg|$min|$max: ...}` (ExpressionFromAccumulator, evaluateAccumulator in
 * src/mongo/db/pipeline/accumulator_helpers.h): one argument that is an array gives its elements,
 * any other single argument itself; several arguments are taken as they are (an array among them is
 * not a number and is ignored). Always the non-constant accumulator state.
 */
function fromAccumulator(acc: Acc): Ev {
  return (obj, expr, options) => {
    // mingo's $group evaluates `{ $sum: ... }` against the group's documents (an array; a document
    // never is one): that is the accumulator.
    if (Array.isArray(obj)) return acc(obj, expr, options);
    const children = Array.isArray(expr) ? expr : [expr];
    let vals: unknown[];
    if (children.length === 1) {
      const v = evalExpr(obj, children[0], options);
      vals = Array.isArray(v) ? v : [v];
    } else vals = children.map((c) => evalExpr(obj, c, options));
    return acc(vals, EVALUATED, options);
  };
}
function minMax(sign: 1 | -1): Acc {
  return (coll, expr, options) => {
    let best: unknown = null;
    for (const v of values(coll, expr, options)) {
      if (nil(v)) continue;
      if (best === null || compareValues(v, best) * sign > 0) best = v;
    }
    return best;
  };
}
function guardedAcc(name: string, original: Acc, doubleResult: boolean): Acc {
  return (coll, expr, options) => {
    if (containsWrapper(values(coll, expr, options))) throw unsupported(`the ${name} accumulator over Int64, Decimal128 or integral Double values`);
    const r = original(coll, expr, options);
    return doubleResult && typeof r === 'number' ? dbl(r) : r;
  };
}

// Stages.
function refuseWrappers(name: string, original: Stage): Stage {
  return (coll, expr, options) => {
    if (containsWrapper(expr)) throw unsupported(`${name} with Int64, Decimal128 or integral Double values in its specification`);
    const checked = coll.map((doc) => {
      if (containsWrapper(doc)) throw unsupported(`${name} over documents holding Int64, Decimal128 or integral Double values`);
      return doc;
    });
    return original(checked, expr, options);
  };
}
function groupStage(original: Stage): Stage {
  return (coll, expr, options) => {
    const idExpr = isPlainObject(expr) ? expr._id : undefined;
    const copts = ComputeOptions.init(options);
    const checked = coll.map((doc) => {
      if (containsWrapper(evalExpr(doc, idExpr, copts.update({ root: doc })))) throw unsupported('$group with a key holding Int64, Decimal128 or integral Double values');
      return doc;
    });
    return original(checked, expr, options);
  };
}
const sortStage: Stage = (coll, expr) => {
  if (!isPlainObject(expr)) throw unsupported('$sort without a document');
  return coll.transform((docs) => Lazy(sortDocs(docs as Document[], expr)));
};
/** `$limit`/`$skip` with a count of any numeric type. */
function countStage(original: Stage): Stage {
  return (coll, expr, options) => original(coll, isNumeric(expr) ? toNumber(expr) : expr, options);
}

const SAFE_EXPRESSIONS = new Set([
  '$literal', '$let', '$map', '$reduce', '$ifNull', '$getField', '$setField', '$unsetField', '$mergeObjects', '$objectToArray',
  '$arrayToObject', '$concatArrays', '$isArray', '$reverseArray', '$first', '$last', '$size',
  // overridden elsewhere (mingo-context.ts comparisons)
  '$eq', '$ne', '$lt', '$lte', '$gt', '$gte', '$cmp',
]);
const DOUBLE_RESULT = ['$divide', '$exp', '$ln', '$log', '$log10', '$sqrt', '$acos', '$acosh', '$asin', '$asinh', '$atan', '$atan2', '$atanh', '$cos', '$cosh', '$sin', '$sinh', '$tan', '$tanh', '$degreesToRadians', '$radiansToDegrees', '$sigmoid'];
const REFUSED_EXPRESSIONS = ['$round', '$dateDiff', '$toDecimal', '$toHashedIndexKey'];

function refused(name: string): Ev {
  return () => {
    throw unsupported(`the ${name} expression (its result's BSON numeric type is not reproduced)`);
  };
}

function convertOp(original: Ev): Ev {
  return (obj, expr, options) => {
    const to = isPlainObject(expr) ? evalExpr(obj, expr.to, options) : undefined;
    if (isNumeric(to) || ['double', 'int', 'long', 'decimal'].includes(to as string)) throw unsupported('$convert to a numeric type');
    return guarded('$convert', original)(obj, expr, options);
  };
}

function truncOp(): Ev {
  const one = sameType('$trunc', Math.trunc);
  return (obj, expr, options) => {
    if (Array.isArray(expr) && expr.length > 1) throw unsupported('$trunc with a place');
    return one(obj, expr, options);
  };
}

/** The expression operator table with the overrides above. */
export function numericExpressionOps(ops: Record<string, Ev>): Record<string, Ev> {
  const out: Record<string, Ev> = {};
  for (const [name, op] of Object.entries(ops)) out[name] = SAFE_EXPRESSIONS.has(name) ? op : guarded(name, op);
  for (const name of DOUBLE_RESULT) if (ops[name]) out[name] = toDouble(name, ops[name]);
  for (const name of REFUSED_EXPRESSIONS) out[name] = refused(name);
  return {
    ...out,
    $add,
    $subtract,
    $multiply,
    $mod,
    $pow,
    $abs: sameType('$abs', Math.abs),
    $ceil: sameType('$ceil', Math.ceil),
    $floor: sameType('$floor', Math.floor),
    $trunc: truncOp(),
    $toInt: convertTo('int'),
    $toLong: convertTo('long'),
    $toDouble: convertTo('double'),
    $convert: convertOp(ops.$convert),
    $type: typeOp(ops.$type),
    $isNumber: isNumberOp(ops.$isNumber),
    $and,
    $or,
    $not,
    $cond,
    $switch,
    $filter: filterOp(ops.$filter),
    $sum: fromAccumulator($sum),
    $avg: fromAccumulator($avg),
    $min: fromAccumulator(minMax(-1)),
    $max: fromAccumulator(minMax(1)),
  };
}

const PASS_ACCUMULATORS = new Set(['$first', '$last', '$push', '$count', '$mergeObjects']);
const DOUBLE_ACCUMULATORS = new Set(['$stdDevPop', '$stdDevSamp', '$median', '$percentile', '$covariancePop', '$covarianceSamp']);

export function numericAccumulatorOps(ops: Record<string, Acc>): Record<string, Acc> {
  const out: Record<string, Acc> = {};
  for (const [name, op] of Object.entries(ops)) out[name] = PASS_ACCUMULATORS.has(name) ? op : guardedAcc(name, op, DOUBLE_ACCUMULATORS.has(name));
  return { ...out, $sum, $avg, $min: minMax(-1), $max: minMax(1) };
}

const SAFE_STAGES = new Set(['$match', '$project', '$addFields', '$set', '$unset', '$replaceRoot', '$replaceWith', '$unwind', '$count', '$facet', '$sample', '$redact', '$unionWith', '$documents', '$out', '$merge']);

export function numericPipelineOps(ops: Record<string, Stage>): Record<string, Stage> {
  const out: Record<string, Stage> = {};
  for (const [name, op] of Object.entries(ops)) out[name] = SAFE_STAGES.has(name) ? op : refuseWrappers(name, op);
  return { ...out, $group: groupStage(ops.$group), $sort: sortStage, $limit: countStage(ops.$limit), $skip: countStage(ops.$skip) };
}
