/**
 * What a document `_id` argument really is: judged by the BSON it serializes to, never by its
 * prototype, and replaced by a fresh value decoded from those very bytes.
 *
 * The driver serializes a command with js-bson, which calls a value's own `toBSON()` and reads its
 * own fields (`id`, `buffer`, `_bsontype`, version symbols) at that moment. So an object that
 * passes `instanceof ObjectId` can serialize to `{ $ne: null }` (a query), or to a harmless id once
 * and to a query the next time (a stateful `toBSON`, a getter, a Proxy). `freshId` serializes the
 * value ONCE, checks the bytes (one element of an accepted type, within the size mongod can
 * store), and returns the value decoded from them: a plain string, number or bigint, or a new
 * ObjectId / Date / Binary / UUID / Decimal128 made by js-bson itself. That value is what the
 * plugin sends from then on, so what reaches the server is exactly what was checked.
 */
import { mongo } from 'mongoose';

const BSON = mongo.BSON;

/**
 * mongod's limit on a stored document: `BSONObjMaxUserSize = 16 * 1024 * 1024`
 * (src/mongo/bson/util/builder.h). A lock record holds the locked document's `_id`, so it must
 * fit: an upsert whose new document is larger is refused ("Document to upsert is larger than
 * 16777216", 17420, UpsertStage in src/mongo/db/exec/upsert_stage.cpp), an update likewise
 * ("Resulting document after update is larger than", src/mongo/db/exec/update_stage.cpp).
 * The `_id` index itself sets no lower bound: the 1024-byte index key limit is gone since 4.2
 * (featureCompatibilityVersion 4.2; SERVER-36278, manual "MongoDB Limits and Thresholds",
 * "Index Key Limit"), and the plugin supports 6.0 and newer.
 */
export const MAX_DOCUMENT_BYTES = 16 * 1024 * 1024;

/**
 * Room a lock record needs besides its `_id`: owner (a plain owner of 512 UTF-16 units is at most
 * 1536 UTF-8 bytes), token, fence, three dates, label (100 units, at most 300 bytes), claim, their
 * names and the document's framing come to about 2 KiB; 4 KiB leaves a margin. The commands that
 * carry one `_id` (findAndModify with its pipeline, update, find) stay far below mongod's limit on
 * a command, `BSONObjMaxInternalSize` = 16 MiB + 16 KiB (src/mongo/bson/util/builder.h).
 * __tests__/security/oversized-ids.test.ts builds the largest record and checks that it fits.
 */
export const LOCK_RECORD_RESERVE_BYTES = 4 * 1024;

/** Largest `_id` accepted, as the size of its BSON value (a string: 4 + UTF-8 bytes + 1). */
export const MAX_ID_BYTES = MAX_DOCUMENT_BYTES - LOCK_RECORD_RESERVE_BYTES;

/** Type bytes of the BSON element types an `_id` may be (bsonspec.org). */
export const BSON_TYPE = {
  double: 0x01,
  string: 0x02,
  binary: 0x05,
  objectId: 0x07,
  date: 0x09,
  int32: 0x10,
  int64: 0x12,
  decimal128: 0x13,
} as const;

/** BSON element types an `_id` argument may serialize to, by their type byte. */
export const ACCEPTED_TYPES: ReadonlyMap<number, string> = new Map([
  [BSON_TYPE.double, 'double'],
  [BSON_TYPE.string, 'string'],
  [BSON_TYPE.binary, 'binary'],
  [BSON_TYPE.objectId, 'ObjectId'],
  [BSON_TYPE.date, 'date'],
  [BSON_TYPE.int32, 'int32'],
  [BSON_TYPE.int64, 'int64'],
  [BSON_TYPE.decimal128, 'decimal128'],
]);

