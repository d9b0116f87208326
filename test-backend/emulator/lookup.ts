/**
 * `$lookup`, as mongod's DocumentSourceLookUp runs it (src/mongo/db/pipeline/document_source_lookup.cpp
 * @00090a2e, the 7.0 line; the 5.0 concise syntax included). mingo's own `$lookup` is not used: with
 * `localField`/`foreignField` and a `pipeline` it runs the pipeline over the whole foreign
 * collection instead of the joined documents, and it joins with its own equality instead of
 * mongod's query semantics.
 *
 * Parsing (errors as mongod's, checked in mongod's order):
 *  - `DocumentSourceLookUp::LiteParsed::parse` (run for the whole command before any stage is
 *    built): the specification must be an object (FailedToParse, "the $lookup stage specification
 *    must be an object, but found <type>"); `from` must be a string or an object
 *    (`parseLookupFromAndResolveNamespace`: "$lookup 'from' field must be a string, but found
 *    <type>"), the object form only for config.cache.chunks.*, local.oplog.rs and
 *    local.tenantMigration.oplogView ("$lookup with syntax {from: {db:<>, coll:<>},..} is not
 *    supported for db: <db> and coll: <coll>").
 *  - `DocumentSourceLookUp::createFromBson`: `let` must be an object, every other argument but
 *    `pipeline`/`from` a string; unknown arguments are FailedToParse "unknown argument to $lookup:
 *    <name>"; then "must specify 'as' field for a $lookup"; with a `pipeline`, "$lookup requires
 *    both or neither of 'localField' and 'foreignField' to be specified"; without one, "$lookup
 *    requires either 'pipeline' or both 'localField' and 'foreignField' to be specified" and
 *    "$lookup with a 'let' argument must also specify 'pipeline'"; `let` names as
 *    `variableValidation::validateNameForUserWrite` (let.ts, 16866-16868).
 *  Refused as NotImplemented (mongod's errmsg prints the BSON element, not reproduced here): a
 *  non-object `let`, a non-string argument, a non-array `pipeline` or a non-object stage in it; and
 *  what this emulator does not implement: `from` omitted (a `$documents` sub-pipeline), an empty
 *  or unusual `from` name (mongod: InvalidNamespace "invalid $lookup namespace: <ns>"), the
 *  special namespaces of the object form, `_internalCollation`, an `as`/`localField`/`foreignField`
 *  that is not a plain field path (`$`-prefixed, empty components), a dotted `as`, and a
 *  sub-pipeline starting with `$documents`.
 *
 * Execution, per input document (`DocumentSourceLookUp::doGetNext`):
 *  - with `localField`/`foreignField`: the values at `localField` (`visitAllValuesAtPath` in
 *    src/mongo/db/pipeline/document_path_support.cpp: arrays along the path and a trailing array
 *    are expanded one level, missing values skipped; none at all is treated as null), turned into
 *    the query `{ $and: [{ <foreignField>: { $eq: v } } | { <foreignField>: { $in: [...] } } |
 *    { $or: [{ <foreignField>: { $eq: v } }, ...] } (with a regex among several values), {}] }`
 *    (`makeMatchStageFromInput`), evaluated with query semantics on the foreign collection; with a
 *    `pipeline` (the 5.0 concise syntax), that match comes first and the pipeline runs on its
 *    result;
 *  - `let` variables are evaluated against the input document (`resolveLetVariables`) and visible
 *    in the sub-pipeline beside the command's own variables; the sub-pipeline's expression context
 *    is a copy of the command's (`expCtx->copyForSubPipeline`), so `$$NOW` there is the command's
 *    (bound once per command by query.ts `bindPipeline`);
 *  - the results, in the order the sub-pipeline yields them, become the array `as` (`setNestedField`).
 * The foreign documents come from the command's view of the collection (a transaction's snapshot
 * plus its writes, or a snapshot read's time: crud.ts `resolverDocs`); mongod reads them through the
 * same snapshot.
 */
import type { Document } from 'bson';
import { Codes, MongoCommandError, unsupported } from './errors';
import { checkLetName } from './let';
import { bsonTypeName } from './update-rules';
import { clone, isPlainObject, keyOf } from './values';

type Options = { variables?: Document; collectionResolver?: (name: string) => Document[] } & Record<string, unknown>;
type LazyIterator = { map(fn: (doc: Document) => Document): LazyIterator };

/** What the stage needs from mingo-context.ts (passed in to avoid an import cycle). */
export interface LookupDeps {
  runPipeline(stages: Document[], docs: Document[], variables: Document | undefined, resolver: ((name: string) => Document[]) | undefined): Document[];
  matcher(filter: Document): { test(doc: Document): boolean };
  evaluate(doc: Document, expr: unknown, variables: Document | undefined): unknown;
}

