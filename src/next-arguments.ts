/**
 * Validation of `Model.lockNext` / `acquireNext` / `withNext` arguments, run before anything touches
 * the database.
 *
 * The filter is the caller's query, as `Model.find(filter)` takes it: it is cast by Mongoose the
 * same way (the schema's types, `strictQuery`, `sanitizeFilter`, a discriminator's key), and is the
 * only caller value the server evaluates as a query. It runs as the `$match` of an aggregation, so
 * the operators mongod refuses there are refused here first with a typed error: `$where` (16395),
 * `$near` (16424) and `$nearSphere` (16426), anywhere in the filter
 * (`uassertNoDisallowedClauses` in src/mongo/db/pipeline/document_source_match.cpp, which looks
 * through every sub-object). `$text` is refused too: whether a text search may run under the
 * candidate read's snapshot read concern was not verified (docs/mongodb-compatibility.md R33).
 * The sort is field: 1 | -1 pairs only; the owner, the ttl and the label never reach a query.
 */
import type { mongo } from 'mongoose';
import { validateLockCallOptions, type LockCallOptions, type ResolvedCallOptions } from './arguments';
import { InvalidLockArgumentError, InvalidLockOptionError } from './errors';
import { describeValue } from './options';
import type { AnyModel } from './runtime';

type Document = mongo.Document;

/** The sort of `Model.lockNext`: field paths, each 1 (ascending) or -1 (descending). */
export type LockNextSort = Record<string, 1 | -1>;

/** Options of `Model.lockNext`. */
export interface LockNextOptions extends Pick<LockCallOptions, 'ttl' | 'label' | 'wait' | 'signal'> {
  /**
   * The order in which free documents are claimed (`{ priority: -1, createdAt: 1 }`); default: no
   * order (whatever order the query plan reads them in). Give the filter and the sort an index.
   */
  sort?: LockNextSort;
}

/** Options of `Model.acquireNext` and `Model.withNext`: those of lockNext, and `autoExtend`. */
export interface AcquireNextOptions extends LockNextOptions {
  /** Renew the lock before it expires while held (default true). */
  autoExtend?: boolean;
}

export interface ResolvedNextOptions {
  sort: LockNextSort | undefined;
  call: ResolvedCallOptions;
}

/** mongod's limit on the number of fields of a sort pattern (32, like an index key). */
export const MAX_SORT_FIELDS = 32;

/** Operators mongod refuses in an aggregation `$match` (or that lockNext does not support). */
const REFUSED_OPERATORS: Readonly<Record<string, string>> = {
  $where: 'mongod refuses $where in an aggregation $match (error 16395); express the condition with $expr',
  $near: 'mongod refuses $near in an aggregation $match (error 16424); use $geoWithin',
  $nearSphere: 'mongod refuses $nearSphere in an aggregation $match (error 16426); use $geoWithin with $centerSphere',
  $text: 'text search is not supported by lockNext; filter on fields instead',
};

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false;
  const proto = Object.getPrototypeOf(value) as unknown;
  return proto === Object.prototype || proto === null;
}

/** The first refused operator anywhere in `value` (keys only: a string "$where" is a value). */
function refusedOperator(value: unknown, depth = 0): string | undefined {
  if (depth > 100) return undefined;
  if (Array.isArray(value)) {
    for (const element of value) {
      const found = refusedOperator(element, depth + 1);
      if (found) return found;
    }
    return undefined;
  }
  if (!isPlainObject(value)) return undefined;
  for (const [key, inner] of Object.entries(value)) {
    if (Object.prototype.hasOwnProperty.call(REFUSED_OPERATORS, key)) return key;
    const found = refusedOperator(inner, depth + 1);
    if (found) return found;
  }
  return undefined;
}

/** Whether Mongoose sanitizes query filters for this model (the option's lookup order of Query.prototype.cast). */
function sanitizes(model: AnyModel): boolean {
  const db = model.db as unknown as { config?: { sanitizeFilter?: unknown }; options?: { sanitizeFilter?: unknown } };
  const base = model.base as unknown as { options?: { sanitizeFilter?: unknown } };
  return Boolean(db.config?.sanitizeFilter ?? db.options?.sanitizeFilter ?? base.options?.sanitizeFilter);
}

/**
 * Whether Mongoose translates schema aliases in this model's query filters (`translateAliases`:
 * the option's lookup order of Query.prototype._applyTranslateAliases, lib/query.js: the query's
 * own option, which a filter passed here cannot carry, then the schema's, then the global one).
 */
