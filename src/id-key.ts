/**
 * Keys for document `_id`s: two ids get the same key exactly when mongod treats them as the same
 * `_id` (one document for an equality match under the simple collation, one key of the unique
 * `_id` index). Used wherever the plugin de-duplicates ids or matches an id against another (the
 * guard's targets, a holder's own write, lock records, change events, lockStatus).
 *
 * - Numbers are compared by value whatever their BSON type: int, long, double and decimal are one
 *   value when they are mathematically equal (`src/mongo/base/compare_numbers.h`: int/long/double
 *   compare numerically, a decimal is compared with a double through an exact conversion and with
 *   an int or long as a decimal; NaN equals NaN; -0 equals 0). `1`, `Long(1)`, `1.0` and
 *   `Decimal128('1.0')` are one document. The key is the exact decimal value, so it never merges
 *   two numbers mongod keeps apart.
 * - Embedded documents compare field by field in order, each value by the same rules, so their
 *   key is built the same way.
 * - Everything else by its BSON encoding: a Buffer (and Mongoose's Buffer, whatever its subtype)
 *   is the BSON Binary it is sent as, a UUID is a Binary of subtype 4, two ObjectId instances with
 *   the same bytes are one id. (Strings compare byte-wise under the simple collation; writes with
 *   another collation never rely on these keys, see guard/targets.ts.)
 */
import { types } from 'node:util';
import { mongo } from 'mongoose';

const { isProxy } = types;

type Bson = { _bsontype?: unknown };

/** Decimal digits and exponent, without leading or trailing zeros: the value's one spelling. */
function normalized(negative: boolean, digits: string, exponent: number): string {
  let d = digits.replace(/^0+/, '');
  if (d === '') return 'n:0'; // -0 and 0E-6176 are 0
  let e = exponent;
  const trimmed = d.replace(/0+$/, '');
  e += d.length - trimmed.length;
  d = trimmed;
  return `n:${negative ? '-' : ''}${d}e${e}`;
}

/** The exact decimal value of a double (every finite double is m / 2^k, i.e. m·5^k / 10^k). */
function doubleKey(value: number): string {
  if (Number.isNaN(value)) return 'n:NaN';
  if (value === Infinity) return 'n:Inf';
  if (value === -Infinity) return 'n:-Inf';
  let mantissa = Math.abs(value);
  let k = 0;
  while (!Number.isInteger(mantissa)) {
    mantissa *= 2; // exact: a finite double times 2 loses nothing below Number.MAX_VALUE
    k++;
  }
  const digits = (BigInt(mantissa) * BigInt(5) ** BigInt(k)).toString();
  return normalized(value < 0, digits, -k);
}

function decimalKey(text: string): string {
  if (/^-?NaN$/i.test(text)) return 'n:NaN';
  if (/^Inf/i.test(text)) return 'n:Inf';
  if (/^-Inf/i.test(text)) return 'n:-Inf';
  const match = /^([+-])?(\d*)(?:\.(\d*))?(?:E([+-]?\d+))?$/i.exec(text);
  if (!match) return `d:${text}`;
  const [, sign, whole = '', fraction = '', exponent = '0'] = match;
  return normalized(sign === '-', whole + fraction, Number(exponent) - fraction.length);
}

/** The key of a number of any BSON numeric type, or undefined when `value` is not one. */
function numericKey(value: unknown): string | undefined {
  if (typeof value === 'number') return doubleKey(value);
  if (typeof value === 'bigint') return decimalKey(value.toString());
  if (value === null || typeof value !== 'object') return undefined;
  switch ((value as Bson)._bsontype) {
    case 'Int32':
    case 'Double':
      return doubleKey(Number((value as { value: unknown }).value));
    case 'Long': {
      // By the 64 bits BSON sends, read as the signed int64 mongod stores: an unsigned Long
      // 2^64-1 prints 18446744073709551615 but is sent (and matched) as -1.
      const long = value as mongo.Long;
      return decimalKey(mongo.Long.fromBits(long.low, long.high, false).toString());
    }
    case 'Decimal128':
      return decimalKey((value as mongo.Decimal128).toString());
    default:
      return undefined;
  }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value) || (value as Bson)._bsontype !== undefined) return false;
  if (Buffer.isBuffer(value) || value instanceof Date || value instanceof RegExp || ArrayBuffer.isView(value)) return false;
  const proto = Object.getPrototypeOf(value) as { constructor?: { name?: string } } | null;
  return proto === null || proto === Object.prototype || proto.constructor?.name === 'Object';
}

/** The BSON value a Buffer is sent as (Mongoose's Buffer carries its subtype). */
function asBinary(value: Buffer): mongo.Binary {
  return new mongo.Binary(Buffer.from(value), (value as { _subtype?: number })._subtype ?? mongo.Binary.SUBTYPE_DEFAULT);
}

/** Key of an `_id` value: equal for two ids exactly when mongod treats them as one `_id`. */
export function idKey(id: unknown): string {
  const numeric = numericKey(id);
  if (numeric !== undefined) return numeric;
  if (Buffer.isBuffer(id)) return bsonKey(asBinary(id));
  if (Array.isArray(id)) return `[${id.map(idKey).join(',')}]`;
  if (isPlainObject(id)) {
    return `{${Object.entries(id)
      // The driver sends an undefined field as null (js-bson, ignoreUndefined: false).
      .map(([name, value]) => `${JSON.stringify(name)}:${idKey(value === undefined ? null : value)}`)
      .join(',')}}`;
  }
  return objectIdHex(id) ?? bsonKey(id);
}