interface LookupSpec {
  from: string;
  as: string;
  localField?: string;
  foreignField?: string;
  pipeline?: Document[];
  letSpec: Document;
}

const failedToParse = (message: string) => new MongoCommandError(Codes.FailedToParse, message);

/** The object form of `from` that mongod accepts (parseLookupFromAndResolveNamespace). */
function isSpecialNamespace(db: string, coll: string): boolean {
  return (db === 'config' && coll.startsWith('cache.chunks.')) || (db === 'local' && (coll === 'oplog.rs' || coll === 'tenantMigration.oplogView'));
}

/** A plain field path: non-empty components, none starting with `$` (FieldPath's rules, whose errors are not reproduced). */
function isPlainPath(path: string): boolean {
  return path.length > 0 && !path.includes('\0') && path.split('.').every((part) => part.length > 0 && !part.startsWith('$'));
}

/** LiteParsed::parse, then createFromBson. */
export function parseLookup(raw: unknown): LookupSpec {
  if (!isPlainObject(raw)) throw failedToParse(`the $lookup stage specification must be an object, but found ${bsonTypeName(raw)}`);
  const spec = raw;
  // ---- LiteParsed::parse
  if (!('from' in spec)) throw unsupported('$lookup without "from" (a $documents sub-pipeline)');
  const from = spec.from;
  if (typeof from !== 'string') {
    if (!isPlainObject(from)) throw failedToParse(`$lookup 'from' field must be a string, but found ${bsonTypeName(from)}`);
    const { db: fromDb, coll, ...rest } = from;
    if (typeof fromDb !== 'string' || typeof coll !== 'string' || Object.keys(rest).length > 0) throw unsupported("$lookup 'from' as an object other than { db: <string>, coll: <string> }");
    if (isSpecialNamespace(fromDb, coll)) throw unsupported(`$lookup from ${fromDb}.${coll}`);
    throw failedToParse(`$lookup with syntax {from: {db:<>, coll:<>},..} is not supported for db: ${fromDb} and coll: ${coll}`);
  }
  // An empty name is InvalidNamespace "invalid $lookup namespace: <db>." on mongod; the stage does
  // not know the command's database, so it refuses instead, like other names it does not check.
  if (from.length === 0 || from.includes('\0') || from.includes('$')) throw unsupported(`$lookup from the collection name ${JSON.stringify(from)}`);
  if ('pipeline' in spec) {
    const pipeline = spec.pipeline;
    if (!Array.isArray(pipeline) || !pipeline.every(isPlainObject)) throw unsupported("a $lookup 'pipeline' that is not an array of objects");
  }
  // ---- createFromBson: arguments in their order
  let as = '';
  let localField = '';
  let foreignField = '';
  let pipeline: Document[] | undefined;
  let letSpec: Document | undefined;
  for (const [name, value] of Object.entries(spec)) {
    if (name === 'pipeline') {
      pipeline = value as Document[];
      continue;
    }
    if (name === 'let') {
      if (!isPlainObject(value)) throw unsupported("a $lookup 'let' that is not an object");
      letSpec = value;
      continue;
    }
    if (name === 'from') continue;
    if (name === '_internalCollation') throw unsupported('$lookup _internalCollation');
    if (typeof value !== 'string') throw unsupported(`a non-string $lookup argument '${name}'`);
    if (name === 'as') as = value;
    else if (name === 'localField') localField = value;
    else if (name === 'foreignField') foreignField = value;
    else throw failedToParse(`unknown argument to $lookup: ${name}`);
  }
  if (as.length === 0) throw failedToParse("must specify 'as' field for a $lookup");
  if (pipeline !== undefined) {
    if ((localField.length === 0) !== (foreignField.length === 0)) {
      throw failedToParse("$lookup requires both or neither of 'localField' and 'foreignField' to be specified");
    }
  } else {
    if (localField.length === 0 || foreignField.length === 0) {
      throw failedToParse("$lookup requires either 'pipeline' or both 'localField' and 'foreignField' to be specified");
    }
    if (letSpec !== undefined) throw failedToParse("$lookup with a 'let' argument must also specify 'pipeline'");
  }
  for (const name of Object.keys(letSpec ?? {})) checkLetName(name);
  for (const [what, path] of [['as', as], ['localField', localField], ['foreignField', foreignField]] as const) {
    if (path.length > 0 && !isPlainPath(path)) throw unsupported(`the $lookup ${what} ${JSON.stringify(path)}`);
  }
  if (as.includes('.')) throw unsupported('a dotted $lookup "as"');
  if (pipeline?.[0] && '$documents' in pipeline[0]) throw unsupported('a $lookup sub-pipeline starting with $documents');
  return {
    from,
    as,
    localField: localField || undefined,
    foreignField: foreignField || undefined,
    pipeline,
    letSpec: letSpec ?? {},
  };
}

