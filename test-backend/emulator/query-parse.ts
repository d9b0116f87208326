/**
 * The parse-time rules of a query filter, checked as MatchExpressionParser checks them before any
 * document is read (so a filter mongod refuses is refused also on an empty or missing collection).
 * Matching itself stays with mingo and query-operators.ts.
 *
 * Sources (src/mongo/db/matcher/expression_parser.cpp, read at several releases; the rules below are
 * the same in each):
 *  - parseTreeTopLevel ($and/$or/$nor): BadValue "<$op> must be an array", "$and/$or/$nor must be a
 *    nonempty array", "$or/$and/$nor entries need to be full objects"; the entries are parsed at the
 *    level of the operator itself.
 *  - parseExpr: at DocumentParseLevel::kUserSubDocument (inside an $elemMatch object) BadValue "$expr
 *    can only be applied to the top-level document".
 *  - parseElemMatch: BadValue "$elemMatch needs an Object"; its object form is parsed at the
 *    sub-document level, its value form ({$gt: ...}) operator by operator.
 *  - parseNot: BadValue "$not needs a regex or a document", "$not cannot be empty".
 *  - $in / $nin: BadValue "$in needs an array" / "$nin needs an array", "cannot nest $ under $in".
 *  - parseType and MatcherTypeSet::parse (src/mongo/db/matcher/matcher_type_set.cpp): TypeMismatch
 *    "type must be represented as a number or a string"; BadValue "Unknown type name alias: <s>",
 *    "'missing' is not a legal type name. To query for non-existence of a field, use
 *    {$exists:false}.", "Invalid numerical type code: <n>" (and ". Instead use {$exists:false}." for
 *    0); FailedToParse "<path> must match at least one type" for an empty list. The aliases are
 *    kTypeAliasMap's (bsontypes.cpp) and "number".
 *  - parseSubField's $options case: BadValue "$options needs a $regex"; parseRegexDocument: BadValue
 *    "$regex has to be a string", "$options has to be a string", 51075/51074 "options set in both
 *    $regex and $options".
 *  - The regex flags: pcre_util::flagsToOptions (src/mongo/util/pcre_util.cpp, called by
 *    RegexMatchExpression::makeRegex with the default empty opName): 51108 "{opName} invalid flag in
 *    regex options: {flag}", so with a leading space (" invalid flag in regex options: z"; FerretDB's
 *    compatibility tests record the same text from mongod). Valid: i, m, s, u, x. The emulator
 *    matches with JavaScript regexes, which have no 'x': that flag is refused as NotImplemented.
 * A top-level operator the parser does not know is left to the matcher (its own message).
 */
import type { Document } from 'bson';
import { Codes, MongoCommandError, unsupported } from './errors';
import { numKind, toNumber } from './numbers';
import { isPlainObject } from './values';

type Level = 'top' | 'sub';

/** kTypeAliasMap (src/mongo/bson/bsontypes.cpp) plus MatcherTypeSet::kMatchesAllNumbersAlias. */
const TYPE_ALIASES = new Set([
  'double', 'string', 'object', 'array', 'binData', 'undefined', 'objectId', 'bool', 'date', 'null', 'regex', 'dbPointer',
  'javascript', 'symbol', 'javascriptWithScope', 'int', 'timestamp', 'long', 'decimal', 'minKey', 'maxKey', 'number',
]);

/** isValidBSONType: MinKey, the types 1 to 19, MaxKey. */
function isValidTypeCode(n: number): boolean {
  return n === -1 || n === 127 || (n >= 1 && n <= 19);
}

/** The pathless operators retrievePathlessParser knows (the top-level `$` keys it parses). */
const PATHLESS = new Set(['$and', '$or', '$nor', '$expr', '$where', '$text', '$comment', '$jsonSchema', '$alwaysTrue', '$alwaysFalse', '$sampleRate', '$ref', '$id', '$db']);

const VALID_REGEX_FLAGS = new Set(['i', 'm', 's', 'u', 'x']);

const bad = (msg: string): MongoCommandError => new MongoCommandError(Codes.BadValue, msg);

function isRegex(v: unknown): boolean {
  return v instanceof RegExp || (v as { _bsontype?: string } | null)?._bsontype === 'BSONRegExp';
}

/** isExpressionDocument: an object whose first field starts with '$' and that is not a DBRef. */
function isExpressionDocument(v: unknown, allowIncompleteDBRef: boolean): v is Document {
  if (!isPlainObject(v)) return false;
  const keys = Object.keys(v);
  if (!keys.length || !keys[0].startsWith('$')) return false;
  const has = (k: string): boolean => keys.includes(k);
  const dbRef = allowIncompleteDBRef ? has('$ref') || has('$id') || has('$db') : has('$ref') && has('$id');
  return !dbRef;
}

/** Throws mongod's parse error for `filter`, if it has one (see the module comment). */
export function checkFilterSyntax(filter: unknown): void {
  if (!isPlainObject(filter)) return;
  parse(filter, 'top');
}

