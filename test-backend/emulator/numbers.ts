/**
 * BSON numbers: Int32, Int64 (Long), Double and Decimal128, kept apart as mongod keeps them.
 *
 * Representation inside the emulator (chosen so that the common values stay plain JavaScript
 * numbers, which mingo and the rest of the code handle natively, and so that bson's serializer
 * writes every value back with its own type):
 *  - a plain `number` that is integral, in the int32 range and not -0 is an Int32;
 *  - any other plain `number` (fractional, -0, NaN, ±Infinity, integral beyond int32) is a Double;
 *  - a `Double` wrapper holds a Double whose value would read as an Int32 if it were plain (1.0);
 *  - `Long` and `Decimal128` wrappers hold Int64 and Decimal128 values.
 * bson's serializer writes a plain number exactly so (an integral int32 as Int32, anything else as
 * Double), so replies need no conversion; requests are decoded without promotion and normalised
 * into this form (`normalizeIn`).
 *
 * Comparison is exact across types (Value::compare in src/mongo/db/exec/document_value/value.cpp
 * compares numbers by value with the functions of src/mongo/base/compare_numbers.h; NaN is below
 * every other number and equal to itself; a Decimal128 meets a double exactly), using bigint
 * rationals where doubles would round. Arithmetic follows SafeNum (src/mongo/util/safe_num.cpp:
 * int + int stays int or becomes long, long overflow is invalid, any decimal makes decimal, any other
 * double makes double, a double converted to decimal is rounded to 15 digits) for update operators
 * and ExpressionAdd / AccumulatorSum (src/mongo/db/pipeline/expression.cpp, accumulator_sum.cpp:
 * widest type, int results via createIntOrLong, a long overflow becomes double) for aggregation.
 * Decimal128 arithmetic is exact to 34 digits with round-half-even (IEEE 754-2008, as the Intel
 * library mongod uses); anything beyond (special values, exponents out of range, division) is
 * refused rather than approximated.
 */
import { Decimal128, Double, Int32, Long } from 'bson';
import { unsupported } from './errors';

type BsonTyped = { _bsontype?: string };

export type NumKind = 'int' | 'long' | 'double' | 'decimal';

const INT32_MIN = -2147483648;
const INT32_MAX = 2147483647;
const LONG_MIN = -(2n ** 63n);
const LONG_MAX = 2n ** 63n - 1n;

function plainIsInt(v: number): boolean {
  return Number.isInteger(v) && v >= INT32_MIN && v <= INT32_MAX && !Object.is(v, -0);
}

/** The BSON numeric type of a value in the emulator's representation, or undefined. */
export function numKind(v: unknown): NumKind | undefined {
  if (typeof v === 'number') return plainIsInt(v) ? 'int' : 'double';
  if (v === null || typeof v !== 'object') return undefined;
  switch ((v as BsonTyped)._bsontype) {
    case 'Double':
      return 'double';
    case 'Long':
      return 'long';
    case 'Decimal128':
      return 'decimal';
    case 'Int32':
      return 'int';
    default:
      return undefined;
  }
}

export function isNumeric(v: unknown): boolean {
  return numKind(v) !== undefined;
}

/** True for the wrappers that plain numbers cannot stand for (integral Double, Long, Decimal128). */
export function isNumberWrapper(v: unknown): boolean {
  const t = (v as BsonTyped | null)?._bsontype;
  return t === 'Double' || t === 'Long' || t === 'Decimal128' || t === 'Int32';
}

/** A Double with value `x`, in the emulator's representation. */
export function dbl(x: number): number | Double {
  return plainIsInt(x) ? new Double(x) : x;
}

/** An Int64 (Long) wrapper. */
export function long(b: bigint): Long {
  return Long.fromBigInt(b);
}

/** Value::createIntOrLong: an int when it fits, else a long. */
export function intOrLong(b: bigint): number | Long {
  return b >= BigInt(INT32_MIN) && b <= BigInt(INT32_MAX) ? Number(b) : long(b);
}

