/**
 * Loading the document a lock call has just locked: exactly the document
 * `Model.findById(id).read('primary').session(null)` returns, built without Mongoose's query
 * machinery when that machinery cannot change the result (issue 16, Performance).
 *
 * Never in the caller's transaction (`session(null)`, as lockMany's and lockNext's loads): no lock
 * call takes a session, its lock is taken outside any transaction on the latest data, and a
 * transaction would read its own older snapshot (R12). Without it, Mongoose's
 * `transactionAsyncLocalStorage` hands the session of an enclosing `connection.transaction()` to
 * the query (step 3 below).
 *
 * What `findById(id).read('primary')` does (Mongoose 9.12 and 8.24, lib/model.js and lib/query.js):
 *  1. `Model.findById` → `Model.findOne({ _id: id })`: a new `model.Query` on `model.$__collection`
 *     (the Query constructor copies the schema's `collation` into the options); `Query.findOne`
 *     merges the filter and, for a discriminator model, adds its key (prepareDiscriminatorCriteria);
 *     `.read('primary')` sets `options.readPreference = { mode: 'primary', tags: undefined }`.
 *     The Query constructor's `setOptions({})` (through mquery) copies a schema's `lean` option
 *     into the query, so for such a schema findById returns a plain object; the lock call's load
 *     is then `findById(id).read('primary').lean(false)`, which the direct load equals.
 *  2. `Query.exec`: the `mongoose:query` tracing channel (9.x), the query's own 'exec' hooks (none
 *     unless added to that query), then the schema's query middleware for the op 'findOne'
 *     (`_executePreHooks` / `_executePostHooks` on `model.Query.prototype._queryMiddleware`, the
 *     schema's hooks filtered at compile time by Model._applyQueryMiddleware). Hooks registered for
 *     'find' do not run: the op is 'findOne'. A pre hook can change the filter (soft-delete and
 *     tenant plugins), the projection or the options, or populate.
 *  3. `Query._findOne`: `_applyTranslateAliases`, `_castConditions` (the `_id` path's
 *     castForQuery, setters included, with `strictQuery` / `sanitizeFilter`), the connection's and
 *     Mongoose's global `maxTimeMS` and `allowDiskUse` (applyGlobalMaxTimeMS / applyGlobalDiskUse),
 *     then `_optionsForExec`: the schema's `readConcern` and `writeConcern`, the session of
 *     `transactionAsyncLocalStorage` (not when the query's session was set, to null too), the schema-level projection (`_applyPaths`: paths declared
 *     with `select`), then `this.mongooseCollection.findOne(filter, options)`.
 *  4. `Query._completeOne` (no populate, not lean): `completeOne` → `createModelAndInit(model, doc,
 *     projection, userProvidedFields = {}, options)` → `createModel` (the discriminator class named
 *     by the stored key, for a base model) and `doc.$init(raw, {})` (casting, `init` hooks,
 *     defaults for paths the document lacks), then `$session(...)` with the query's own session
 *     (`this.options.session`: a session from transactionAsyncLocalStorage reaches the command,
 *     not the document; with `session(null)` neither has one). `Model.hydrate(raw)` runs the same `createModel` and `$init(raw)`
 *     (lib/model.js, hydrate); the two differ only in `userProvidedFields` (undefined, not `{}`),
 *     which createModel reads only to apply a discriminator's `select: false` paths (excluded below).
 *
 * So the direct load sends the same `findOne(filter, options)` through the same Mongoose collection
 * and hydrates the reply with `Model.hydrate`, and it is used only for a model and a call where
 * none of steps 1-4 can make a difference: no discriminator child (its key filter), no 'findOne'
 * query middleware, no `select: false` path, no schema `collation` / `readConcern` /
 * `writeConcern`, no global or connection `maxTimeMS` / `allowDiskUse`, nobody subscribed to Mongoose's query tracing channel, Mongoose's
 * own `findById` / `findOne` / `hydrate` and Query methods on the model (not overridden on the model, and
 * Mongoose's own functions on its Query and Model, by their source: not patched process-wide, see mongooseOwn), and an `_id` type whose cast
 * of the id the lock was taken on is that very value (built-in types, no setter of the
 * application's own: see `idPathProblem`). Otherwise the load is `findById(id).read('primary').session(null)`.
 * __tests__/plugin/locked-document-load.test.ts checks both paths against findById.
 */
