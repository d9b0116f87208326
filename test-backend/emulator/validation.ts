/**
 * Document validation: a collection's `validator` (query-operator form), `validationLevel`
 * (off | strict | moderate) and `validationAction` (error | warn), set by `create` and `collMod`,
 * checked on every committed or transactional document write that has a new version (inserts,
 * updates, replacements, upserts, findAndModify), and the DocumentValidationFailure (121) it answers.
 *
 * Sources (mongodb/mongo):
 *  - the failure: CollectionImpl::checkValidationAndParseResult (src/mongo/db/catalog/
 *    collection_impl.cpp): DocumentValidationFailure "Document failed validation" carrying
 *    `errInfo` = doc_validation_error::generateError: {failingDocumentId: <_id>, details};
 *    crud spec test findOneAndUpdate-errorResponse.json ("document validation errInfo is
 *    accessible");
 *  - `details`: src/mongo/db/matcher/doc_validation_error.cpp (ValidationErrorPreVisitor:
 *    generateComparisonError "comparison failed" / "comparison succeeded", generateTypeError
 *    "type did not match" + consideredValue(s) + consideredType(s), ExistsMatchExpression "path
 *    does not exist" / "path does exist", InMatchExpression "no matching value found in array" /
 *    "matching value found in array", appendMissingField "field was missing",
 *    createValuesArray with kTraverseOmitArray, appendConsideredValues (one value:
 *    consideredValue, else consideredValues), postVisitTreeOperator "clausesNotSatisfied" with
 *    {index, details} for $and and $or) and its unit tests
 *    src/mongo/db/matcher/doc_validation_error_test.cpp (BasicEq, EqNoOperator, BasicNe, BasicIn,
 *    BasicNin, BasicGt..., ImplicitAnd, BasicAnd, BasicOr, BasicExists, NotExists, BasicType,
 *    TypeMissingPath, TypeImplicitArrayTraversal): the annotation `specifiedAs` is the clause as
 *    written (`{a: {$lt: 10}}` for one operator of `{a: {$gt: 0, $lt: 10}}`), `operatorName`
 *    `$eq` for implicit equality; the parser's root is an `$and` (expression_parser.cpp
 *    parse(): createAnnotation(expCtx, "$and", ...)) that collapses to its only child;
 *  - levels and actions: manual "Specify Validation Level for Existing Documents" (moderate:
 *    updates of documents that did not already satisfy the validator are not checked; inserts
 *    are) and "Choose How to Handle Invalid Documents" (warn: the write succeeds);
 *  - bypassDocumentValidation: manual "Bypass Schema Validation" (insert, update, findAndModify,
 *    aggregate with $out/$merge, applyOps; delete does not validate).
 *
 * Refused when the validator is set (NotImplemented naming the operator): every operator whose
 * details are not implemented here ($jsonSchema, $expr, $not, $nor, $regex and regex values,
 * $elemMatch, $all, $size, $mod, bit operators, geo...), numeric path components (mongod's array
 * index semantics), and a failure that would report more than 10 considered values
 * (internalQueryMaxDocValidationErrorConsideredValues truncation is not modelled).
 */
import type { Document } from 'bson';
import type { Query } from 'mingo';
import { makeQuery } from './mingo-context';
import { MongoCommandError, toCommandError, unsupported } from './errors';
import { numKind } from './numbers';
import type { Collection } from './storage/collection';
import { isPlainObject } from './values';

type LeafOp = '$eq' | '$ne' | '$gt' | '$gte' | '$lt' | '$lte' | '$in' | '$nin' | '$exists' | '$type';
const LEAF_OPS = new Set<string>(['$eq', '$ne', '$gt', '$gte', '$lt', '$lte', '$in', '$nin', '$exists', '$type']);

type Node =
  | { kind: 'and' | 'or'; clauses: Node[]; filter: Document }
  | { kind: 'leaf'; op: LeafOp; path: string; specifiedAs: Document; filter: Document };

export const VALIDATION_LEVELS = ['off', 'strict', 'moderate'];
export const VALIDATION_ACTIONS = ['error', 'warn'];

function hasRegExp(v: unknown): boolean {
  if (v instanceof RegExp || (v as { _bsontype?: string } | null)?._bsontype === 'BSONRegExp') return true;
  if (Array.isArray(v)) return v.some(hasRegExp);
  if (isPlainObject(v)) return Object.values(v).some(hasRegExp);
  return false;
}

