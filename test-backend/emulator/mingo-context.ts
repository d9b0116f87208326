/**
 * The one place the emulator builds mingo queries, aggregations and updates, so every one of them
 * gets the same operator overrides and the command's `let` variables:
 *  - aggregation comparison operators ($eq, $ne, $lt, $lte, $gt, $gte, $cmp) compare values of any
 *    two types in BSON order (bson-order.ts), as mongod's ExpressionCompare does
 *    (src/mongo/db/pipeline/expression.cpp, ExpressionCompare::evaluate uses
 *    ValueComparator::compare), so `{ $lte: ['$missing', '$$NOW'] }` is true. mingo only compares
 *    values of the same type and answers false otherwise.
 *  - operators over BSON numbers (numeric-expressions.ts): computed with their BSON types, guarded
 *    or refused.
 *  - `let` variables (`variables`), visible as `$$name` in expressions.
 */
import type { Document } from 'bson';
import type { Aggregator, Context as ContextType, Query } from 'mingo';
import { compareValues } from './bson-order';
import { unsupported } from './errors';
import { lookupStage } from './lookup';
import { numericAccumulatorOps, numericExpressionOps, numericPipelineOps } from './numeric-expressions';
import { QUERY_OVERRIDES, setElementQueryFactory, setExpressionEvaluator } from './query-operators';

type Options = NonNullable<ConstructorParameters<typeof Query>[1]>;
/* eslint-disable @typescript-eslint/no-require-imports */
// mingo's package-exports subpaths, which the project's moduleResolution (node10) cannot type. The
// base classes are used (not the package index's) because the index merges its own operator table
// *over* a caller's context, so an override there would never win.
const { evalExpr } = require('mingo/core') as { evalExpr: (obj: unknown, expr: unknown, options: Options) => unknown };
const { Context } = require('mingo') as { Context: typeof ContextType };
const BaseQuery = (require('mingo/query') as { Query: typeof Query }).Query;
const BaseAggregator = (require('mingo/aggregator') as { Aggregator: typeof Aggregator }).Aggregator;
const baseUpdateOne = (require('mingo/updater') as { updateOne: (docs: Document[], cond: Document, mod: unknown, config: Document, options: Options) => unknown }).updateOne;
const OPS = {
  accumulator: require('mingo/operators/accumulator'),
  expression: require('mingo/operators/expression'),
  pipeline: require('mingo/operators/pipeline'),
  projection: require('mingo/operators/projection'),
  query: require('mingo/operators/query'),
  window: require('mingo/operators/window'),
} as Record<string, Record<string, unknown>>;
/* eslint-enable @typescript-eslint/no-require-imports */

type Ev = (obj: unknown, expr: unknown, options: Options) => unknown;

function comparison(name: string, test: (c: number) => boolean | number): Ev {
  return (obj, expr, options) => {
    if (!Array.isArray(expr) || expr.length !== 2) throw new Error(`Expression ${name} takes exactly 2 arguments. ${Array.isArray(expr) ? expr.length : 1} were passed in.`);
    const [a, b] = evalExpr(obj, expr, options) as unknown[];
    return test(compareValues(a, b));
  };
}

const COMPARISONS = {
  $eq: comparison('$eq', (c) => c === 0),
  $ne: comparison('$ne', (c) => c !== 0),
  $lt: comparison('$lt', (c) => c < 0),
  $lte: comparison('$lte', (c) => c <= 0),
  $gt: comparison('$gt', (c) => c > 0),
  $gte: comparison('$gte', (c) => c >= 0),
  $cmp: comparison('$cmp', (c) => c),
};

/**
 * `$out` / `$merge` run only as the last stage of a top-level pipeline (aggregate-write.ts splits
 * them off before mingo sees the pipeline). mingo's own versions would write into the arrays of a
 * `$facet`, `$lookup` or `$unionWith` sub-pipeline; mongod refuses them there with errors not
 * sourced here, so they are refused (NotImplemented).
 */
function nestedWriteStage(name: string): () => never {
  return () => {
    throw unsupported(`${name} inside a sub-pipeline ($facet, $lookup, $unionWith)`);
  };
}

const CONTEXT = Context.init({
  accumulator: numericAccumulatorOps(OPS.accumulator as never) as never,
  expression: { ...numericExpressionOps(OPS.expression as never), ...COMPARISONS } as never,
  pipeline: {
    ...numericPipelineOps(OPS.pipeline as never),
    $out: nestedWriteStage('$out'),
    $merge: nestedWriteStage('$merge'),
    // mongod's $lookup (lookup.ts), not mingo's.
    $lookup: lookupStage({
      runPipeline: (stages, docs, variables, collectionResolver) => makeAggregator(stages, { variables, collectionResolver }).run(docs) as Document[],
      matcher: (filter) => makeQuery(filter),
      evaluate: (doc, expr, variables) => evaluate(doc, expr, { variables }),
    }),
  } as never,
  projection: OPS.projection as never,
  query: { ...OPS.query, ...QUERY_OVERRIDES } as never,
  window: OPS.window as never,
});

export interface EvalOptions {
  /** The command's `let` variables, already evaluated. */
  variables?: Document;
}

function options(o: EvalOptions = {}): Options {
  return { context: CONTEXT, ...(o.variables ? { variables: o.variables } : {}) };
}

export function makeQuery(filter: Document, o?: EvalOptions): Query {
  return new BaseQuery(filter, options(o));
}

setElementQueryFactory((filter) => makeQuery(filter));
setExpressionEvaluator((doc, expr, options) => evalExpr(doc, expr, options as Options));

export function makeAggregator(stages: Document[], o: EvalOptions & { collectionResolver?: (name: string) => Document[] } = {}): Aggregator {
  return new BaseAggregator(stages, { ...options(o), ...(o.collectionResolver ? { collectionResolver: o.collectionResolver } : {}) });
}

export function runUpdateOne(docs: Document[], filter: Document, modifier: Document | Document[], config: { arrayFilters?: Document[] }, o?: EvalOptions): void {
  baseUpdateOne(docs, filter, modifier, { arrayFilters: config.arrayFilters, cloneMode: 'deep' }, options(o));
}

/* eslint-disable @typescript-eslint/no-require-imports */
// ComputeOptions is not in mingo's package exports; reach its file through the package's main path.
const { ComputeOptions } = require(require('node:path').join(require('node:path').dirname(require.resolve('mingo')), 'core', '_internal.js')) as {
  ComputeOptions: { init(o: Options): { update(locals: Document): unknown } };
};
/* eslint-enable @typescript-eslint/no-require-imports */

/**
 * Compute options are costly to build (mingo copies the whole operator table into each), so the
 * ones without `let` variables are built once and reused; evaluation is synchronous, so setting
 * the root per call is safe.
 */
let sharedOptions: { update(locals: Document): unknown } | undefined;

/** Evaluates one aggregation expression against `doc` with the emulator's operator table (no Aggregator built). */
export function evaluate(doc: Document, expr: unknown, o?: EvalOptions): unknown {
  const copts = o?.variables ? ComputeOptions.init(options(o)) : (sharedOptions ??= ComputeOptions.init(options()));
  copts.update({ root: doc });
  return evalExpr(doc, expr, copts as unknown as Options);
}