import { channel } from 'node:diagnostics_channel';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { Model, Query, mongo, type HydratedDocument, type Schema, type SchemaType } from 'mongoose';
import type { AnyModel } from './runtime';

type AnyDoc = HydratedDocument<unknown>;

/**
 * `_id` types whose cast of an id freshId returned (id-value.ts) is the same BSON value: the value
 * was cast to the path's type already (arguments.ts, idCaster), and these types' cast of a value of
 * their own type returns it (a Buffer id comes back as a Binary of the same subtype, a UUID as the
 * same 16 bytes). Not `Double` (its cast makes a BSON double of an integer the driver would send
 * as an int32), `Mixed` or custom types.
 */
const DIRECT_ID_TYPES: ReadonlySet<string> = new Set(['ObjectId', 'String', 'Number', 'Buffer', 'UUID', 'Decimal128', 'Date', 'BigInt', 'Int32']);

/**
 * The channels of Mongoose 9's `mongoose:query` tracing channel (lib/tracing.js; Node's
 * TracingChannel names). Held here, so each is the one object of its name that every subscriber
 * gets (`channel(name)` returns the live channel of a name) and `hasSubscribers` is a property read
 * rather than a lookup by name per load.
 */
const QUERY_TRACING_CHANNELS = ['start', 'end', 'asyncStart', 'asyncEnd', 'error'].map((event) => channel(`tracing:mongoose:query:${event}`));

/**
 * The Query methods findById(id).read('primary') runs (steps 1-4 above): a model's query helper
 * (`schema.query`, installed on the model's own Query prototype) with one of these names replaces it.
 */
const QUERY_METHODS = [
  'findOne',
  'read',
  'session',
  'lean',
  'select',
  'merge',
  'setOptions',
  'then',
  'exec',
  '_validateOp',
  'error',
  '_findOne',
  '_castConditions',
  '_applyTranslateAliases',
  '_optionsForExec',
  '_applyPaths',
  '_completeOne',
  'cast',
];

/** The Model statics findById(id) runs (lib/model.js). */
const MODEL_METHODS = ['findById', 'findOne', 'hydrate'];

/**
 * Mongoose's own source files, of the copy this module resolves (the application's, as a peer
 * dependency), read once when first needed; null where they cannot be read (a bundled build):
 * then no function is taken for Mongoose's own and every load is findById's.
 */
let mongooseSource: { query: string; model: string } | null | undefined;

function sourceOf(file: 'query' | 'model'): string | undefined {
  if (mongooseSource === undefined) {
    try {
      const lib = join(dirname(require.resolve('mongoose/package.json')), 'lib');
      mongooseSource = { query: readFileSync(join(lib, 'query.js'), 'utf8'), model: readFileSync(join(lib, 'model.js'), 'utf8') };
    } catch {
      mongooseSource = null;
    }
  }
  return mongooseSource?.[file];
}

/**
 * The Query and Model methods of the Mongoose this module resolves, as they were when it loaded.
 * Source text alone does not identify a function (the same text evaluated elsewhere closes over
 * other bindings; zone.js makes `Function.prototype.toString` answer a wrapper's original's text),
 * so a function is Mongoose's own only if it is also the very one found here at load: a patch made
 * after the plugin loaded is never taken for Mongoose's own, whatever its text. (A patch made
 * before, with Mongoose's exact text, is: docs/limits.md.) Models of another Mongoose copy have
 * other functions, so their loads are findById's.
 */
const atLoad: Record<'Query.prototype' | 'Model', Record<string, unknown>> = {
  'Query.prototype': Object.fromEntries(QUERY_METHODS.map((name) => [name, (Query.prototype as unknown as Record<string, unknown>)[name]])),
  Model: Object.fromEntries(MODEL_METHODS.map((name) => [name, (Model as unknown as Record<string, unknown>)[name]])),
};

/** Verdicts of mongooseOwn, by function and the assignment it was checked against. */
const ownVerdicts = new WeakMap<object, Map<string, boolean>>();

/**
 * Whether `fn` is Mongoose's own `<owner>.<name>`: its source text is that of the assignment
 * `<owner>.<name> = <fn>` in Mongoose's file. A process-wide patch of Mongoose's Query or Model
 * (@opentelemetry/instrumentation-mongoose wraps Query.prototype.exec with shimmer when mongoose
 * is required, before any plugin module loads; an app wrapping findOne to scope every query) is
 * another function, with other text: found on the prototype, it is not taken for Mongoose's own,
 * whenever it was installed. Judged once per function (a string search in the file).
 */