function translatesAliases(model: AnyModel): boolean {
  const schema = model.schema as unknown as { _userProvidedOptions?: { translateAliases?: unknown }; aliases?: Record<string, unknown> };
  const base = model.base as unknown as { options?: { translateAliases?: unknown } };
  const enabled = schema._userProvidedOptions?.translateAliases ?? base.options?.translateAliases;
  return Boolean(enabled) && schema.aliases !== undefined && Object.keys(schema.aliases).length > 0;
}

/**
 * Validates the filter and returns it cast as `Model.find(filter)` casts it (the discriminator's
 * key included), ready for the candidate read's `$match`.
 */
export function castNextFilter(model: AnyModel, filter: unknown): Document {
  if (!isPlainObject(filter)) {
    throw new InvalidLockArgumentError('filter', `expected a query object such as { status: 'queued' } (use {} for any document), got ${describeValue(filter)}.`);
  }
  const refused = refusedOperator(filter);
  if (refused) throw new InvalidLockArgumentError('filter', `${refused} cannot be used here: ${REFUSED_OPERATORS[refused]}.`);
  try {
    // Model.find merges the filter and adds a discriminator's key (Query.prototype.find); its
    // execution sanitizes (when enabled) and casts the conditions (Query.prototype._castConditions).
    const query = model.find(filter);
    const conditions = query.getFilter() as Document;
    // Before casting, as Query.prototype._find does (_applyTranslateAliases, then _castConditions).
    if (translatesAliases(model)) (model as unknown as { translateAliases(raw: Document, errorOnDuplicates?: boolean): Document }).translateAliases(conditions, true);
    if (sanitizes(model)) (model.base as unknown as { sanitizeFilter(filter: Document): Document }).sanitizeFilter(conditions);
    return query.cast(model) as Document;
  } catch (error) {
    throw new InvalidLockArgumentError('filter', `it does not fit the schema of ${model.modelName}: ${(error as Error).message}`);
  }
}

/** Validates a sort: a plain object of field paths, each 1 or -1; an empty one is no sort. */
export function validateNextSort(sort: unknown): LockNextSort | undefined {
  if (sort === undefined) return undefined;
  if (!isPlainObject(sort)) throw new InvalidLockOptionError('sort', `expected an object of field: 1 | -1 pairs such as { createdAt: 1 }, got ${describeValue(sort)}.`);
  const fields = Object.entries(sort);
  if (fields.length === 0) return undefined;
  if (fields.length > MAX_SORT_FIELDS) throw new InvalidLockOptionError('sort', `expected at most ${MAX_SORT_FIELDS} fields, got ${fields.length}.`);
  const out: LockNextSort = {};
  for (const [path, direction] of fields) {
    if (path.length === 0 || path.includes('\0') || path.split('.').some((part) => part.length === 0 || part.startsWith('$'))) {
      throw new InvalidLockOptionError('sort', `${JSON.stringify(path.slice(0, 64))} is not a field path (no empty parts, none starting with "$").`);
    }
    if (direction !== 1 && direction !== -1) {
      throw new InvalidLockOptionError('sort', `the direction of "${path.slice(0, 64)}" must be 1 or -1, got ${describeValue(direction)}.`);
    }
    out[path] = direction;
  }
  return out;
}

/** Validates the options of lockNext (`handle` false) or acquireNext / withNext (`handle` true). */
export function validateNextOptions(options: unknown, defaultTtl: number, handle: boolean): ResolvedNextOptions {
  if (options === undefined) return { sort: undefined, call: validateLockCallOptions(undefined, defaultTtl) };
  if (!isPlainObject(options)) throw new InvalidLockOptionError('(lockNext options)', `expected an object such as { sort: { createdAt: 1 } }, got ${describeValue(options)}.`);
  const { sort, ...rest } = options;
  const allowed: (keyof LockCallOptions)[] = handle ? ['ttl', 'wait', 'signal', 'label', 'autoExtend'] : ['ttl', 'wait', 'signal', 'label'];
  for (const key of Object.keys(rest)) {
    if (!(allowed as string[]).includes(key)) throw new InvalidLockOptionError(key, `unknown option here. Known options: sort, ${allowed.join(', ')}.`);
  }
  return { sort: validateNextSort(sort), call: validateLockCallOptions(rest, defaultTtl, allowed) };
}
