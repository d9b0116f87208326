/**
 * Arguments of the "who is editing this?" calls (`Model.lockStatus`, `Model.listLocks`) and of
 * `Model.unlock`, validated before anything touches the database, and the opaque cursor of
 * `listLocks`. Ids are cast by the caller (plugin.ts) with the schema's `_id` caster; owners
 * go through validateOwner; nothing here ever reaches the server unchecked.
 */
import { mongo } from 'mongoose';
import { readArgumentArray, validateOwner } from './arguments';
import { InvalidLockArgumentError, InvalidLockOptionError } from './errors';
import { IdRefusal, MAX_DOCUMENT_BYTES, MAX_ID_BYTES, freshId, idBytes } from './id-value';
import { describeValue } from './options';

/** Most ids `lockStatus` accepts in one call (one page of a list view). */
export const MAX_STATUS_IDS = 1_000;
/** Largest page `listLocks` returns. */
export const MAX_LIST_LIMIT = 1_000;
/** Page size of `listLocks` when no `limit` is given. */
export const DEFAULT_LIST_LIMIT = 50;
/** A cursor's prefix: its format's version. */
const CURSOR_PREFIX = 'c2.';
/**
 * Longest cursor accepted: the prefix and the base64url (4 characters per 3 bytes, unpadded) of
 * the BSON document `{ v: <id> }` (8 bytes of framing, see id-value.ts) holding the largest `_id`
 * a lock call accepts (MAX_ID_BYTES). The plugin's own cursors are never longer.
 */
export const MAX_CURSOR_LENGTH = CURSOR_PREFIX.length + Math.ceil(((MAX_ID_BYTES + 8) * 4) / 3);

/** The options of `Model.lockStatus(ids, options)`. */
export interface LockStatusOptions {
  /** Also say, for each lock, whether this owner holds it (`mine`). The owner is hashed like everywhere else. */
  owner?: string;
}

/** The options of `Model.listLocks(options)`: a filter by owner and a page. */
export interface ListLocksOptions {
  /** Only this owner's locks (matched by its hash; the owner is never returned). */
  owner?: string;
  /** Page size, 1 to 1000; default 50. */
  limit?: number;
  /** `next` from the previous page. */
  after?: string;
}

/** The options of `Model.unlock(id, owner, options)`. */
export interface UnlockOptions {
  /** Release only the acquisition this lock ticket names (`doc.heldLock().ticket`). */
  ticket?: string;
}

function plainObject(value: unknown, what: string, example: string): Record<string, unknown> {
  if (value === undefined) return {};
  if (value === null || typeof value !== 'object' || Array.isArray(value)) {
    throw new InvalidLockOptionError(what, `expected an object such as ${example}, got ${describeValue(value)}.`);
  }
  return value as Record<string, unknown>;
}

function onlyKnown(options: Record<string, unknown>, known: readonly string[]): void {
  for (const key of Object.keys(options)) {
    if (!known.includes(key)) throw new InvalidLockOptionError(key, `unknown option here. Known options: ${known.join(', ')}.`);
  }
}

/** The ids of one `lockStatus` call, read once into a fresh array (readArgumentArray), and its options. */
export function validateStatusIds(ids: unknown, rawOptions: unknown): { ids: unknown[]; owner: string | undefined } {
  const list = readArgumentArray(ids, 'ids', {
    expected: 'an array of document ids',
    max: MAX_STATUS_IDS,
    tooMany: (length) => `expected at most ${MAX_STATUS_IDS} ids (one page), got ${length}.`,
  });
  const options = plainObject(rawOptions, '(status options)', '{ owner: req.sessionID }');
  onlyKnown(options, ['owner']);
  return { ids: list, owner: options.owner === undefined ? undefined : validateOwner(options.owner) };
}

/**
 * mongod's limit on a command: an OP_MSG body is read as a BSON object of at most
 * `BSONObjMaxInternalSize` = 16 MiB + 16 KiB (src/mongo/bson/util/builder.h).
 */
const MAX_COMMAND_BYTES = MAX_DOCUMENT_BYTES + 16 * 1024;
/**
 * Room the `find` of a `lockStatus` call needs besides its ids: the collection name, the filter's
 * `$expr`, the projection (with an owner key), `$db`, `lsid`, `$clusterTime` and the read
 * preference come to about 1 KiB; 16 KiB leaves a margin.
 */
const STATUS_COMMAND_RESERVE_BYTES = 16 * 1024;
/** Each id in the `$in` array also takes its type byte and its index as a key ("999" and its NUL). */
const ARRAY_ELEMENT_BYTES = 5;

/**
 * Refuses `lockStatus` ids (cast, see idCaster) that cannot travel in one `find` command: the
 * command carries every id once, and mongod refuses a command above MAX_COMMAND_BYTES. So the ids
 * of one call may total 16 MiB as BSON, which one id of MAX_ID_BYTES always fits. The reply sets
 * no bound: mongod puts at least one document in every batch (FindCommon::haveSpaceForNext in
 * src/mongo/db/query/find_common.cpp admits the first document whatever its size) and the records
 * beyond one 16 MiB batch come in the next (LockStore.statusOf reads to the end of the cursor).
 */