function mongooseOwn(fn: unknown, owner: 'Query.prototype' | 'Model', name: string): boolean {
  if (typeof fn !== 'function' || atLoad[owner][name] !== fn) return false;
  const assignment = `${owner}.${name}`;
  let verdicts = ownVerdicts.get(fn);
  const known = verdicts?.get(assignment);
  if (known !== undefined) return known;
  const file = sourceOf(owner === 'Model' ? 'model' : 'query');
  const own = file !== undefined && file.includes(`${assignment} = ${Function.prototype.toString.call(fn)}`);
  if (!verdicts) ownVerdicts.set(fn, (verdicts = new Map()));
  verdicts.set(assignment, own);
  return own;
}

/**
 * Why the Query and Model methods findById runs for `model` are not Mongoose's own, or undefined:
 * a method of the model's own (a query helper named like one, a static) or Mongoose's function
 * replaced process-wide (mongooseOwn). Remembered per model Query prototype with the functions it
 * was judged for: a lock call compares those (one property read per method, one loop) and judges
 * again only when one was replaced, on the model or on Mongoose's prototype it inherits from.
 */
const methodVerdicts = new WeakMap<object, { functions: unknown[]; problem: string | undefined }>();

function methodsProblem(model: AnyModel): string | undefined {
  const internals = model as unknown as ModelInternals;
  const queryProto = internals.Query.prototype;
  const statics = model as unknown as Record<string, unknown>;
  const known = methodVerdicts.get(queryProto);
  if (known) {
    const functions = known.functions;
    let i = 0;
    let same = true;
    for (const name of QUERY_METHODS) if (queryProto[name] !== functions[i++]) same = false;
    for (const name of MODEL_METHODS) if (statics[name] !== functions[i++]) same = false;
    if (same) return known.problem;
  }
  const base = internals.base;
  const baseQuery = base.Query.prototype;
  const baseModel = base.Model as unknown as Record<string, unknown>;
  const functions: unknown[] = [];
  let problem: string | undefined;
  for (const name of QUERY_METHODS) {
    const fn = queryProto[name];
    functions.push(fn);
    if (problem !== undefined) continue;
    if (fn !== baseQuery[name]) problem = 'query methods overridden';
    else if (!mongooseOwn(fn, 'Query.prototype', name)) problem = "Mongoose's query methods patched";
  }
  for (const name of MODEL_METHODS) {
    const fn = statics[name];
    functions.push(fn);
    if (problem !== undefined) continue;
    if (fn !== baseModel[name]) problem = 'findById, findOne or hydrate overridden';
    else if (!mongooseOwn(fn, 'Model', name)) problem = "Mongoose's query methods patched";
  }
  methodVerdicts.set(queryProto, { functions, problem });
  return problem;
}


/** Internals of a compiled model read here (lib/model.js compile and _applyQueryMiddleware). */
interface ModelInternals {
  baseModelName?: string;
  discriminators?: Record<string, AnyModel>;
  Query: { prototype: { _queryMiddleware?: { hasHooks?: (name: string) => boolean } | null } & Record<string, unknown> };
  base: {
    Model: { findById: unknown; findOne: unknown; hydrate: unknown };
    Query: { prototype: Record<string, unknown> };
    Schema: new (definition: object) => Schema;
    options: Record<string, unknown>;
    transactionAsyncLocalStorage?: { getStore(): { session?: unknown } | undefined };
  };
  db: { options?: Record<string, unknown> | null };
}

interface SchemaInternals {
  discriminatorMapping?: { isRoot?: boolean };
  options: { collation?: unknown; readConcern?: { level?: unknown } | null; writeConcern?: Record<string, unknown> | null };
}

interface PathInternals {
  instance?: string;
  setters?: unknown[];
  selected?: unknown;
  options?: { select?: unknown };
  schema?: Schema;
  /** An array's element type: `embeddedSchemaType` in Mongoose 9, `caster` in Mongoose 8 (lib/schema/array.js). */
  embeddedSchemaType?: PathInternals;
  caster?: PathInternals;
  $isSchemaMap?: boolean;
  $isMongooseArray?: boolean;
  $isMongooseDocumentArray?: boolean;
}

