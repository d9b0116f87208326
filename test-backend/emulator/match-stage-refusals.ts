/**
 * What mongod refuses in EVERY aggregation `$match`, wherever it sits (the first stage, a later
 * one, a `$lookup`, `$facet` or `$unionWith` sub-pipeline): DocumentSourceMatch::createFromBson
 * (src/mongo/db/pipeline/document_source_match.cpp) runs `uassertNoDisallowedClauses` on the stage's
 * object before the MatchExpressionParser sees it. It walks every field name, recursing into every
 * sub-object and array (`if (e.isABSONObj())`), and refuses:
 *   16395 "$where is not allowed inside of a $match aggregation expression",
 *   16424 "$near is not allowed inside of a $match aggregation expression",
 *   16426 "$nearSphere is not allowed inside of a $match aggregation expression".
 * Sub-pipelines are parsed, each stage through its own createFromBson, when their stage is parsed
 * ($lookup, $facet, $unionWith), so their `$match` stages meet the same check before anything runs.
 * docs/mongodb-compatibility.md R33.
 */
import { MongoCommandError } from './errors';
import { isPlainObject } from './values';

const DISALLOWED: ReadonlyMap<string, [number, string]> = new Map([
  ['$where', [16395, '$where is not allowed inside of a $match aggregation expression']],
  ['$near', [16424, '$near is not allowed inside of a $match aggregation expression']],
  ['$nearSphere', [16426, '$nearSphere is not allowed inside of a $match aggregation expression']],
]);

/** uassertNoDisallowedClauses: every field name of the object, at every depth. */
function checkClauses(value: unknown): void {
  if (Array.isArray(value)) {
    for (const element of value) checkClauses(element);
    return;
  }
  if (!isPlainObject(value)) return;
  for (const [name, inner] of Object.entries(value)) {
    const refused = DISALLOWED.get(name);
    if (refused) throw new MongoCommandError(refused[0], refused[1]);
    checkClauses(inner);
  }
}

/** The sub-pipelines a stage parses with itself. */
function subPipelines(op: string, spec: unknown): unknown[] {
  if (!isPlainObject(spec)) return [];
  if (op === '$lookup' || op === '$unionWith') return [spec.pipeline];
  if (op === '$facet') return Object.values(spec);
  return [];
}

/** Refuses, as mongod does when it parses `stage`, a disallowed clause in any `$match` it contains. */
export function checkMatchClausesInStage(stage: unknown): void {
  if (!isPlainObject(stage)) return;
  const [op] = Object.keys(stage);
  if (op === undefined) return;
  if (op === '$match') return checkClauses(stage.$match);
  for (const pipeline of subPipelines(op, stage[op])) {
    if (Array.isArray(pipeline)) for (const inner of pipeline) checkMatchClausesInStage(inner);
  }
}