export function fitsLong(b: bigint): boolean {
  return b >= LONG_MIN && b <= LONG_MAX;
}

/** The numeric value as a JS number (rounded for longs beyond 2^53 and decimals). */
export function toNumber(v: unknown): number {
  if (typeof v === 'number') return v;
  const t = (v as BsonTyped | null)?._bsontype;
  if (t === 'Long') return Number((v as Long).toBigInt());
  if (t === 'Decimal128') return Number((v as Decimal128).toString());
  if (t === 'Double' || t === 'Int32') return (v as Double).valueOf();
  if (typeof v === 'bigint') return Number(v);
  return NaN;
}

/** The exact integer of an int or long. */
export function toBigInt(v: unknown): bigint {
  if (typeof v === 'number') return BigInt(v);
  if ((v as BsonTyped)._bsontype === 'Long') return (v as Long).toBigInt();
  if ((v as BsonTyped)._bsontype === 'Int32') return BigInt((v as Int32).valueOf());
  if (typeof v === 'bigint') return v;
  throw new Error('toBigInt: not an integer type');
}

/**
 * Normalises a decoded request (bson `promoteValues: false`) into the representation above, in
 * place: Int32 wrappers become plain numbers, Doubles become plain unless they would read as Int32.
 * bigints (not produced by the decoder) become Longs.
 */
export function normalizeIn<T>(v: T): T {
  return norm(v) as T;
}

function norm(v: unknown): unknown {
  if (v === null || typeof v !== 'object') return typeof v === 'bigint' ? long(v) : v;
  if (Array.isArray(v)) {
    for (let i = 0; i < v.length; i++) {
      const x = v[i];
      if (x !== null && typeof x === 'object') v[i] = norm(x);
      else if (typeof x === 'bigint') v[i] = long(x);
    }
    return v;
  }
  const t = (v as BsonTyped)._bsontype;
  if (t === 'Int32') return (v as Int32).valueOf();
  if (t === 'Double') return dbl((v as Double).valueOf());
  if (t !== undefined) {
    if (t === 'DBRef') {
      const ref = v as unknown as { oid: unknown; fields?: Record<string, unknown> };
      ref.oid = norm(ref.oid);
      if (ref.fields) norm(ref.fields);
    }
    return v;
  }
  if (v instanceof Date || v instanceof RegExp || ArrayBuffer.isView(v)) return v;
  const o = v as Record<string, unknown>;
  for (const k of Object.keys(o)) {
    const x = o[k];
    if (x !== null && typeof x === 'object') o[k] = norm(x);
    else if (typeof x === 'bigint') o[k] = long(x);
  }
  return v;
}

/** Whether a value contains (at any depth) a Long, Decimal128 or Double wrapper. */
export function containsWrapper(v: unknown): boolean {
  if (v === null || typeof v !== 'object') return false;
  if (Array.isArray(v)) return v.some(containsWrapper);
  if (isNumberWrapper(v)) return true;
  if ((v as BsonTyped)._bsontype !== undefined || v instanceof Date || v instanceof RegExp || ArrayBuffer.isView(v)) return false;
  for (const k of Object.keys(v)) if (containsWrapper((v as Record<string, unknown>)[k])) return true;
  return false;
}

// ---------------------------------------------------------------------------------------------
// Decimal128 values as (sign, coefficient, exponent)

export interface Dec {
  special?: 'nan' | 'inf';
  neg: boolean;
  coef: bigint;
  exp: number;
}