/**
 * The key of a plain ObjectId of the driver's js-bson (plainObjectIdBytes), read as js-bson
 * serializes it, or undefined for anything else: `o:` and its 12 bytes in hex, the key bsonKey
 * gives every value that serializes as an ObjectId (BSON type 7 is those bytes, and an ObjectId
 * equals only an ObjectId of the same bytes), without serializing a document per key (the guard
 * keys every id it checks).
 */
function objectIdHex(id: unknown): string | undefined {
  const bytes = plainObjectIdBytes(id);
  return bytes === undefined ? undefined : `o:${bytes.toString('hex')}`;
}

/**
 * The own properties the driver's ObjectId constructor gives an instance (js-bson 7: the packed
 * bytes `i0`..`i3`; 6: the byte array `buffer`), the same for every instance it makes.
 */
const OBJECT_ID_FIELDS: ReadonlySet<PropertyKey> = new Set(Reflect.ownKeys(mongo.ObjectId.createFromTime(0)));

/**
 * The 12 bytes a plain ObjectId of the driver's js-bson serializes to, as a new Buffer, or
 * undefined for anything else; its callers serialize anything else instead.
 *
 * js-bson's serializer (serializeInto, src/parser/serializer.ts, 6.x and 7.x) reads from the value
 * itself `toBSON`, `_bsontype` (`== null`: an embedded document of its own keys), the version tag
 * `Symbol.for('@@mdb.bson.version')`, in 7.x the type tag `Symbol.for('@@mdb.bson.type')`, then
 * calls `value.serializeInto`, which writes `this.buffer[0..11]` (6.x) or the packed `this.i0..i3`
 * (7.x): the bytes the `id` getter returns. So only a value read exactly so qualifies: not a Proxy
 * (its traps may answer each of these reads otherwise), an instance of the class itself (not a
 * subclass, not an ObjectId of another js-bson copy), with no inherited `toBSON` and nothing of its
 * own but the fields the constructor sets (no `_bsontype`, tag, `id`, `serializeInto` or `toBSON`
 * of its own). The bytes are then read by index, as serializeInto reads them: js-bson 6's `id`
 * returns the instance's own array, whose `valueOf` or `length` may be the caller's (Buffer.from
 * would follow them and copy other bytes).
 */
export function plainObjectIdBytes(id: unknown): Buffer | undefined {
  const bytes = plainObjectIdArray(id);
  if (bytes === undefined) return undefined;
  const copy = Buffer.allocUnsafe(12);
  for (let i = 0; i < 12; i++) copy[i] = bytes[i]!;
  return copy;
}

/**
 * plainObjectIdBytes without the copy: the array its `id` getter returns (js-bson 7: a new one;
 * 6: the instance's own), for a caller that reads its 12 bytes by index at once and keeps nothing.
 */
function plainObjectIdArray(id: unknown): Uint8Array | undefined {
  if (id === null || typeof id !== 'object' || isProxy(id) || Object.getPrototypeOf(id) !== mongo.ObjectId.prototype) return undefined;
  // Which fields, not which js-bson reads: the 7.3 serializer dispatches on a type tag 6.10 never reads.
  const fields = Reflect.ownKeys(id);
  if (fields.length !== OBJECT_ID_FIELDS.size) return undefined;
  for (const key of fields) if (!OBJECT_ID_FIELDS.has(key)) return undefined;
  if (typeof (id as { toBSON?: unknown }).toBSON === 'function') return undefined;
  const bytes = (id as { id?: unknown }).id;
  return bytes instanceof Uint8Array && bytes.length === 12 ? bytes : undefined;
}

/** Whether two `_id` values are one `_id` for mongod (idKey), without building keys for two plain ObjectIds. */
export function sameId(a: unknown, b: unknown): boolean {
  const x = plainObjectIdArray(a);
  const y = x === undefined ? undefined : plainObjectIdArray(b);
  if (y === undefined) return idKey(a) === idKey(b);
  // Each byte read once, by index, as plainObjectIdBytes copies them.
  for (let i = 0; i < 12; i++) if (x![i] !== y[i]) return false;
  return true;
}

/** BSON type of an ObjectId, and where its 12 bytes start in the serialized `{ v: value }` (size 4, type 1, "v\0" 2). */
const OBJECT_ID_TYPE = 0x07;
const VALUE_OFFSET = 7;

function bsonKey(value: unknown): string {
  const bytes = mongo.BSON.serialize({ v: value } as mongo.Document);
  if (bytes[4] === OBJECT_ID_TYPE) return `o:${Buffer.from(bytes.buffer, bytes.byteOffset + VALUE_OFFSET, 12).toString('hex')}`;
  return `b:${Buffer.from(bytes).toString('base64')}`;
}

/** `ids` without repetitions (by idKey), in their first order. */
export function distinctIds(ids: unknown[]): unknown[] {
  const seen = new Set<string>();
  const out: unknown[] = [];
  for (const id of ids) {
    const key = idKey(id);
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(id);
  }
  return out;
}