/** Why the `_id` path's cast could change the id (then the load is findById), or undefined. */
function idPathProblem(model: AnyModel): string | undefined {
  // The schema's own `_id` path (`schema.path('_id')` finds it there, after parsing the name).
  const idPath = (model.schema as unknown as SchemaPaths).paths._id;
  if (!idPath?.instance || !DIRECT_ID_TYPES.has(idPath.instance)) return `_id type ${idPath?.instance ?? 'none'}`;
  const setters = idPath.setters;
  if (setters === undefined || setters.length === 0) return undefined;
  // An ObjectId `_id` carries Mongoose's own `resetId` setter (lib/schema/objectId.js, auto()),
  // which returns a value unchanged outside a document; any other setter is the application's.
  const builtIn = autoIdSetter(model);
  for (const setter of setters) if (setter !== builtIn) return '_id setters';
  return undefined;
}

const autoIdSetters = new WeakMap<object, unknown>();
/** The `resetId` setter of an auto ObjectId `_id` in the model's Mongoose. */
function autoIdSetter(model: AnyModel): unknown {
  const base = (model as unknown as ModelInternals).base;
  const known = autoIdSetters.get(base);
  if (known !== undefined || autoIdSetters.has(base)) return known;
  const probe = new base.Schema({}).path('_id') as (SchemaType & PathInternals) | undefined;
  autoIdSetters.set(base, probe?.setters?.[0]);
  return probe?.setters?.[0];
}

/** A schema's paths by name (what `eachPath` walks: lib/schema.js, Schema.prototype.eachPath). */
interface SchemaPaths {
  paths: Record<string, PathInternals | undefined>;
  /**
   * Mongoose 9: whether the schema (nested schemas included) has a path with a `select` option,
   * computed when the model is compiled (Schema.prototype._preCompile) and reset to undefined by
   * `schema.add` / `schema.path(p, type)` / `schema.remove` (lib/schema.js). Absent in Mongoose 8.
   */
  _hasSelectedPaths?: boolean;
}

/**
 * Whether findById's projection leaves a path of `schema` out: a path (nested schemas and array
 * elements included) declared with `select: false`. findById then sends a projection excluding it
 * and builds the document with that selection (lib/queryHelpers.js, applyPaths: with no projection
 * of the caller's, only the `excluded` paths of analyzeSchema / analyzePath, `type.selected ===
 * false`, and maps with `options.select === false`, become `{ path: 0 }`; `select: true` paths,
 * such as a discriminator key, matter only to an inclusive projection). Mongoose 9's applyPaths
 * walks the schema only when `schema._hasSelectedPaths !== false`; so does this, so a
 * `path(p).select(false)` after compiling is ignored by both, and a `schema.add` of a `select:
 * false` path (which resets the flag) is seen by both at once. Mongoose 8 walks on every query; so
 * does this (a loop over the paths, no allocation). Asked on every lock call, never cached: the
 * schema may change after the model's first lock (schema.add, path().select()).
 */
function selectsOut(schema: Schema): boolean {
  const paths = schema as unknown as SchemaPaths;
  return paths._hasSelectedPaths !== false && declaresUnselected(paths, undefined);
}

function declaresUnselected(schema: SchemaPaths, seen: SchemaPaths[] | undefined): boolean {
  const paths = schema.paths;
  for (const name in paths) {
    const t = paths[name];
    if (t === undefined) continue;
    if (t.selected === false || t.options?.select === false) return true;
    if (t.$isMongooseArray && !t.$isMongooseDocumentArray && unselectedElement(t.embeddedSchemaType ?? t.caster)) return true;
    const nested = t.schema as unknown as SchemaPaths | undefined;
    if (nested !== undefined) {
      // Recursive schemas: each one once.
      const visited = seen ?? [schema];
      if (!visited.includes(nested)) {
        visited.push(nested);
        if (declaresUnselected(nested, visited)) return true;
      }
      seen = visited;
    }
  }
  return false;
}

/** An array element type declared with `select: false` (applyPaths analyzes it in the array's place). */
const unselectedElement = (element: PathInternals | undefined) => element?.selected === false || element?.options?.select === false;

/**
 * Why the model's shape needs findById, or undefined. Asked on every lock call (property reads and
 * a loop over the paths; nothing cached): a schema may change after the model's first lock.
 */