export function parseDec(d: Decimal128 | string): Dec {
  const s = typeof d === 'string' ? d : d.toString();
  if (s === 'NaN' || s === '-NaN') return { special: 'nan', neg: false, coef: 0n, exp: 0 };
  if (s === 'Infinity' || s === '-Infinity') return { special: 'inf', neg: s.startsWith('-'), coef: 0n, exp: 0 };
  const m = /^(-)?(\d+)(?:\.(\d+))?(?:E([+-]?\d+))?$/i.exec(s);
  if (!m) throw new Error(`unparsable decimal ${s}`);
  const frac = m[3] ?? '';
  return { neg: !!m[1], coef: BigInt(m[2] + frac), exp: Number(m[4] ?? 0) - frac.length };
}

function digits(b: bigint): number {
  return b === 0n ? 1 : (b < 0n ? -b : b).toString().length;
}

/** Rounds to 34 digits (half to even) and builds the Decimal128; refuses what would need clamping. */
export function makeDec(neg: boolean, coef: bigint, exp: number): Decimal128 {
  let c = coef;
  let e = exp;
  const n = digits(c);
  if (n > 34) {
    const drop = n - 34;
    const p = 10n ** BigInt(drop);
    let q = c / p;
    const r = c % p;
    const half = p / 2n;
    if (r > half || (r === half && q % 2n === 1n)) q += 1n;
    c = q;
    e += drop;
    if (digits(c) > 34) {
      c /= 10n;
      e += 1;
    }
  }
  if (e > 6111 || e < -6176) throw unsupported('a Decimal128 result whose exponent is outside the normal range (clamping, overflow and subnormal rounding)');
  return Decimal128.fromString(`${neg ? '-' : ''}${c}E${e}`);
}

/** Decimal128(double, kRoundTo15Digits) (src/mongo/platform/decimal128.cpp), as SafeNum::getDecimal and Value::coerceToDecimal use it. */
export function doubleToDec15(x: number): Decimal128 {
  if (Number.isNaN(x)) return Decimal128.fromString('NaN');
  if (!Number.isFinite(x)) return Decimal128.fromString(x > 0 ? 'Infinity' : '-Infinity');
  if (x !== 0) {
    // toPrecision rounds half up, the decimal library half to even: refuse an exact tie.
    const exact = exactDecimalDigits(Math.abs(x));
    if (exact.length > 15 && /^50*$/.test(exact.slice(15))) throw unsupported(`converting the double ${x} to Decimal128 (a rounding tie at 15 digits)`);
  }
  const s = Math.abs(x).toPrecision(15);
  const d = parseDec(s.replace('e', 'E'));
  return makeDec(x < 0 || Object.is(x, -0), d.coef, d.exp);
}

/** The significant digits of a finite positive double's exact decimal expansion. */
function exactDecimalDigits(x: number): string {
  const { num, den } = doubleRational(x);
  // den is a power of two 2^k: x = num * 5^k / 10^k.
  let k = 0;
  for (let d = den; d > 1n; d >>= 1n) k++;
  const s = (num * 5n ** BigInt(k)).toString();
  return s.replace(/^0+/, '');
}

export function toDec(v: unknown): Dec {
  const k = numKind(v);
  if (k === 'decimal') return parseDec(v as Decimal128);
  if (k === 'int' || k === 'long') {
    const b = toBigInt(v);
    return { neg: b < 0n, coef: b < 0n ? -b : b, exp: 0 };
  }
  return parseDec(doubleToDec15(toNumber(v)));
}

function signed(d: Dec): bigint {
  return d.neg ? -d.coef : d.coef;
}

export function decAdd(a: Dec, b: Dec): Decimal128 {
  if (a.special || b.special) throw unsupported('arithmetic on Decimal128 NaN or Infinity');
  const e = Math.min(a.exp, b.exp);
  const sum = signed(a) * 10n ** BigInt(a.exp - e) + signed(b) * 10n ** BigInt(b.exp - e);
  // IEEE 754: an exact zero sum of operands of opposite signs is +0 when rounding to nearest.
  const neg = sum < 0n || (sum === 0n && a.neg && b.neg);
  return makeDec(neg, sum < 0n ? -sum : sum, e);
}