export function validateStatusIdsSize(ids: unknown[]): void {
  let total = STATUS_COMMAND_RESERVE_BYTES;
  for (const id of ids) {
    total += idBytes(id) + ARRAY_ELEMENT_BYTES;
    if (total > MAX_COMMAND_BYTES) {
      throw new InvalidLockArgumentError(
        'ids',
        `together too large: they are sent in one find command, which MongoDB limits to 16 MiB + 16 KiB, so the ids of one call may total at most ${MAX_COMMAND_BYTES - STATUS_COMMAND_RESERVE_BYTES} bytes as BSON. Ask for fewer ids at a time.`,
      );
    }
  }
}

export function validateListOptions(rawOptions: unknown): { owner: string | undefined; limit: number; after: ListStart | undefined } {
  const options = plainObject(rawOptions, '(list options)', '{ limit: 50 }');
  onlyKnown(options, ['owner', 'limit', 'after']);
  const owner = options.owner === undefined ? undefined : validateOwner(options.owner);
  let limit = DEFAULT_LIST_LIMIT;
  if (options.limit !== undefined) {
    const value = options.limit;
    if (typeof value !== 'number' || !Number.isInteger(value) || value < 1 || value > MAX_LIST_LIMIT) {
      throw new InvalidLockOptionError('limit', `expected a whole number from 1 to ${MAX_LIST_LIMIT}, got ${describeValue(value)}.`);
    }
    limit = value;
  }
  const after = options.after === undefined ? undefined : readCursor(options.after);
  return { owner, limit, after };
}

export function validateUnlockOptions(rawOptions: unknown): { ticket: unknown } {
  const options = plainObject(rawOptions, '(unlock options)', '{ ticket }');
  onlyKnown(options, ['ticket']);
  return { ticket: options.ticket };
}

/** Where a listing continues: after this `_id` (a fresh scalar, id-value.ts), of this BSON type. */
export interface ListStart {
  id: unknown;
  type: number;
}

/**
 * The cursor that continues a listing after `documentId` (an `_id` as LockStore.list read it).
 * Opaque to callers: the prefix (the format's version), then the base64url of the BSON document
 * `{ v: <the _id> }`, so it keeps the id's exact BSON type and value (an int64 stays an int64, a
 * Binary keeps its subtype) and grows with the id only as base64 does (MAX_CURSOR_LENGTH).
 */
export function cursorAfter(documentId: unknown): string {
  return `${CURSOR_PREFIX}${Buffer.from(mongo.BSON.serialize({ v: documentId } as mongo.Document)).toString('base64url')}`;
}

/**
 * Reads a cursor back into the `_id` it holds. The value is untrusted (a caller can send anything):
 * it must be the BSON of a document with one field `v` whose value freshId (id-value.ts) accepts as
 * an `_id` (a scalar: never a document, array, regular expression or code), so a cursor is only
 * ever the operand of a range on `_id` (LockStore.list), never a query. Its value is not cast with
 * the schema's `_id` caster: it is a stored `_id`, already cast when its lock was taken (a setter
 * applied again would move it), and on a lock collection shared by several models it may be
 * another model's.
 */
/**
 * Whether `text` from `from` on is non-empty base64url. A loop, not a regular expression: a cursor
 * may be megabytes long (ids up to MAX_ID_BYTES), and V8's regexp engine overflows its stack on
 * such a subject (RangeError in large-records-status-and-list.test.ts, loaded machine).
 */
function isBase64Url(text: string, from: number): boolean {
  if (text.length <= from) return false;
  for (let i = from; i < text.length; i++) {
    const c = text.charCodeAt(i);
    const ok = (c >= 48 && c <= 57) || (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c === 45 || c === 95;
    if (!ok) return false;
  }
  return true;
}

function readCursor(cursor: unknown): ListStart {
  const invalid = () => new InvalidLockOptionError('after', 'this is not a cursor from listLocks(): pass `next` from the previous page unchanged.');
  if (typeof cursor !== 'string' || cursor.length > MAX_CURSOR_LENGTH || !cursor.startsWith(CURSOR_PREFIX) || !isBase64Url(cursor, CURSOR_PREFIX.length)) throw invalid();
  let decoded: mongo.Document;
  try {
    decoded = mongo.BSON.deserialize(Buffer.from(cursor.slice(CURSOR_PREFIX.length), 'base64url'), { useBigInt64: true, promoteBuffers: false, promoteValues: true });
  } catch {
    throw invalid();
  }
  const keys = Object.keys(decoded);
  if (keys.length !== 1 || keys[0] !== 'v') throw invalid();
  const fresh = freshId(decoded.v);
  if (fresh instanceof IdRefusal) throw invalid();
  return { id: fresh.value, type: fresh.type };
}