/** The values at `path` (document_path_support::visitAllValuesAtPath); an empty list when there are none. */
export function valuesAtPath(doc: Document, path: string): unknown[] {
  const parts = path.split('.');
  const out: unknown[] = [];
  const trailing = (value: unknown) => {
    if (Array.isArray(value)) {
      for (const element of value) if (element !== undefined) out.push(element);
    } else if (value !== undefined) out.push(value);
  };
  const visit = (current: Document, index: number): void => {
    // The first component is always a field name, even when numeric.
    let next: unknown = current[parts[index]];
    index++;
    if (index === parts.length) return trailing(next);
    // Consecutive numeric components index into arrays.
    while (index < parts.length && Array.isArray(next) && /^\d+$/.test(parts[index])) {
      next = next[Number(parts[index])];
      index++;
    }
    if (index === parts.length) return trailing(next);
    if (Array.isArray(next)) {
      // Arrays inside arrays are not expanded.
      for (const element of next) if (isPlainObject(element)) visit(element, index);
    } else if (isPlainObject(next)) visit(next, index);
  };
  visit(doc, 0);
  return out;
}

/** makeMatchStageFromInput's query for one input document (without the absorbed additional filter, always `{}` here). */
export function joinFilter(input: Document, localField: string, foreignField: string): Document {
  const values = valuesAtPath(input, localField);
  if (values.length === 0) values.push(null); // "Missing values are treated as null."
  let joining: Document;
  if (values.length === 1) joining = { [foreignField]: { $eq: values[0] } };
  else if (values.some((v) => v instanceof RegExp || (v as { _bsontype?: string } | null)?._bsontype === 'BSONRegExp')) {
    joining = { $or: values.map((v) => ({ [foreignField]: { $eq: v } })) };
  } else joining = { [foreignField]: { $in: values } };
  return { $and: [joining, {}] };
}

/** The `$lookup` pipeline operator for mingo's context. */
export function lookupStage(deps: LookupDeps) {
  return (collection: LazyIterator, raw: unknown, options: Options): LazyIterator => {
    const spec = parseLookup(raw);
    const resolver = options.collectionResolver;
    if (!resolver) throw unsupported('$lookup here (no collection resolver)');
    const outer = options.variables;
    let foreign: Document[] | undefined;
    let byId: Map<string, Document[]> | undefined;
    const foreignDocs = () => (foreign ??= resolver(spec.from));
    /** Documents whose `_id` equals one of `values` (the `_id` is unique, never an array, never missing). */
    const byIdLookup = (values: unknown[]): Document[] => {
      if (!byId) {
        byId = new Map();
        for (const doc of foreignDocs()) {
          const key = keyOf(doc._id);
          const list = byId.get(key);
          if (list) list.push(doc);
          else byId.set(key, [doc]);
        }
      }
      const seen = new Set<Document>();
      for (const v of values) for (const doc of byId.get(keyOf(v)) ?? []) seen.add(doc);
      // In the foreign collection's order, as a scan of it would return them.
      return seen.size <= 1 ? [...seen] : foreignDocs().filter((doc) => seen.has(doc));
    };
    const joined = (input: Document): Document[] => {
      if (spec.localField === undefined || spec.foreignField === undefined) return foreignDocs();
      if (spec.foreignField === '_id') {
        const values = valuesAtPath(input, spec.localField);
        if (values.length === 0) values.push(null);
        // Query equality on `_id` is equality of the canonical key (numbers across BSON types
        // included, values.ts keyOf), which is what the `_id` index compares.
        return byIdLookup(values);
      }
      const query = deps.matcher(joinFilter(input, spec.localField, spec.foreignField));
      return foreignDocs().filter((doc) => query.test(doc));
    };
    return collection.map((input) => {
      const variables = Object.keys(spec.letSpec).length > 0 ? { ...outer, ...(deps.evaluate(input, spec.letSpec, outer) as Document) } : outer;
      const matched = joined(input);
      // Copies: later stages must never reach the stored documents.
      const results = spec.pipeline && spec.pipeline.length > 0 ? deps.runPipeline(spec.pipeline, matched.map(clone), variables, resolver) : matched.map(clone);
      return { ...input, [spec.as]: results };
    });
  };
}