const OTHER_TYPES: ReadonlyMap<number, string> = new Map([
  [0x03, 'embedded document (an object, possibly a query)'],
  [0x04, 'array'],
  [0x06, 'undefined'],
  [0x08, 'boolean'],
  [0x0a, 'null'],
  [0x0b, 'regular expression'],
  [0x0c, 'DBPointer'],
  [0x0d, 'JavaScript code'],
  [0x0e, 'symbol'],
  [0x0f, 'JavaScript code with scope'],
  [0x11, 'timestamp'],
  [0x7f, 'MaxKey'],
  [0xff, 'MinKey'],
]);

/** An `_id` as the plugin sends it, its BSON type byte, and the size of its BSON value in bytes. */
export interface FreshId {
  value: unknown;
  type: number;
  bytes: number;
}

/** Why a value cannot be an `_id` the plugin sends (completes "... got <value> that ..."). */
export class IdRefusal {
  constructor(readonly problem: string) {}
}

/** Framing of `{ v: <value> }`: document length (4), type (1), "v\0" (2), terminator (1). */
const FRAMING = 8;

function tooLarge(bytes: number, atLeast = false): IdRefusal {
  return new IdRefusal(
    `is ${atLeast ? 'at least ' : ''}${bytes} bytes as BSON; a lock record holds the _id and must fit in MongoDB's 16 MiB document limit, so an _id may be at most ${MAX_ID_BYTES} bytes.`,
  );
}

/**
 * A cheap bound before serializing anything: a string is at least as many UTF-8 bytes as it has
 * UTF-16 units, and binary data is its byte length. Refuses a 17 MB string without copying it.
 */
export function obviouslyTooLarge(value: unknown): IdRefusal | undefined {
  if (typeof value === 'string' && value.length + 5 > MAX_ID_BYTES) return tooLarge(value.length + 5, true);
  if (ArrayBuffer.isView(value) && value.byteLength + 5 > MAX_ID_BYTES) return tooLarge(value.byteLength + 5, true);
  return undefined;
}

/** One value as BSON, read once: its element type, the size of its value, and the value decoded from it. */
export interface BsonRoundTrip {
  type: number;
  bytes: number;
  value: unknown;
}

/** How bsonRoundTrip serializes and decodes (the defaults are the driver's for commands). */
export interface RoundTripOptions {
  /**
   * Decode so that the value serializes to the very same bytes again: int32, double, int64 and
   * symbol stay js-bson's Int32 / Double / Long / BSONSymbol, a regex a BSONRegExp (with the
   * defaults a double 1.0 comes back as the number 1, which is sent as an int32).
   */
  exact?: boolean;
  /** The driver's `ignoreUndefined` for the command (default false: undefined is sent as null). */
  ignoreUndefined?: boolean;
  /** The driver's `serializeFunctions` for the command (default false: functions are left out). */
  serializeFunctions?: boolean;
}

/** bsonRoundTrip's answer for a value the serializer leaves out (a function, a symbol, `undefined` with ignoreUndefined). */
export const NOT_SENT = new IdRefusal('serializes to nothing (a function or a symbol is not sent at all).');

/**
 * Serializes `value` once, as the driver would, and decodes it again: the value the server would
 * receive, as a fresh object that serializes to the same bytes every time. For any value (the
 * write guard's filter values may be embedded documents); freshId adds the checks for lock ids.
 * NOT_SENT when the driver would leave the value out of the command.
 */
export function bsonRoundTrip(value: unknown, options: RoundTripOptions = {}): BsonRoundTrip | IdRefusal {
  let encoded: Uint8Array;
  try {
    // The same serializer, with the same defaults for functions and keys, as the driver's commands.
    encoded = BSON.serialize({ v: value } as mongo.Document, {
      serializeFunctions: options.serializeFunctions ?? false,
      checkKeys: false,
      ignoreUndefined: options.ignoreUndefined ?? false,
    });
  } catch (error) {
    return new IdRefusal(`cannot be serialized to BSON (${(error as Error).message}).`);
  }
  if (encoded.length <= 5) return NOT_SENT;
  // promoteValues: int32 and double become numbers, strings strings; useBigInt64: an int64 becomes
  // a bigint (never a rounded number); Binary stays Binary (promoteBuffers false); ObjectId,
  // Date, UUID and Decimal128 are new instances. Exact: every value keeps its BSON type.
  const decodeOptions = options.exact ? { promoteValues: false, promoteBuffers: false, bsonRegExp: true } : { useBigInt64: true, promoteBuffers: false, promoteValues: true };
  const decoded = (BSON.deserialize(encoded, decodeOptions) as { v: unknown }).v;
  return { type: encoded[4]!, bytes: encoded.length - FRAMING, value: decoded };
}

