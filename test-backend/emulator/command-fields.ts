/**
 * The IDL strictness of the commands mongod parses with a generated parser (`strict: true`): a field
 * that is neither one of the command's own fields nor a generic argument fails the parse.
 *
 * Sources:
 *  - IDLParserContext::throwUnknownField (src/mongo/idl/idl_parser.cpp): 40415 (codeName
 *    Location40415) "BSON field '<path>' is an unknown field."; for a mongocryptd argument
 *    (isMongocryptdArgument, src/mongo/idl/command_generic_argument.cpp: `jsonSchema`) 4662500
 *    "BSON field '<path>' is an unknown field. This command may be meant for a mongocryptd
 *    process.". The path is getElementPath: the parser context's name, then the field (an array of
 *    structs adds the array field's own context: 'update.updates.<field>').
 *  - The generated parsers skip generic arguments (isGenericArgument, command_generic_argument.cpp,
 *    from src/mongo/idl/generic_argument.idl: generic_args_api_v1 and generic_args_unstable_v1).
 *  - The context names: 'FindCommandRequest' (query_request_helper::makeFromFindCommand; real
 *    mongod output quoted in the wild: "BSON field 'FindCommandRequest.snapshot' is an unknown
 *    field."), 'aggregate' (aggregation_request_helper; FerretDB's compatibility tests quote
 *    "BSON field 'aggregate.maxTimeMS' ..." from mongod), 'insert'/'update'/'delete' (write_ops
 *    parsers; 'insert.ordered' in the same tests), 'count' (count_cmd.cpp
 *    `CountCommandRequest::parse(IDLParserContext("count"), ...)`), 'distinct' (parsed_distinct.cpp
 *    `IDLParserContext ctx("distinct")`; 8.0 renames it 'distinctCommandRequest'), 'getMore'
 *    (getmore_cmd.cpp Invocation `GetMoreCommandRequest::parse(IDLParserContext{"getMore"}, ...)`),
 *    and the typed commands' kCommandName (typed_command.h RequestParser): 'findAndModify' (also for
 *    the `findandmodify` alias), 'killCursors', 'createIndexes', 'commitTransaction',
 *    'abortTransaction'.
 *  - The fields: src/mongo/db/query/find_command.idl, src/mongo/db/pipeline/aggregate_command.idl,
 *    src/mongo/db/ops/write_ops.idl (src/mongo/db/query/write_ops/write_ops.idl from 8.0: insert,
 *    update with UpdateOpEntry, delete with DeleteOpEntry, findAndModify, WriteCommandRequestBase),
 *    src/mongo/db/query/count_command.idl, distinct_command.idl, getmore_command.idl,
 *    kill_cursors.idl, src/mongo/db/create_indexes.idl, src/mongo/db/commands/txn_cmds.idl. Several
 *    releases were read; a field any of 6.0–8.0 knows is never refused as unknown except where 7.0
 *    (the release the emulator reports) is known not to have it: `update.updates.sort` (8.0) and
 *    `distinct.hint` (7.1; CRUD spec test distinct-hint.json requires 7.1.0).
 *
 * Fields mongod accepts whose behaviour the emulator does not implement (internal, sharding,
 * encryption, statement ids...) are refused as NotImplemented rather than ignored.
 */
import type { Document } from 'bson';
import { MongoCommandError, unsupported } from './errors';
import { isPlainObject } from './values';
import { bsonTypeName } from './update-rules';

/** generic_argument.idl (generic_args_api_v1 + generic_args_unstable_v1), accepted by every command. */
const GENERIC_ARGUMENTS = new Set([
  'apiVersion', 'apiStrict', 'apiDeprecationErrors', '$db', 'maxTimeMS', 'readConcern', 'writeConcern', 'lsid',
  'clientOperationKey', 'txnNumber', 'autocommit', 'startTransaction', 'stmtId', 'comment', '$readPreference',
  '$clusterTime', '$audit', '$client', '$configServerState', 'allowImplicitCollectionCreation', '$oplogQueryData',
  '$queryOptions', '$replData', 'databaseVersion', 'shardVersion', 'tracking_info', 'coordinator', 'maxTimeMSOpOnly',
  '$configTime', '$topologyTime', 'txnRetryCounter', 'mayBypassWriteBlocking', '$tenant', 'expectPrefix', 'help',
]);

interface Shape {
  /** The IDLParserContext name the path starts with. */
  context: string;
  /** The command's own fields the emulator implements (or that change nothing it answers). */
  fields: ReadonlySet<string>;
  /** Fields mongod accepts whose behaviour the emulator does not implement: NotImplemented. */
  unimplemented?: ReadonlySet<string>;
  /** An array of strict structs (update.updates, delete.deletes). */
  statements?: { field: string; fields: ReadonlySet<string>; unimplemented?: ReadonlySet<string> };
}

