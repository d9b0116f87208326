/**
 * A createIndexes entry checked as mongod checks it before any index is built, with mongod's codes
 * and messages. What passes here may still be refused by indexes.ts (normalizeSpec) as
 * NotImplemented when the emulator lacks the index type or option.
 *
 * Sources (7.0, src/mongo/db/catalog/index_key_validate.cpp, re-read):
 *  - parseAndValidateIndexSpecs: validateIndexSpec's error gets the context "Error in specification
 *    <spec>" (Status::withContext: "<context> :: caused by :: <reason>"); then an `{_id: 1}` key
 *    goes through validateIdIndexSpec, any other key may not be named '_id_' (BadValue "The index
 *    name '_id_' is reserved for the _id index, which must have key pattern {_id: 1}, found
 *    key: <key>") or '*' (BadValue "The index name '*' is not valid.").
 *  - validateIndexSpecFieldNames: a field outside allowedFieldNames (index_key_validate.h) is
 *    InvalidIndexSpecificationOption (197) "The field '<f>' is not valid for an index
 *    specification. Specification: <spec>".
 *  - validateIndexSpec, field by field: `key` not an object TypeMismatch "The field 'key' must be an
 *    object, but got <type>", then validateKeyPattern (CannotCreateIndex, 67); `name` not a string
 *    TypeMismatch; `hidden` not a bool TypeMismatch "The field 'name' must be a bool, but got
 *    <type>" (sic: the message names kIndexNameFieldName); `v` not a number TypeMismatch, not an
 *    int BadValue, not 1 or 2 CannotCreateIndex "Invalid index specification <spec>; cannot create
 *    an index with v=<n>" (isIndexVersionAllowedForCreation); `collation` and
 *    `partialFilterExpression` not objects TypeMismatch, an empty collation BadValue; `background`,
 *    `unique`, `sparse`, `dropDups`, `prepareUnique` neither a number nor a bool TypeMismatch "The
 *    field '<f> has value <f>: <value>, which is not convertible to bool" (sic); then a missing `key`
 *    or `name` FailedToParse "The '<f>' field is a required property of an index specification";
 *    `unique` with `prepareUnique` CannotCreateIndex.
 *  - validateKeyPattern (v2 rules, always the latest version for new indexes): "Index keys cannot be
 *    empty.", an unknown plugin name "Unknown index plugin '<name>'", per key: NaN / 0 / a value
 *    neither a number nor a string ("Values in v:2 index key pattern cannot be of type <type>. Only
 *    numbers > 0, numbers < 0, and strings are allowed."), two plugin names ("Can't use more than one
 *    index plugin for a single index."), an empty field name, an empty path part, a '$'-prefixed
 *    part; then empty string values "Values in the index key pattern cannot be empty strings".
 *  - validateIdIndexSpec: on the validated spec (`ns` removed, `v` appended when missing) a field
 *    other than collation, name, v, key, ns, _id is 197 "The field '<f>' is not valid for an _id
 *    index specification. Specification: <spec>".
 * BSON values print as BSONObj::toString prints them (values.ts formatValue).
 */
import type { Document } from 'bson';
import { Codes, MongoCommandError } from './errors';
import { numKind, toNumber } from './numbers';
import { bsonTypeName } from './update-rules';
import { formatValue, isPlainObject } from './values';

/** index_key_validate::allowedFieldNames (7.0 set; index_key_validate.h). */
const ALLOWED_FIELD_NAMES = new Set([
  'bits', 'max', 'min', 'coarsestIndexedLevel', 'finestIndexedLevel', '2dsphereIndexVersion', 'background', 'collation',
  'default_language', 'dropDups', 'expireAfterSeconds', 'hidden', 'name', 'v', 'key', 'language_override', 'ns',
  'partialFilterExpression', 'wildcardProjection', 'columnstoreProjection', 'sparse', 'storageEngine', 'textIndexVersion',
  'unique', 'weights', 'originalSpec', 'prepareUnique', 'columnstoreCompressor', '_id', 'bucketSize', 'clustered',
]);

/** allowedIdIndexFieldNames. */
const ALLOWED_ID_INDEX_FIELD_NAMES = new Set(['collation', 'name', 'v', 'key', 'ns', '_id']);

/** IndexNames::isKnownName: the plugin names a key pattern may use ('' is the btree). */
const KNOWN_PLUGINS = new Set(['', '2d', '2dsphere', '2dsphere_bucket', 'text', 'hashed', 'wildcard', 'columnstore']);

const BOOLEAN_OPTIONS = new Set(['background', 'unique', 'sparse', 'dropDups', 'prepareUnique']);

function isNumber(v: unknown): boolean {
  return numKind(v) !== undefined;
}

/** IndexNames::findPluginName: the first string value, or 'wildcard' for a '$**' field. */
function pluginName(key: Document): string {
  for (const [f, v] of Object.entries(key)) {
    if (typeof v === 'string') return v;
    if (f === '$**' || f.endsWith('.$**')) return 'wildcard';
  }
  return '';
}