function parse(obj: Document, level: Level): void {
  for (const [k, v] of Object.entries(obj)) {
    if (k.startsWith('$')) {
      if (k === '$and' || k === '$or' || k === '$nor') parseTree(k, v, level);
      else if (k === '$expr' && level === 'sub') throw bad('$expr can only be applied to the top-level document');
      continue;
    }
    if (isExpressionDocument(v, false)) {
      for (const [op, arg] of Object.entries(v)) parseSubField(k, op, arg, v, level);
    }
  }
}

function parseTree(op: string, v: unknown, level: Level): void {
  if (!Array.isArray(v)) throw bad(`${op} must be an array`);
  if (!v.length) throw bad('$and/$or/$nor must be a nonempty array');
  for (const e of v) {
    if (!isPlainObject(e)) throw bad('$or/$and/$nor entries need to be full objects');
    parse(e, level);
  }
}

function parseSubField(path: string, op: string, arg: unknown, context: Document, level: Level): void {
  switch (op) {
    case '$not':
      if (isRegex(arg)) return;
      if (!isPlainObject(arg)) throw bad('$not needs a regex or a document');
      if (!Object.keys(arg).length) throw bad('$not cannot be empty');
      for (const [sub, subArg] of Object.entries(arg)) parseSubField(path, sub, subArg, arg, level);
      return;
    case '$in':
    case '$nin':
      if (!Array.isArray(arg)) throw bad(`${op} needs an array`);
      for (const e of arg) if (isExpressionDocument(e, false)) throw bad('cannot nest $ under $in');
      return;
    case '$type':
      parseType(path, arg);
      return;
    case '$options':
      if (!Object.keys(context).includes('$regex')) throw bad('$options needs a $regex');
      return;
    case '$regex':
      parseRegexDocument(context);
      return;
    case '$elemMatch':
      parseElemMatch(arg);
      return;
    default:
      return;
  }
}

function parseElemMatch(arg: unknown): void {
  // The driver decodes { $ref, $id[, $db] } as a DBRef: a BSON object, matched as a DBRef (object form).
  if ((arg as { _bsontype?: string } | null)?._bsontype === 'DBRef') return;
  if (!isPlainObject(arg)) throw bad('$elemMatch needs an Object');
  const first = Object.keys(arg)[0];
  // The value form ({$elemMatch: {$gt: 1}}): operators on the element itself.
  if (isExpressionDocument(arg, true) && !PATHLESS.has(first)) {
    for (const [op, opArg] of Object.entries(arg)) parseSubField('', op, opArg, arg, 'sub');
    return;
  }
  parse(arg, 'sub');
}

function parseType(path: string, arg: unknown): void {
  const list = Array.isArray(arg) ? arg : [arg];
  for (const t of list) parseSingleType(t);
  if (Array.isArray(arg) && !arg.length) throw new MongoCommandError(Codes.FailedToParse, `${path} must match at least one type`);
}

function parseSingleType(t: unknown): void {
  if (typeof t === 'string') {
    if (TYPE_ALIASES.has(t)) return;
    if (t === 'missing') throw bad("'missing' is not a legal type name. To query for non-existence of a field, use {$exists:false}.");
    throw bad(`Unknown type name alias: ${t}`);
  }
  if (numKind(t) === undefined) throw new MongoCommandError(Codes.TypeMismatch, 'type must be represented as a number or a string');
  const n = toNumber(t);
  if (!Number.isFinite(n)) throw unsupported(`$type with the number ${String(n)} (its rendering in mongod's message is not sourced)`);
  if (!Number.isInteger(n) || n < -(2 ** 31) || n >= 2 ** 31) throw bad(`Invalid numerical type code: ${n}`);
  if (n === 0) throw bad('Invalid numerical type code: 0. Instead use {$exists:false}.');
  if (!isValidTypeCode(n)) throw bad(`Invalid numerical type code: ${n}`);
}

/** parseRegexDocument over the whole operator object, then the regex flags. */
function parseRegexDocument(context: Document): void {
  let options: string | undefined;
  let regexHasFlags = false;
  for (const [k, v] of Object.entries(context)) {
    if (k === '$regex') {
      if (typeof v === 'string') continue;
      if (!isRegex(v)) throw bad('$regex has to be a string');
      const flags = v instanceof RegExp ? v.flags : ((v as { options?: string }).options ?? '');
      if (flags) {
        if (options) throw new MongoCommandError(51074, 'options set in both $regex and $options');
        options = flags;
        regexHasFlags = true;
      }
    } else if (k === '$options') {
      if (typeof v !== 'string') throw bad('$options has to be a string');
      if (regexHasFlags) throw new MongoCommandError(51075, 'options set in both $regex and $options');
      options = v;
    }
  }
  for (const flag of options ?? '') {
    if (!VALID_REGEX_FLAGS.has(flag)) throw new MongoCommandError(51108, ` invalid flag in regex options: ${flag}`);
  }
  if (options?.includes('x')) throw unsupported("the regex option 'x' (extended)");
}