export function decMul(a: Dec, b: Dec): Decimal128 {
  if (a.special || b.special) throw unsupported('arithmetic on Decimal128 NaN or Infinity');
  return makeDec(a.neg !== b.neg, a.coef * b.coef, a.exp + b.exp);
}

export function decNeg(a: Dec): Dec {
  return { ...a, neg: !a.neg };
}

// ---------------------------------------------------------------------------------------------
// Exact comparison

interface Rational {
  nan?: boolean;
  inf?: number;
  neg: boolean;
  num: bigint;
  den: bigint;
}

const F64 = new DataView(new ArrayBuffer(8));

/** A finite double as an exact fraction num/den (den a power of two). */
function doubleRational(x: number): { num: bigint; den: bigint } {
  F64.setFloat64(0, x);
  const hi = F64.getUint32(0);
  const lo = F64.getUint32(4);
  const exp = (hi >>> 20) & 0x7ff;
  let mant = (BigInt(hi & 0xfffff) << 32n) | BigInt(lo);
  let e: number;
  if (exp === 0) e = -1074;
  else {
    mant |= 1n << 52n;
    e = exp - 1075;
  }
  return e >= 0 ? { num: mant << BigInt(e), den: 1n } : { num: mant, den: 1n << BigInt(-e) };
}

function rational(v: unknown): Rational {
  const k = numKind(v);
  if (k === 'long' || k === 'int') {
    const b = toBigInt(v);
    return { neg: b < 0n, num: b < 0n ? -b : b, den: 1n };
  }
  if (k === 'decimal') {
    const d = parseDec(v as Decimal128);
    if (d.special === 'nan') return { nan: true, neg: false, num: 0n, den: 1n };
    if (d.special === 'inf') return { inf: d.neg ? -1 : 1, neg: d.neg, num: 0n, den: 1n };
    return d.exp >= 0 ? { neg: d.neg, num: d.coef * 10n ** BigInt(d.exp), den: 1n } : { neg: d.neg, num: d.coef, den: 10n ** BigInt(-d.exp) };
  }
  const x = toNumber(v);
  if (Number.isNaN(x)) return { nan: true, neg: false, num: 0n, den: 1n };
  if (!Number.isFinite(x)) return { inf: x > 0 ? 1 : -1, neg: x < 0, num: 0n, den: 1n };
  const r = doubleRational(Math.abs(x));
  return { neg: x < 0, num: r.num, den: r.den };
}

function sign(n: number | bigint): number {
  return n < 0 ? -1 : n > 0 ? 1 : 0;
}

/** Exact numeric comparison of two BSON numbers (NaN lowest and equal to itself); -1, 0 or 1. */
export function compareNumeric(a: unknown, b: unknown): number {
  if (typeof a === 'number' && typeof b === 'number') return cmpDoubles(a, b);
  const ka = numKind(a);
  const kb = numKind(b);
  if (ka !== 'decimal' && kb !== 'decimal' && ka !== 'long' && kb !== 'long') return cmpDoubles(toNumber(a), toNumber(b));
  // Exact, also between a Decimal128 and a double: compareDecimalToDouble
  // (src/mongo/base/compare_numbers.h) converts the decimal to a double rounding toward negative and
  // breaks a tie by the inexact flag, which orders the two by their exact values.
  const x = rational(a);
  const y = rational(b);
  if (x.nan || y.nan) return x.nan && y.nan ? 0 : x.nan ? -1 : 1;
  // Infinities of the same sign are equal (compareDecimals / compareDecimalToDouble answer 0), also
  // between a Decimal128 and a double; an infinity is beyond every finite number.
  if (x.inf || y.inf) return sign((x.inf ?? 0) - (y.inf ?? 0));
  const sx = x.num === 0n ? 0 : x.neg ? -1 : 1;
  const sy = y.num === 0n ? 0 : y.neg ? -1 : 1;
  if (sx !== sy) return sign(sx - sy);
  const c = sign(x.num * y.den - y.num * x.den);
  return sx < 0 ? -c : c;
}

