/**
 * Parse-time rules mongod applies to the query predicate of an upsert.
 *
 * mongod parses an update's filter with `MatchExpressionParser::kAllowAllSpecialFeatures` minus
 * `AllowedFeatures::kExpr` when the request is an upsert ("$expr is not allowed in the query for an
 * upsert, since it is not clear what the equality extraction behavior for $expr should be"):
 * `src/mongo/db/query/write_ops/parsed_writes_common.h`, `parseWriteQueryToParsedFindCommand`
 * (SERVER-59704). The parser passes the same feature set down into `$and`/`$or`/`$nor`, so `$expr`
 * is refused at any depth of those. `ParsedUpdateBase::parseQueryToCQ`
 * (`src/mongo/db/query/write_ops/parsed_update_base.cpp`) rewrites the QueryFeatureNotAllowed it
 * gets into the message below. Only kExpr is cleared there: `$where`, `$text` and geo operators are
 * not refused for being in an upsert (the emulator refuses those anyway as NotImplemented).
 *
 * The update command reports it per statement (writeErrors), findAndModify as a command error; both
 * come from the same `uassertStatusOK(parsedUpdate.parseRequest())`, which parses the update
 * document before the query, so an invalid update document is reported first.
 */
import type { Document } from 'bson';
import { Codes, MongoCommandError } from '../errors';
import { isPlainObject } from '../values';

export const EXPR_IN_UPSERT_MESSAGE = '$expr is not allowed in the query predicate for an upsert';

function containsTopLevelExpr(filter: Document): boolean {
  for (const key of Object.keys(filter)) {
    if (key === '$expr') return true;
    if ((key === '$and' || key === '$or' || key === '$nor') && Array.isArray(filter[key])) {
      for (const sub of filter[key] as unknown[]) if (isPlainObject(sub) && containsTopLevelExpr(sub)) return true;
    }
  }
  return false;
}

/** Throws QueryFeatureNotAllowed (224) when an upsert's filter uses `$expr`. */
export function checkUpsertPredicate(filter: Document | undefined, upsert: boolean): void {
  if (!upsert || !filter) return;
  if (containsTopLevelExpr(filter)) throw new MongoCommandError(Codes.QueryFeatureNotAllowed, EXPR_IN_UPSERT_MESSAGE);
}
