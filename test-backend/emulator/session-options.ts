/**
 * The session envelope every command carries (`lsid`, `txnNumber`, `autocommit`,
 * `startTransaction`), checked as mongod checks it before the command runs.
 *
 * Sources (7.0):
 *  - OperationSessionInfoFromClient (src/mongo/db/session/logical_session_id.idl, strict: false):
 *    `txnNumber` is a TxnNumber (bson_serialization_type long), `autocommit` and `startTransaction`
 *    bools; another type fails the parse with IDLParserContext::checkAndAssertTypeSlowPath
 *    (src/mongo/idl/idl_parser.cpp): TypeMismatch "BSON field 'OperationSessionInfo.<field>' is the
 *    wrong type '<type>', expected type '<type>'" (null and undefined are ignored).
 *  - initializeOperationSessionInfo (src/mongo/db/session/initialize_operation_session_info.cpp):
 *    InvalidOptions "Transaction number requires a session ID to also be specified", IllegalOperation
 *    "Transaction numbers are only allowed on a replica set member or mongos", InvalidOptions
 *    "Transaction number cannot be negative", "'autocommit' field requires a transaction number to
 *    also be specified", "Specifying autocommit=true is not allowed.", "'startTransaction' field
 *    requires 'autocommit' field to also be specified", "Specifying startTransaction=false is not
 *    allowed.", in that order.
 *  - validateSessionOptions (src/mongo/db/transaction_validation.cpp): a `txnNumber` without
 *    `autocommit` on a command that does not support retryable writes: NotARetryableWriteCommand
 *    (50768) "txnNumber may only be provided for multi-document transactions and retryable write
 *    commands. autocommit:false was not provided, and <command> is not a retryable write command."
 *    (supportsRetryableWrite: insert, update, delete, findAndModify among the commands a client sends).
 *  - ExecCommandDatabase::_initiateCommand (src/mongo/db/service_entry_point_common.cpp): a
 *    readConcern on a statement of a running transaction other than its first: InvalidOptions
 *    "Only the first command in a transaction may specify a readConcern" (an empty readConcern
 *    document is no readConcern: ReadConcernArgs::isEmpty).
 */
import type { Document } from 'bson';
import type { Topology } from './context';
import { Codes, MongoCommandError, unsupported } from './errors';
import { numKind, toNumber } from './numbers';
import { bsonTypeName } from './update-rules';
import { isPlainObject } from './values';

/** Commands whose supportsRetryableWrite() is true (the write commands and findAndModify). */
const RETRYABLE_WRITE_COMMANDS = new Set(['insert', 'update', 'delete', 'findAndModify', 'findandmodify']);

/**
 * Commands that need no authentication (requiresAuth() false): initializeOperationSessionInfo
 * answers their session fields differently (263 / 50889), but which commands those are was not
 * enumerated from source here, so a transaction field on them is refused as NotImplemented.
 */
const NO_AUTH_COMMANDS = new Set(['hello', 'isMaster', 'ismaster', 'ping', 'buildInfo', 'buildinfo']);

function present(v: unknown): boolean {
  return v !== undefined && v !== null;
}

function wrongType(field: string, v: unknown, expected: string): MongoCommandError {
  return new MongoCommandError(Codes.TypeMismatch, `BSON field 'OperationSessionInfo.${field}' is the wrong type '${bsonTypeName(v)}', expected type '${expected}'`);
}

/** The typed fields of OperationSessionInfoFromClient, in the command's field order. */
function checkTypes(cmd: Document): void {
  for (const k of Object.keys(cmd)) {
    const v = cmd[k];
    if (!present(v)) continue;
    if (k === 'txnNumber' && numKind(v) !== 'long') throw wrongType(k, v, 'long');
    if ((k === 'autocommit' || k === 'startTransaction') && typeof v !== 'boolean') throw wrongType(k, v, 'bool');
    if (k === 'lsid' && !isPlainObject(v)) throw wrongType(k, v, 'object');
  }
}

/**
 * initializeOperationSessionInfo and validateSessionOptions' txnNumber rule. Throws mongod's error
 * for the first rule `cmd` breaks; `name` is the command name.
 */
export function checkSessionOptions(cmd: Document, name: string, topology: Topology): void {
  checkTypes(cmd);
  const hasLsid = present(cmd.lsid);
  const hasTxnNumber = present(cmd.txnNumber);
  const hasAutocommit = present(cmd.autocommit);
  const hasStart = present(cmd.startTransaction);
  if (NO_AUTH_COMMANDS.has(name) && (hasTxnNumber || hasAutocommit)) throw unsupported(`a txnNumber or autocommit on '${name}'`);
  if (present(cmd.txnRetryCounter)) throw unsupported('txnRetryCounter (internal transactions)');
  if (!hasLsid && hasTxnNumber) throw new MongoCommandError(Codes.InvalidOptions, 'Transaction number requires a session ID to also be specified');
  if (hasTxnNumber) {
    if (topology === 'standalone') throw new MongoCommandError(Codes.IllegalOperation, 'Transaction numbers are only allowed on a replica set member or mongos');
    if (toNumber(cmd.txnNumber) < 0) throw new MongoCommandError(Codes.InvalidOptions, 'Transaction number cannot be negative');
  } else if (hasAutocommit) {
    throw new MongoCommandError(Codes.InvalidOptions, "'autocommit' field requires a transaction number to also be specified");
  }
  if (hasAutocommit) {
    if (cmd.autocommit === true) throw new MongoCommandError(Codes.InvalidOptions, 'Specifying autocommit=true is not allowed.');
  } else if (hasStart) {
    throw new MongoCommandError(Codes.InvalidOptions, "'startTransaction' field requires 'autocommit' field to also be specified");
  }
  if (hasStart && cmd.startTransaction === false) throw new MongoCommandError(Codes.InvalidOptions, 'Specifying startTransaction=false is not allowed.');
  if (!hasAutocommit && hasTxnNumber && !RETRYABLE_WRITE_COMMANDS.has(name)) {
    throw new MongoCommandError(
      50768,
      `txnNumber may only be provided for multi-document transactions and retryable write commands. autocommit:false was not provided, and ${name} is not a retryable write command.`,
      {},
      'NotARetryableWriteCommand',
    );
  }
}

/** ReadConcernArgs::isEmpty: no level, afterOpTime, afterClusterTime or atClusterTime. */
function readConcernIsEmpty(rc: unknown): boolean {
  if (!present(rc)) return true;
  if (!isPlainObject(rc)) return false;
  return ['level', 'afterOpTime', 'afterClusterTime', 'atClusterTime'].every((k) => !present(rc[k]));
}

/** The readConcern rule for a statement of a running transaction (after the session options passed). */
export function checkTransactionReadConcern(cmd: Document): void {
  if (cmd.autocommit === false && cmd.startTransaction !== true && !readConcernIsEmpty(cmd.readConcern)) {
    throw new MongoCommandError(Codes.InvalidOptions, 'Only the first command in a transaction may specify a readConcern');
  }
}