/** The signed 64-bit range MongoDB stores an int64 in. */
export const MIN_INT64 = -(2n ** 63n);
export const MAX_INT64 = 2n ** 63n - 1n;

/**
 * A bigint outside the int64 range: js-bson writes a bigint as the low 64 bits of its two's
 * complement without complaint (serializeBigInt and NumberUtils.setBigInt64LE in
 * js-bson src/parser/serializer.ts and src/utils/number_utils.ts), so `2n ** 64n + 5n` would be
 * sent as the int64 5: another document's id. Mongoose's own BigInt type refuses such values
 * ("Mongoose only supports BigInts between -9223372036854775808 and 9223372036854775807 because
 * MongoDB does not support arbitrary precision integers", lib/cast/bigint.js).
 */
export function int64RangeProblem(value: unknown): IdRefusal | undefined {
  if (typeof value !== 'bigint' || (value >= MIN_INT64 && value <= MAX_INT64)) return undefined;
  return new IdRefusal(`is outside the signed 64-bit range MongoDB stores (${MIN_INT64} to ${MAX_INT64}); sent as BSON it would wrap around to another number (another document's _id).`);
}

/** A Decimal128 that is NaN or an infinity, refused like the number NaN and Infinity. */
function nonFiniteDecimal(value: unknown): boolean {
  return value instanceof mongo.Decimal128 && !/^[+-]?\d/.test(value.toString());
}

/**
 * The `_id` `value` serializes to, as a fresh value decoded from its bytes, or why it cannot be
 * one: it serializes to something other than an accepted scalar type (an object, an array, null,
 * a boolean, nothing at all), cannot be serialized, is larger than MAX_ID_BYTES, is an empty
 * string, a number (or Decimal128) that is not finite, or a bigint outside the int64 range.
 * With `expected`, the element type must also be one of those (the types the schema's `_id`
 * casts to, idCaster); `expectedName` names them in the refusal.
 */
export function freshId(value: unknown, expected?: ReadonlySet<number>, expectedName?: string): FreshId | IdRefusal {
  const early = obviouslyTooLarge(value) ?? int64RangeProblem(value);
  if (early) return early;
  const read = bsonRoundTrip(value);
  if (read instanceof IdRefusal) return read;
  if (!ACCEPTED_TYPES.has(read.type)) {
    return new IdRefusal(`serializes to a BSON ${OTHER_TYPES.get(read.type) ?? `value of type ${read.type}`}, not an _id value (an ObjectId, string, number, Date, binary or Decimal128).`);
  }
  if (expected && !expected.has(read.type)) {
    return new IdRefusal(`serializes to a BSON ${ACCEPTED_TYPES.get(read.type)}, not ${expectedName ?? [...expected].map((t) => ACCEPTED_TYPES.get(t)).join(' or ')}: it would not be this schema's _id.`);
  }
  const bytes = read.bytes;
  if (bytes > MAX_ID_BYTES) return tooLarge(bytes);
  const fresh = read.value;
  if (typeof fresh === 'string' && fresh.length === 0) return new IdRefusal('is an empty string.');
  if (typeof fresh === 'number' && !Number.isFinite(fresh)) return new IdRefusal('is not a finite number.');
  if (nonFiniteDecimal(fresh)) return new IdRefusal('is not a finite number (a Decimal128 NaN or infinity).');
  return { value: fresh, type: read.type, bytes };
}

/** The size of an `_id`'s BSON value, for a value freshId returned. */
export function idBytes(value: unknown): number {
  return BSON.calculateObjectSize({ v: value } as mongo.Document) - FRAMING;
}