function modelProblem(model: AnyModel): string | undefined {
  const internals = model as unknown as ModelInternals;
  const schema = model.schema as unknown as SchemaInternals;
  if (internals.baseModelName !== undefined || schema.discriminatorMapping?.isRoot === false) return 'discriminator model';
  const idProblem = idPathProblem(model);
  if (idProblem) return idProblem;
  const options = schema.options;
  if (options.collation != null) return 'schema collation';
  if (options.readConcern?.level != null) return 'schema readConcern';
  const writeConcern = options.writeConcern;
  if (writeConcern != null) for (const key in writeConcern) if (writeConcern[key] != null) return 'schema writeConcern';
  if (selectsOut(model.schema)) return 'select: false paths';
  // A discriminator's schema adds its paths to what findById may project.
  const discriminators = internals.discriminators;
  if (discriminators != null) for (const name in discriminators) if (selectsOut(discriminators[name]!.schema)) return 'select: false paths';
  return undefined;
}

/** The connection's and Mongoose's options findById applies to the query (step 3 above). */
const GLOBAL_QUERY_OPTIONS = ['maxTimeMS', 'allowDiskUse'] as const;

const userDefined = (options: Record<string, unknown> | null | undefined, key: string) => options != null && key in options && options[key] !== undefined;

/**
 * Why this load must go through `findById(id).read('primary')`, or undefined when the direct load
 * gives the same document. Checked on every call for what can change at run time (hooks, global
 * options, tracing subscribers, overridden methods). A session of `transactionAsyncLocalStorage`
 * is not among them: the load never takes it (`session(null)`).
 */
export function directLoadProblem(model: AnyModel): string | undefined {
  const internals = model as unknown as ModelInternals;
  const base = internals.base;
  const queryProto = internals.Query.prototype;
  const middleware = queryProto._queryMiddleware;
  if (middleware != null && (typeof middleware.hasHooks !== 'function' || middleware.hasHooks('findOne'))) return "'findOne' query middleware";
  // Plain loops over constant lists: this runs on every lock call (issue 16, Performance).
  const methods = methodsProblem(model);
  if (methods !== undefined) return methods;
  for (const option of GLOBAL_QUERY_OPTIONS) {
    if (userDefined(internals.db.options, option) || userDefined(base.options, option)) return `${option} option`;
  }
  for (const tracing of QUERY_TRACING_CHANNELS) if (tracing.hasSubscribers) return 'query tracing subscribers';
  return modelProblem(model);
}

/** The driver's primary read preference (see loadDocument). */
const PRIMARY = mongo.ReadPreference.primary;

function schemaSetsLean(model: AnyModel): boolean {
  const options = (model.schema as unknown as { options: Record<string, unknown> }).options;
  return 'lean' in options && options.lean != null;
}

/**
 * Loads the document with `_id` equal to `documentId` (the value the lock was taken on, already
 * cast: arguments.ts) from the primary, outside any transaction, as
 * `model.findById(documentId).read('primary').session(null)` would (with `.lean(false)` when the
 * schema sets `lean`: a lock call always returns a document).
 */
export async function loadDocument(model: AnyModel, documentId: unknown, loadId: unknown = documentId): Promise<AnyDoc | null> {
  if (directLoadProblem(model) !== undefined) {
    // findById casts `loadId` once (setters included), as the lock call cast it into `documentId`
    // (arguments.ts, CastId): a setter that is not idempotent then finds the locked document.
    // Never the caller's transaction (see the module comment).
    const query = model.findById(loadId).read('primary').session(null);
    // A schema's `lean` option reaches every query the Query constructor builds (mquery calls
    // setOptions({}), lib/query.js setOptions), so findById would return a plain object: a lock
    // call returns a document (its unlock, save, heldLock), hence `.lean(false)`, and only then.
    if (schemaSetsLean(model)) query.lean(false);
    return (await query) as AnyDoc | null;
  }
  // The arguments Query._findOne passes for this query (steps 1 and 3 above): the cast filter, which
  // is the id itself, and the options `.read('primary').session(null)` left. Its read preference
  // `{ mode: 'primary', tags: undefined }` is given as the driver's own primary ReadPreference,
  // the instance the driver would build from it (ReadPreference.fromOptions, mongodb
  // lib/read_preference.js: an instance is used as it is, and only a `readPreferenceTags` option,
  // never given here, would touch it), without building one per load.
  const raw = await model.collection.findOne({ _id: documentId } as mongo.Filter<mongo.Document>, { readPreference: PRIMARY, session: null } as never);
  return raw ? (model.hydrate(raw) as AnyDoc) : null;
}