function cmpDoubles(a: number, b: number): number {
  if (Number.isNaN(a)) return Number.isNaN(b) ? 0 : -1;
  if (Number.isNaN(b)) return 1;
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * A string that two numbers share exactly when they are equal by value (1 == 1.0 == NumberLong(1)
 * == NumberDecimal("1.00")); used for keys and equality.
 */
/**
 * SafeNum::isIdentical (src/mongo/util/safe_num.cpp), which decides whether `$inc`/`$mul` changed
 * anything (ArithmeticNode): the same numeric type, and equal by that type's `==` — so -0.0 and 0.0
 * are identical doubles and NaN is never identical to anything — or, for Decimal128,
 * `Decimal128::isEqual` (by value: -0 equals 0, 1.0 equals 1.00; NaN equals nothing).
 */
export function isIdenticalNumber(a: unknown, b: unknown): boolean {
  const ka = numKind(a);
  if (ka === undefined || ka !== numKind(b)) return false;
  if (ka === 'int' || ka === 'long') return toBigInt(a) === toBigInt(b);
  if (ka === 'double') return toNumber(a) === toNumber(b);
  if (parseDec(a as Decimal128).special === 'nan' || parseDec(b as Decimal128).special === 'nan') return false;
  return compareNumeric(a, b) === 0;
}

export function numericKey(v: unknown): string {
  const k = numKind(v);
  if (k === 'int' || k === 'double') {
    const x = toNumber(v);
    if (x === 0) return 'n:0';
    if (Number.isInteger(x) && Math.abs(x) > 2 ** 53) return `n:${BigInt(x)}`;
    return `n:${x}`;
  }
  if (k === 'long') return bigKey(toBigInt(v));
  const d = parseDec(v as Decimal128);
  if (d.special === 'nan') return 'n:NaN';
  if (d.special === 'inf') return d.neg ? 'n:-Infinity' : 'n:Infinity';
  if (d.coef === 0n) return 'n:0';
  // Integral decimal: same key as the integer.
  let c = d.coef;
  let e = d.exp;
  while (e < 0 && c % 10n === 0n) {
    c /= 10n;
    e++;
  }
  if (e >= 0) return bigKey((d.neg ? -1n : 1n) * c * 10n ** BigInt(e));
  // A fraction: the key of the double it equals exactly (compareDecimalToDouble,
  // src/mongo/base/compare_numbers.h), when there is one; only the nearest double can be.
  const x = Number(`${d.neg ? '-' : ''}${c}E${e}`);
  if (Number.isFinite(x) && compareNumeric(x, v) === 0) return `n:${x}`;
  return `nd:${d.neg ? '-' : ''}${c}E${e}`;
}

function bigKey(b: bigint): string {
  if (b === 0n) return 'n:0';
  return b >= -(2n ** 53n) && b <= 2n ** 53n ? `n:${Number(b)}` : `n:${b}`;
}

/** A string equal only for identical values (same BSON type, same bits: 1 vs 1.0 differ). */
export function typedNumericKey(v: unknown): string {
  const k = numKind(v)!;
  switch (k) {
    case 'int':
      return `i:${toNumber(v)}`;
    case 'double': {
      const x = toNumber(v);
      return `d:${Object.is(x, -0) ? '-0' : String(x)}`;
    }
    case 'long':
      return `l:${toBigInt(v)}`;
    case 'decimal':
      return `m:${(v as Decimal128).toString()}`;
  }
}

// ---------------------------------------------------------------------------------------------
// Arithmetic

function widest(a: NumKind, b: NumKind): NumKind {
  const order: NumKind[] = ['int', 'long', 'double', 'decimal'];
  return order[Math.max(order.indexOf(a), order.indexOf(b))];
}

/**
 * SafeNum addition or multiplication (update operators $inc / $mul). Returns undefined when the
 * result is invalid (a long overflow), which the caller reports as mongod does.
 */
export function safeNumOp(op: 'add' | 'mul', a: unknown, b: unknown): unknown {
  const ka = numKind(a)!;
  const kb = numKind(b)!;
  const w = widest(ka, kb);
  if (w === 'decimal') return op === 'add' ? decAdd(toDec(a), toDec(b)) : decMul(toDec(a), toDec(b));
  if (w === 'double') return dbl(op === 'add' ? toNumber(a) + toNumber(b) : toNumber(a) * toNumber(b));
  const r = op === 'add' ? toBigInt(a) + toBigInt(b) : toBigInt(a) * toBigInt(b);
  if (w === 'int') return intOrLong(r);
  return fitsLong(r) ? long(r) : undefined;
}

/** SafeNum::debugString as used in update errors: "(NumberLong)9223372036854775807". */
export function safeNumDebugString(v: unknown): string {
  switch (numKind(v)) {
    case 'int':
      return `(NumberInt)${toNumber(v)}`;
    case 'long':
      return `(NumberLong)${toBigInt(v)}`;
    case 'double':
      return `(NumberDouble)${toNumber(v)}`;
    default:
      return `(NumberDecimal)${(v as Decimal128).toString()}`;
  }
}

/** The nearest double to num/den (round half to even). */
export function rationalToDouble(neg: boolean, num: bigint, den: bigint): number {
  if (num === 0n) return neg ? -0 : 0;
  // Scale so that the quotient has at least 64 significant bits, then let the FPU round once.
  const nb = num.toString(2).length;
  const db = den.toString(2).length;
  let shift = 64 - (nb - db);
  if (shift < 0) shift = 0;
  const scaled = (num << BigInt(shift)) / den;
  const exact = (num << BigInt(shift)) % den === 0n;
  // scaled has >= 64 bits; fold the remainder into a sticky bit so that rounding is correct.
  let q = scaled;
  if (!exact) q |= 1n;
  const x = Number(q) / 2 ** shift;
  return neg ? -x : x;
}

/**
 * DoubleDoubleSummation (src/mongo/util/summation.h and summation.cpp): the compensated sum mongod
 * keeps for every non-decimal operand of `$add`, `$sum` and `$avg`, reproduced operation for
 * operation (JavaScript numbers are IEEE doubles, as mongod's are): addDouble is Fast2Sum then 2Sum
 * with a plain running sum (`special`) kept for when the compensated one becomes NaN; addLong splits
 * the integer into a high part (a multiple of 2^32, truncated toward zero) and a low part; addInt is
 * addDouble.
 */
export class DoubleDoubleSummation {
  private sum = 0;
  private addend = 0;
  private special = 0;

  addDouble(x: number): void {
    this.special += x;
    // _fast2Sum(x, _addend)
    let s = x + this.addend;
    let z = s - x;
    const t1 = this.addend - z;
    x = s;
    this.addend = t1;
    // _2Sum(_sum, x)
    const a = this.sum;
    const b = x;
    s = a + b;
    const aPrime = s - b;
    const bPrime = s - aPrime;
    z = a - aPrime + (b - bPrime);
    this.sum = s;
    this.addend += z;
  }

  addLong(x: bigint): void {
    const high = (x / 2n ** 32n) * 2n ** 32n;
    const low = x - high;
    this.addDouble(Number(low));
    this.addDouble(Number(high));
  }

  addInt(x: number): void {
    this.addDouble(x);
  }

  getDouble(): number {
    return Number.isNaN(this.sum) ? this.special : this.sum;
  }

  fitsLong(): boolean {
    const max = 2 ** 63; // numeric_limits<long long>::max() converted to double
    const min = -(2 ** 63);
    if (this.sum > min && this.sum < max) return true;
    if (this.sum === max) return this.addend < -0.5;
    if (this.sum === min) return this.addend >= -0.5;
    return false;
  }

  /** getLong: the sum rounded to the nearest integer, halves away from zero (llround). */
  getLong(): bigint {
    if (!this.fitsLong()) throw new Error('DoubleDoubleSummation.getLong: sum out of range of a 64-bit signed integer');
    if (this.sum === 2 ** 63) return llround(this.addend) + 2n ** 63n;
    const sum = llround(this.sum);
    return sum + llround(this.sum - Number(sum) + this.addend);
  }
}

/** llround: to the nearest integer, halfway cases away from zero. */
function llround(d: number): bigint {
  const t = Math.trunc(d);
  const frac = d - t; // exact
  return BigInt(t) + (frac >= 0.5 ? 1n : frac <= -0.5 ? -1n : 0n);
}

/**
 * The sum of non-decimal numbers as ExpressionAdd::evaluate (src/mongo/db/pipeline/expression.cpp)
 * and AccumulatorSum::getValue (accumulator_sum.cpp, the non-constant state) produce it: every
 * operand added to a DoubleDoubleSummation (ints by addInt/addDouble, longs by addLong, doubles by
 * addDouble) in order, the total type the widest operand type; an int total is
 * createIntOrLong(getLong()) when fitsLong(), a long total Value(getLong()) when fitsLong(), and
 * otherwise (or for a double total) getDouble(). A total holding a Decimal128 is refused: mongod adds
 * the decimals to `Decimal128()` and then `nonDecimalTotal.getDecimal()`, and the exponent of that
 * starting zero differs between releases (bit pattern 0, i.e. 0E-6176, in older decimal128.cpp;
 * kNormalizedZero, 0E0, in newer decimal128.h), as does the representation of the converted double
 * zero, so the digits of the result (trailing zeros) are not sourced.
 */
export function sumNumbers(values: unknown[]): unknown {
  let kind: NumKind = 'int';
  const dd = new DoubleDoubleSummation();
  for (const v of values) {
    const k = numKind(v)!;
    kind = widest(kind, k);
    if (k === 'decimal') throw unsupported('a sum ($add, $sum) holding a Decimal128 (the digits of mongod\'s Decimal128 sum differ between releases)');
    if (k === 'long') dd.addLong(toBigInt(v));
    else dd.addDouble(toNumber(v));
  }
  if (kind === 'int' && dd.fitsLong()) return intOrLong(dd.getLong());
  if (kind === 'long' && dd.fitsLong()) return long(dd.getLong());
  return dbl(dd.getDouble());
}

/**
 * ExpressionMultiply::evaluate (src/mongo/db/pipeline/expression.cpp): a double product and a
 * long product in parallel; a long overflow (or a non-finite operand) abandons the long product for
 * the double one; the first decimal converts the partial product (the double one rounded to 15
 * digits, or the long one exactly) and every later operand is multiplied as a decimal.
 */
export function multiplyNumbers(values: unknown[]): unknown {
  let kind: NumKind = 'int';
  let d = 1;
  let p = 1n;
  let dec: Dec | undefined;
  for (const v of values) {
    const old = kind;
    kind = widest(kind, numKind(v)!);
    if (kind === 'decimal') {
      if (old !== 'decimal') dec = old === 'double' ? parseDec(doubleToDec15(d)) : { neg: p < 0n, coef: p < 0n ? -p : p, exp: 0 };
      dec = parseDec(decMul(dec!, toDec(v)));
      continue;
    }
    const x = toNumber(v);
    d *= x;
    if (kind !== 'double') {
      if (!Number.isFinite(x)) kind = 'double';
      else {
        p *= toBigInt(v);
        if (!fitsLong(p)) kind = 'double';
      }
    }
  }
  if (kind === 'decimal') return makeDec(dec!.neg, dec!.coef, dec!.exp);
  if (kind === 'double') return dbl(d);
  return kind === 'int' ? intOrLong(p) : long(p);
}