/** validateKeyPattern for v2; returns the reason, or undefined when the pattern is valid. */
function keyPatternProblem(key: Document): string | undefined {
  const keys = Object.keys(key);
  if (!keys.length) return 'Index keys cannot be empty.';
  const plugin = pluginName(key);
  if (plugin === 'geoHaystack') return 'GeoHaystack indexes cannot be created in version 5.0 and above';
  if (!KNOWN_PLUGINS.has(plugin)) return `Unknown index plugin '${plugin}'`;
  for (const field of keys) {
    const v = key[field];
    if (isNumber(v)) {
      const n = toNumber(v);
      if (Number.isNaN(n)) return 'Values in the index key pattern cannot be NaN.';
      if (n === 0) return 'Values in the index key pattern cannot be 0.';
    } else if (typeof v !== 'string') {
      return `Values in v:2 index key pattern cannot be of type ${bsonTypeName(v)}. Only numbers > 0, numbers < 0, and strings are allowed.`;
    }
    if (typeof v === 'string' && plugin !== v) return "Can't use more than one index plugin for a single index.";
    if (field === '') return 'Index keys cannot be an empty field.';
    if (field === '$**') continue;
    if (field === '_fts' && v !== 'text') return "Index key contains an illegal field name: '_fts'";
    const parts = field.split('.');
    for (let i = 0; i < parts.length; i++) {
      const part = parts[i];
      if (part === '') return 'Index keys cannot contain an empty field.';
      if (!part.startsWith('$')) continue;
      const dbRefPart = i !== 0 && (part === '$db' || part === '$id' || part === '$ref');
      const wildcardTail = i === parts.length - 1 && part === '$**' && (plugin === 'wildcard' || plugin === 'columnstore');
      if (!dbRefPart && !wildcardTail) return "Index key contains an illegal field name: field name starts with '$'.";
    }
  }
  for (const v of Object.values(key)) if (v === '') return 'Values in the index key pattern cannot be empty strings';
  return undefined;
}

/** Throws mongod's error for a createIndexes entry mongod refuses (see the module comment). */
export function validateIndexSpec(raw: Document): void {
  const spec = formatValue(raw);
  const inSpec = (code: number, why: string): MongoCommandError => new MongoCommandError(code, `Error in specification ${spec} :: caused by :: ${why}`);
  for (const f of Object.keys(raw)) {
    if (!ALLOWED_FIELD_NAMES.has(f)) throw inSpec(Codes.InvalidIndexSpecificationOption, `The field '${f}' is not valid for an index specification. Specification: ${spec}`);
  }
  for (const [f, v] of Object.entries(raw)) {
    if (f === 'key') {
      if (!isPlainObject(v)) throw inSpec(Codes.TypeMismatch, `The field 'key' must be an object, but got ${bsonTypeName(v)}`);
      const problem = keyPatternProblem(v);
      if (problem) throw inSpec(Codes.CannotCreateIndex, problem);
    } else if (f === 'name') {
      if (typeof v !== 'string') throw inSpec(Codes.TypeMismatch, `The field 'name' must be a string, but got ${bsonTypeName(v)}`);
    } else if (f === 'hidden') {
      if (typeof v !== 'boolean') throw inSpec(Codes.TypeMismatch, `The field 'name' must be a bool, but got ${bsonTypeName(v)}`);
    } else if (f === 'v') {
      if (!isNumber(v)) throw inSpec(Codes.TypeMismatch, `The field 'v' must be a number, but got ${bsonTypeName(v)}`);
      const n = toNumber(v);
      if (!Number.isInteger(n) || n < -(2 ** 31) || n >= 2 ** 31) throw inSpec(Codes.BadValue, `Index version must be representable as a 32-bit integer, but got ${formatValue(v)}`);
      if (n !== 1 && n !== 2) throw inSpec(Codes.CannotCreateIndex, `Invalid index specification ${spec}; cannot create an index with v=${n}`);
    } else if (f === 'collation' || f === 'partialFilterExpression') {
      if (!isPlainObject(v)) throw inSpec(Codes.TypeMismatch, `The field '${f}' must be an object, but got ${bsonTypeName(v)}`);
      if (f === 'collation' && !Object.keys(v).length) throw inSpec(Codes.BadValue, "The field 'collation' cannot be an empty object.");
    } else if (BOOLEAN_OPTIONS.has(f)) {
      if (!isNumber(v) && typeof v !== 'boolean') throw inSpec(Codes.TypeMismatch, `The field '${f} has value ${f}: ${formatValue(v)}, which is not convertible to bool`);
    }
  }
  if (raw.key === undefined) throw inSpec(Codes.FailedToParse, "The 'key' field is a required property of an index specification");
  if (raw.name === undefined) throw inSpec(Codes.FailedToParse, "The 'name' field is a required property of an index specification");
  const truthy = (v: unknown): boolean => (isNumber(v) ? toNumber(v) !== 0 : !!v);
  if (truthy(raw.unique) && truthy(raw.prepareUnique)) {
    throw inSpec(Codes.CannotCreateIndex, `Invalid index specification ${spec}; cannot create an index with the 'unique' option and the 'prepareUnique' option`);
  }
  const key = raw.key as Document;
  const keys = Object.keys(key);
  const isIdPattern = keys.length === 1 && keys[0] === '_id' && isNumber(key._id) && toNumber(key._id) === 1;
  if (isIdPattern) {
    // validateIdIndexSpec sees the validated spec: `ns` dropped, `v` appended when it was missing.
    const validated: Document = {};
    for (const [f, v] of Object.entries(raw)) if (f !== 'ns') validated[f] = v;
    if (validated.v === undefined) validated.v = 2;
    for (const f of Object.keys(validated)) {
      if (!ALLOWED_ID_INDEX_FIELD_NAMES.has(f)) {
        throw new MongoCommandError(Codes.InvalidIndexSpecificationOption, `The field '${f}' is not valid for an _id index specification. Specification: ${formatValue(validated)}`);
      }
    }
    return;
  }
  if (raw.name === '_id_') throw new MongoCommandError(Codes.BadValue, `The index name '_id_' is reserved for the _id index, which must have key pattern {_id: 1}, found key: ${formatValue(key)}`);
  if (raw.name === '*') throw new MongoCommandError(Codes.BadValue, "The index name '*' is not valid.");
}
