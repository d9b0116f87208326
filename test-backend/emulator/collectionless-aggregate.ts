/**
 * Collection-less aggregation (`{aggregate: 1}`): a pipeline whose first stage produces documents
 * without reading a collection. Implemented: `$listLocalSessions` and `$documents` (5.1+); the
 * other collection-less stages ($currentOp, $listSessions, $changeStream is handled in crud.ts)
 * and any other first stage are refused with NotImplemented.
 *
 * Sources (mongodb/mongo):
 *  - the namespace: NamespaceString::makeCollectionlessAggregateNSS ("<db>.$cmd.aggregate", the
 *    cursor's ns);
 *  - $listLocalSessions: src/mongo/db/pipeline/document_source_list_local_sessions.cpp (the
 *    records of the LogicalSessionCache, `record->toBSON()`; with `{}` the implicit request for the
 *    logged-in user, which without authentication is user "" db "", i.e. every session here;
 *    `{allUsers: true}` every session); the record (logical_session_cache.idl /
 *    makeLogicalSessionRecord in logical_session_id_helpers.cpp): `_id: {id, uid}` where uid is
 *    the no-auth digest SHA-256 of the empty string, `lastUse`, and `user` only under
 *    authentication. Every command carrying an lsid registers its session
 *    (initializeOperationSessionInfo → LogicalSessionCache::vivify); endSessions removes them at
 *    the cache's next refresh (transactions.ts). crud spec tests db-aggregate.json,
 *    db-aggregate-rawdata.json;
 *  - $documents: manual "$documents (aggregation)" (5.1+: `{aggregate: 1}`, first stage, an
 *    expression resolving to an array of documents).
 */
import { createHash } from 'node:crypto';
import { Binary, type Document } from 'bson';
import { evaluate, makeAggregator } from './mingo-context';
import { toCommandError, unsupported } from './errors';
import { bindExpression, bindPipeline } from './query';
import type { CommandCtx } from './context';
import { clone, isPlainObject } from './values';

/** SHA256Block of "" (kNoAuthDigest, logical_session_id_helpers.cpp): every session's uid without authentication. */
const NO_AUTH_DIGEST = new Binary(createHash('sha256').update('').digest(), 0);

/** The documents of a `$listLocalSessions` spec. */
function listLocalSessions(ctx: CommandCtx, spec: unknown): Document[] {
  if (!isPlainObject(spec)) throw unsupported('$listLocalSessions with a non-document argument (the TypeMismatch message is not reproduced)');
  for (const k of Object.keys(spec)) if (k !== 'allUsers') throw unsupported(`$listLocalSessions option '${k}'`);
  if (spec.allUsers !== undefined && typeof spec.allUsers !== 'boolean') throw unsupported('$listLocalSessions allUsers that is not a boolean');
  // Without authentication every session belongs to user "" (the implicit "self" and allUsers alike).
  // doGetNext pops record ids from the back of the cache's list; that order is unspecified on mongod.
  return ctx.state.txns
    .localSessions()
    .reverse()
    .map((s) => ({ _id: { id: s.id, uid: NO_AUTH_DIGEST }, lastUse: s.lastUse }));
}

function documentsStage(ctx: CommandCtx, spec: unknown): Document[] {
  let value: unknown;
  try {
    value = evaluate({}, bindExpression(spec, ctx.vars), { variables: ctx.vars.let });
  } catch (e) {
    throw toCommandError(e);
  }
  if (!Array.isArray(value) || !value.every(isPlainObject)) throw unsupported('$documents whose argument is not an array of documents (mongod\'s errors are not sourced here)');
  return value.map((d) => clone(d as Document));
}

/** Runs `{aggregate: 1, pipeline}` and returns the first batch (cursor ns `<db>.$cmd.aggregate`). */
export function collectionlessAggregate(ctx: CommandCtx, pipeline: Document[], collectionResolver: (name: string) => Document[]): Document {
  const out = collectionlessDocs(ctx, pipeline, collectionResolver);
  const cursor = ctx.cmd.cursor as Document | undefined;
  return ctx.state.cursors.fromArray(`${ctx.db}.$cmd.aggregate`, out, cursor?.batchSize as number | undefined);
}

/** The documents a collection-less pipeline produces (a trailing $out/$merge already split off). */
export function collectionlessDocs(ctx: CommandCtx, pipeline: Document[], collectionResolver: (name: string) => Document[]): Document[] {
  const first = pipeline[0];
  const op = isPlainObject(first) ? Object.keys(first)[0] : undefined;
  for (const stage of pipeline.slice(1)) {
    const name = isPlainObject(stage) ? Object.keys(stage)[0] : undefined;
    if (name === '$listLocalSessions' || name === '$documents') throw unsupported(`${name} after the first stage (mongod's error is not sourced here)`);
  }
  let docs: Document[];
  if (op === '$listLocalSessions') docs = listLocalSessions(ctx, first.$listLocalSessions);
  else if (op === '$documents') docs = documentsStage(ctx, first.$documents);
  else throw unsupported(`aggregate: 1 (collection-less aggregate) starting with ${op ?? 'no stage'}`);
  const rest = bindPipeline(pipeline.slice(1), ctx.vars);
  let out = docs;
  if (rest.length) {
    try {
      out = makeAggregator(rest, { variables: ctx.vars.let, collectionResolver }).run(docs) as Document[];
    } catch (e) {
      throw toCommandError(e);
    }
  }
  return out;
}