/** parse() of expression_parser.cpp over the supported subset: a root `$and` collapsing to one child. */
function parseDocument(filter: Document): Node {
  const clauses: Node[] = [];
  for (const [k, v] of Object.entries(filter)) {
    if (k === '$and' || k === '$or') {
      if (!Array.isArray(v) || !v.length || !v.every(isPlainObject)) throw unsupported(`a validator ${k} that is not a non-empty array of documents (mongod's parse error is not sourced here)`);
      clauses.push({ kind: k === '$and' ? 'and' : 'or', clauses: (v as Document[]).map(parseDocument), filter: { [k]: v } });
      continue;
    }
    if (k.startsWith('$')) throw unsupported(`the validator operator ${k} (its document validation details are not implemented)`);
    clauses.push(parseField(k, v));
  }
  if (clauses.length === 1) return clauses[0];
  if (!clauses.length) throw unsupported('an empty clause in a validator');
  return { kind: 'and', clauses, filter };
}

function parseField(path: string, v: unknown): Node {
  if (path.split('.').some((p) => /^\d+$/.test(p) || p === '')) throw unsupported(`the validator path '${path}' (numeric or empty path components)`);
  if (hasRegExp(v)) throw unsupported('$regex in a validator (its document validation details are not implemented)');
  const isOperatorObject = isPlainObject(v) && Object.keys(v).length > 0 && Object.keys(v)[0].startsWith('$');
  if (!isOperatorObject) return { kind: 'leaf', op: '$eq', path, specifiedAs: { [path]: v }, filter: { [path]: v } };
  const ops = Object.entries(v as Document);
  const leaves: Node[] = ops.map(([op, arg]) => {
    if (!LEAF_OPS.has(op)) throw unsupported(`the validator operator ${op} (its document validation details are not implemented)`);
    if ((op === '$in' || op === '$nin') && !Array.isArray(arg)) throw unsupported(`${op} with a non-array argument in a validator`);
    if (op === '$type' && !(typeof arg === 'string' || numKind(arg) !== undefined || (Array.isArray(arg) && arg.length > 0))) throw unsupported('$type with this argument in a validator');
    const spec = { [path]: { [op]: arg } };
    return { kind: 'leaf', op: op as LeafOp, path, specifiedAs: spec, filter: spec };
  });
  return leaves.length === 1 ? leaves[0] : { kind: 'and', clauses: leaves, filter: { [path]: v } };
}

interface Compiled {
  source: Document;
  tree: Node;
  query: Query;
  clauseQueries: Map<Node, Query>;
}

const compiledByCollection = new WeakMap<Collection, Compiled>();

/**
 * Checks a validator for `create`/`collMod`: the supported operators only (NotImplemented naming
 * the first other one) and an expression mingo can compile. An empty validator means none.
 */
export function checkValidator(validator: unknown): void {
  if (!isPlainObject(validator)) throw unsupported('a validator that is not a document (mongod\'s type error is not sourced here)');
  if (!Object.keys(validator).length) return;
  if ('$jsonSchema' in validator) throw unsupported('$jsonSchema validators');
  compile(validator);
}

function compile(validator: Document): Compiled {
  const tree = parseDocument(validator);
  let query: Query;
  try {
    query = makeQuery(validator);
  } catch (e) {
    throw toCommandError(e);
  }
  return { source: validator, tree, query, clauseQueries: new Map() };
}

function compiledFor(coll: Collection): Compiled | undefined {
  const v = coll.options.validator as Document | undefined;
  if (!v || !Object.keys(v).length) return undefined;
  let c = compiledByCollection.get(coll);
  if (!c || c.source !== v) compiledByCollection.set(coll, (c = compile(v)));
  return c;
}

/**
 * The write path's check (writes.ts applyWrite calls it only for collections whose options hold a
 * validator). `before` is the version being replaced (null for inserts and upserts).
 */
export function validateWrite(coll: Collection, before: Document | null, after: Document): void {
  const level = (coll.options.validationLevel as string | undefined) ?? 'strict';
  if (level === 'off') return;
  const c = compiledFor(coll);
  if (!c || c.query.test(after)) return;
  // moderate: an update of a document that did not satisfy the validator is not checked.
  if (level === 'moderate' && before && !c.query.test(before)) return;
  if ((coll.options.validationAction as string | undefined) === 'warn') return;
  throw new MongoCommandError(121, 'Document failed validation', { errInfo: { failingDocumentId: after._id, details: explain(c, c.tree, after) } }, 'DocumentValidationFailure');
}

function matches(c: Compiled, node: Node, doc: Document): boolean {
  let q = c.clauseQueries.get(node);
  if (!q) c.clauseQueries.set(node, (q = makeQuery(node.filter)));
  return q.test(doc);
}