const set = (...names: string[]): ReadonlySet<string> => new Set(names);

/** WriteCommandRequestBase (chained into insert, update, delete). */
const WRITE_BASE = ['bypassDocumentValidation', 'ordered'];
const WRITE_BASE_UNIMPLEMENTED = ['stmtIds', 'isTimeseriesNamespace', 'collectionUUID', 'encryptionInformation', 'bypassEmptyTsReplacement', '$_originalQuery', '$_originalCollation'];

const FIND_AND_MODIFY: Shape = {
  context: 'findAndModify',
  fields: set('query', 'fields', 'sort', 'batchSize', 'singleBatch', 'hint', 'collation', 'arrayFilters', 'remove', 'update', 'upsert', 'new', 'bypassDocumentValidation', 'let'),
  unimplemented: set('runtimeConstants', 'encryptionInformation', 'bypassEmptyTsReplacement', 'sampleId', '$_originalQuery', '$_originalCollation', '$_allowShardKeyUpdatesWithoutFullShardKeyInQuery', 'isTimeseriesNamespace'),
};

const SHAPES: Record<string, Shape> = {
  find: {
    context: 'FindCommandRequest',
    fields: set('filter', 'projection', 'sort', 'hint', 'collation', 'skip', 'limit', 'batchSize', 'singleBatch', 'allowDiskUse', 'min', 'max', 'returnKey', 'showRecordId', 'tailable', 'oplogReplay', 'noCursorTimeout', 'awaitData', 'allowPartialResults', 'let', 'maxTimeMS', 'readConcern'),
    unimplemented: set('term', 'readOnce', 'allowSpeculativeMajorityRead', '$_requestResumeToken', '$_resumeAfter', '$_startAt', 'runtimeConstants', 'collectionUUID', 'encryptionInformation', 'mirrored', 'includeQueryStatsMetrics'),
  },
  aggregate: {
    context: 'aggregate',
    fields: set('pipeline', 'explain', 'allowDiskUse', 'cursor', 'maxTimeMS', 'bypassDocumentValidation', 'readConcern', 'collation', 'hint', 'writeConcern', 'let'),
    unimplemented: set('needsMerge', 'fromMongos', '$_requestReshardingResumeToken', 'exchange', 'runtimeConstants', 'isMapReduceCommand', 'collectionUUID', '$_passthroughToShard', 'encryptionInformation', '$_externalDataSources', 'sampleId', '$_isClusterQueryWithoutShardKeyCmd', '$_requestResumeToken', '$_resumeAfter', '$_generateV2ResumeTokens', 'includeQueryStatsMetrics'),
  },
  insert: {
    context: 'insert',
    fields: set('documents', ...WRITE_BASE),
    unimplemented: set(...WRITE_BASE_UNIMPLEMENTED, 'includeQueryStatsMetrics'),
  },
  update: {
    context: 'update',
    fields: set('updates', 'let', ...WRITE_BASE),
    unimplemented: set(...WRITE_BASE_UNIMPLEMENTED, 'runtimeConstants'),
    statements: {
      field: 'updates',
      // `c` is checked by the update handler (51198 without a pipeline; NotImplemented with one).
      fields: set('q', 'u', 'c', 'arrayFilters', 'hint', 'multi', 'upsert', 'collation'),
      unimplemented: set('upsertSupplied', 'sampleId', '$_allowShardKeyUpdatesWithoutFullShardKeyInQuery', 'includeQueryStatsMetricsForOpIndex'),
    },
  },
  delete: {
    context: 'delete',
    fields: set('deletes', 'let', ...WRITE_BASE),
    unimplemented: set(...WRITE_BASE_UNIMPLEMENTED, 'runtimeConstants'),
    statements: { field: 'deletes', fields: set('q', 'limit', 'hint', 'collation'), unimplemented: set('sampleId', 'includeQueryStatsMetricsForOpIndex') },
  },
  findAndModify: FIND_AND_MODIFY,
  findandmodify: FIND_AND_MODIFY,
  count: {
    context: 'count',
    fields: set('query', 'limit', 'skip', 'hint', 'collation', 'fields', 'readConcern', 'maxTimeMS', '$queryOptions'),
    unimplemented: set('encryptionInformation', 'mirrored', 'sampleId'),
  },
  distinct: {
    context: 'distinct',
    fields: set('key', 'query', 'collation'),
    unimplemented: set('mirrored', 'sampleId', 'encryptionInformation'),
  },
  getMore: {
    context: 'getMore',
    fields: set('collection', 'batchSize', 'maxTimeMS'),
    unimplemented: set('term', 'lastKnownCommittedOpTime', 'includeQueryStatsMetrics'),
  },
  killCursors: { context: 'killCursors', fields: set('cursors') },
  createIndexes: {
    context: 'createIndexes',
    fields: set('indexes', 'v', 'commitQuorum'),
    unimplemented: set('ignoreUnknownIndexOptions', 'isTimeseriesNamespace', 'collectionUUID'),
  },
  commitTransaction: { context: 'commitTransaction', fields: set('recoveryToken'), unimplemented: set('commitTimestamp') },
  abortTransaction: { context: 'abortTransaction', fields: set('recoveryToken') },
};

