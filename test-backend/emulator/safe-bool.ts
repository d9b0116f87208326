/**
 * The IDL `safeBool` type (src/mongo/idl/basic_types.idl: bson_serialization_type [bool, long, int,
 * decimal, double], deserializer BSONElement::trueValue), as the generated command parsers read it.
 *
 * - A value of another type fails the parse: IDLParserContext::checkAndAssertTypes /
 *   throwBadType (src/mongo/idl/idl_parser.cpp), TypeMismatch (14) "BSON field '<path>' is the
 *   wrong type '<typeName>', expected types '[bool, long, int, decimal, double']" (the closing quote
 *   sits before the bracket in mongod's stream; the same shape, `'[long, int, decimal, double']`,
 *   is quoted from mongod for aggregate's maxTimeMS by FerretDB's compatibility tests). The path is
 *   the parser context's name and the field (`getElementPath`): the command name for a top-level
 *   field, also for a chained struct's field (`'insert.ordered'` in the same tests). A typed
 *   command's context is named after `kCommandName` (typed_command.h RequestParser), so
 *   `findandmodify` reports `findAndModify`.
 * - null and undefined are ignored there ("If the type is wrong, ignore Null and Undefined values"):
 *   the field keeps its default (false).
 * - A number is true when non-zero (trueValue); jstests/aggregation/sources/merge/
 *   bypass_doc_validation.js testNonBooleanBypassDocValidationFlag: 5 bypasses, the string "false"
 *   fails with TypeMismatch.
 */
import { Codes, MongoCommandError, unsupported } from './errors';
import { numKind, toNumber } from './numbers';

const SAFE_BOOL_TYPES = 'bool, long, int, decimal, double';

/** typeName(BSONType) (src/mongo/bson/bsontypes.cpp) for the types a safeBool refuses; undefined when not mapped here. */
function refusedTypeName(v: unknown): string | undefined {
  if (typeof v === 'string') return 'string';
  if (Array.isArray(v)) return 'array';
  if (v instanceof Date) return 'date';
  if (v instanceof RegExp) return 'regex';
  const t = (v as { _bsontype?: string } | null)?._bsontype;
  switch (t) {
    case undefined:
      return typeof v === 'object' && v !== null ? 'object' : undefined;
    case 'ObjectId': return 'objectId';
    case 'Binary': return 'binData';
    case 'Timestamp': return 'timestamp';
    case 'BSONRegExp': return 'regex';
    case 'MinKey': return 'minKey';
    case 'MaxKey': return 'maxKey';
    case 'BSONSymbol': return 'symbol';
    case 'DBRef': return 'object';
    default: return undefined;
  }
}

/** Decimal128 zero ("0", "-0", "0E+3", "0.000"): trueValue is `!isZero()`, NaN included as true. */
function decimalIsZero(v: unknown): boolean {
  return /^[+-]?0*(\.0*)?(E[+-]?\d+)?$/i.test(String(v)) && /0/.test(String(v));
}

/** The value of the safeBool field `field` of the command `command` (its IDL context name). */
export function parseSafeBool(command: string, field: string, v: unknown): boolean {
  if (v === undefined || v === null) return false;
  if (typeof v === 'boolean') return v;
  const kind = numKind(v);
  if (kind === 'decimal') return !decimalIsZero(v);
  if (kind !== undefined) return toNumber(v) !== 0;
  const type = refusedTypeName(v);
  if (type === undefined) throw unsupported(`'${command}.${field}' of this BSON type (its type name in mongod's TypeMismatch message is not mapped here)`);
  throw new MongoCommandError(Codes.TypeMismatch, `BSON field '${command}.${field}' is the wrong type '${type}', expected types '[${SAFE_BOOL_TYPES}']`);
}