/** The details of a node the document fails (ValidationErrorPreVisitor / PostVisitor, normal context). */
function explain(c: Compiled, node: Node, doc: Document): Document {
  if (node.kind !== 'leaf') {
    const failing: Document[] = [];
    node.clauses.forEach((child, index) => {
      // An $and reports the clauses that fail; every clause of a failing $or fails.
      if (node.kind === 'or' || !matches(c, child, doc)) failing.push({ index, details: explain(c, child, doc) });
    });
    return { operatorName: node.kind === 'and' ? '$and' : '$or', clausesNotSatisfied: failing };
  }
  const out: Document = { operatorName: node.op, specifiedAs: node.specifiedAs };
  const found = valuesAt(doc, node.path.split('.'));
  if (node.op === '$exists') {
    out.reason = (node.specifiedAs[node.path] as Document).$exists ? 'path does not exist' : 'path does exist';
    return out;
  }
  if (!found.present) {
    out.reason = 'field was missing';
    return out;
  }
  if (found.values.length > 10) throw unsupported('a document validation failure over more than 10 considered values (the truncation is not modelled)');
  out.reason =
    node.op === '$type' ? 'type did not match'
    : node.op === '$in' ? 'no matching value found in array'
    : node.op === '$nin' ? 'matching value found in array'
    : node.op === '$ne' ? 'comparison succeeded'
    : 'comparison failed';
  if (found.values.length === 1) out.consideredValue = found.values[0];
  else out.consideredValues = found.values;
  if (node.op === '$type' && found.values.length) {
    const types = [...new Set(found.values.map(typeName))].sort();
    if (types.length === 1) out.consideredType = types[0];
    else out.consideredTypes = types;
  }
  return out;
}

/**
 * createValuesArray(path, kTraverseOmitArray): the values at `parts`, arrays on the way traversed
 * (their documents), a leaf array replaced by its elements; `present` tells a missing path from
 * an empty array.
 */
function valuesAt(doc: Document, parts: string[]): { present: boolean; values: unknown[] } {
  const values: unknown[] = [];
  let present = false;
  const walk = (v: unknown, i: number): void => {
    if (i === parts.length) {
      present = true;
      if (Array.isArray(v)) values.push(...v);
      else values.push(v);
      return;
    }
    if (Array.isArray(v)) {
      for (const el of v) if (isPlainObject(el)) walk(el, i);
      return;
    }
    if (isPlainObject(v) && v[parts[i]] !== undefined) walk(v[parts[i]], i + 1);
  };
  walk(doc, 0);
  return { present, values };
}

/** typeName(BSONType) (src/mongo/bson/bsontypes.cpp) of a value in the emulator's representation. */
function typeName(v: unknown): string {
  if (v === null) return 'null';
  if (v === undefined) return 'undefined';
  if (typeof v === 'string') return 'string';
  if (typeof v === 'boolean') return 'bool';
  const k = numKind(v);
  if (k) return k;
  if (typeof v === 'bigint') return 'long';
  if (Array.isArray(v)) return 'array';
  if (v instanceof Date) return 'date';
  if (v instanceof RegExp) return 'regex';
  switch ((v as { _bsontype?: string })._bsontype) {
    case 'ObjectId': return 'objectId';
    case 'Binary': return 'binData';
    case 'Timestamp': return 'timestamp';
    case 'BSONRegExp': return 'regex';
    case 'MinKey': return 'minKey';
    case 'MaxKey': return 'maxKey';
    case 'Code': return 'javascript';
    case 'BSONSymbol': return 'symbol';
    default: return 'object';
  }
}

/** The validation options of `create`/`collMod`, checked (values outside mongod's enums refused loudly). */
export function checkValidationOptions(cmd: Document, cmdName: string): Document {
  const out: Document = {};
  if (cmd.validator !== undefined) {
    checkValidator(cmd.validator);
    out.validator = cmd.validator;
  }
  if (cmd.validationLevel !== undefined) {
    if (!VALIDATION_LEVELS.includes(cmd.validationLevel as string)) throw unsupported(`${cmdName} validationLevel ${JSON.stringify(cmd.validationLevel)} (mongod's enum error is not sourced here)`);
    out.validationLevel = cmd.validationLevel;
  }
  if (cmd.validationAction !== undefined) {
    if (!VALIDATION_ACTIONS.includes(cmd.validationAction as string)) throw unsupported(`${cmdName} validationAction ${JSON.stringify(cmd.validationAction)} (mongod's enum error is not sourced here)`);
    out.validationAction = cmd.validationAction;
  }
  return out;
}