function unknownField(path: string, field: string): MongoCommandError {
  // isMongocryptdArgument (command_generic_argument.cpp): only `jsonSchema`.
  if (field === 'jsonSchema') return new MongoCommandError(4662500, `BSON field '${path}' is an unknown field. This command may be meant for a mongocryptd process.`);
  return new MongoCommandError(40415, `BSON field '${path}' is an unknown field.`);
}

function checkStatementFields(context: string, statements: NonNullable<Shape['statements']>, value: unknown): void {
  if (!Array.isArray(value)) return;
  for (const st of value) {
    if (!isPlainObject(st)) continue;
    for (const f of Object.keys(st)) {
      if (statements.fields.has(f)) continue;
      if (statements.unimplemented?.has(f)) throw unsupported(`the ${context}.${statements.field} field '${f}'`);
      throw unknownField(`${context}.${statements.field}.${f}`, f);
    }
  }
}

/**
 * Checks the fields of `cmd` (command `name`) as its generated parser does, in the command's field
 * order. Commands without a strict IDL shape here are not checked.
 */
export function checkCommandFields(name: string, cmd: Document): void {
  const shape = SHAPES[name];
  if (!shape) return;
  const keys = Object.keys(cmd);
  for (let i = 1; i < keys.length; i++) {
    const f = keys[i];
    if (shape.statements && f === shape.statements.field) {
      checkStatementFields(shape.context, shape.statements, cmd[f]);
      continue;
    }
    if (shape.fields.has(f)) continue;
    if (shape.unimplemented?.has(f)) throw unsupported(`the ${shape.context} field '${f}'`);
    if (GENERIC_ARGUMENTS.has(f)) {
      // `help: true` answers the command's help text instead of running it: not implemented.
      if (f === 'help' && cmd.help) throw unsupported("the generic argument 'help'");
      continue;
    }
    throw unknownField(`${shape.context}.${f}`, f);
  }
}

/** Whether checkCommandFields runs for `name` before the command's session is checked out. */
export function parsedBeforeSession(name: string): boolean {
  // count and distinct (BasicCommand::run) and commit/abortTransaction (txn_cmds.cpp run) parse their
  // request inside run, after the session checks; the others parse it when the command is parsed.
  return !['count', 'distinct', 'commitTransaction', 'abortTransaction'].includes(name);
}

/** The batch field of each write command. */
/** write_ops::kMaxWriteBatchSize (also hello's `maxWriteBatchSize`). */
export const MAX_WRITE_BATCH_SIZE = 100_000;

const BATCH_FIELDS: Record<string, string> = { insert: 'documents', update: 'updates', delete: 'deletes' };


/**
 * The batch of a write command, after its fields were parsed: IDLParserContext::throwMissingField
 * (40414 "BSON field '<cmd>.<field>' is missing but a required field", null counting as missing) and
 * checkAndAssertTypeSlowPath (TypeMismatch "... is the wrong type '<type>', expected type 'array'"),
 * then checkOpCountForCommand (src/mongo/db/ops/write_ops.cpp, run by InsertOp/UpdateOp/DeleteOp
 * parse): InvalidLength (16) "Write batch sizes must be between 1 and 100000. Got <n> operations.".
 */
export function checkWriteBatch(name: string, cmd: Document): void {
  const field = BATCH_FIELDS[name];
  if (!field) return;
  const batch = cmd[field];
  if (batch === undefined || batch === null) throw new MongoCommandError(40414, `BSON field '${name}.${field}' is missing but a required field`);
  if (!Array.isArray(batch)) throw new MongoCommandError(14, `BSON field '${name}.${field}' is the wrong type '${bsonTypeName(batch)}', expected type 'array'`);
  if (batch.length === 0 || batch.length > MAX_WRITE_BATCH_SIZE) {
    throw new MongoCommandError(16, `Write batch sizes must be between 1 and ${MAX_WRITE_BATCH_SIZE}. Got ${batch.length} operations.`, {}, 'InvalidLength');
  }
}
