/**
 * Arguments of the "who is editing this?" calls (`Model.lockStatus`, `Model.listLocks`) and of
 * `Model.unlock`, validated before anything touches the database, and the opaque cursor of
 * `listLocks`. Ids are cast by the caller (plugin.ts) with the schema's `_id` caster; owners
 * go through validateOwner; nothing here ever reaches the server unchecked.
 */
import { mongo } from 'mongoose';
import { validateOwner } from './arguments';
import { InvalidLockArgumentError, InvalidLockOptionError } from './errors';
import { MAX_DOCUMENT_BYTES, idBytes } from './id-value';
import { describeValue } from './options';

/** Most ids `lockStatus` accepts in one call (one page of a list view). */
export const MAX_STATUS_IDS = 1_000;
/** Largest page `listLocks` returns. */
export const MAX_LIST_LIMIT = 1_000;
export const DEFAULT_LIST_LIMIT = 50;
/** Longest cursor accepted (a real one is well under 100 characters). */
const MAX_CURSOR_LENGTH = 512;

export interface LockStatusOptions {
  /** Also say, for each lock, whether this owner holds it (`mine`). The owner is hashed like everywhere else. */
  owner?: string;
}

export interface ListLocksOptions {
  /** Only this owner's locks (matched by its hash; the owner is never returned). */
  owner?: string;
  /** Page size, 1 to 1000; default 50. */
  limit?: number;
  /** `next` from the previous page. */
  after?: string;
}

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

export function validateStatusIds(ids: unknown, rawOptions: unknown): { ids: unknown[]; owner: string | undefined } {
  if (!Array.isArray(ids)) throw new InvalidLockArgumentError('ids', `expected an array of document ids, got ${describeValue(ids)}.`);
  if (ids.length > MAX_STATUS_IDS) throw new InvalidLockArgumentError('ids', `expected at most ${MAX_STATUS_IDS} ids (one page), got ${ids.length}.`);
  const options = plainObject(rawOptions, '(status options)', '{ owner: req.sessionID }');
  onlyKnown(options, ['owner']);
  return { ids, owner: options.owner === undefined ? undefined : validateOwner(options.owner) };
}

/**
 * Room each id of a `lockStatus` call needs in its reply besides the id itself: the record read
 * back as `{ _id, acquiredAt, expiresAt, label, now, mine }` is at most about 400 bytes more.
 */
const STATUS_RECORD_RESERVE_BYTES = 512;
/** Room for the reply's envelope (cursor id, namespace, `ok`). */
const STATUS_REPLY_RESERVE_BYTES = 16 * 1024;

/**
 * Refuses `lockStatus` ids (cast, see idCaster) whose records may not come back in one reply.
 * The query is answered in one batch (`singleBatch`, lock-store.ts `statusOf`), and mongod stops
 * filling a batch at 16 MiB of documents (FindCommon::haveSpaceForNext with
 * kMaxBytesToReturnToClientAtOnce = BSONObjMaxUserSize, src/mongo/db/query/find_common.cpp): a
 * record left out would be reported as no lock. Within this bound the `find` command, which
 * carries every id once, also stays under mongod's 16 MiB + 16 KiB command limit.
 */
export function validateStatusIdsSize(ids: unknown[]): void {
  let total = STATUS_REPLY_RESERVE_BYTES;
  for (const id of ids) {
    total += idBytes(id) + STATUS_RECORD_RESERVE_BYTES;
    if (total > MAX_DOCUMENT_BYTES) {
      throw new InvalidLockArgumentError(
        'ids',
        `together too large: their locks come back in one reply, which MongoDB limits to 16 MiB, so the ids of one call may total at most about ${MAX_DOCUMENT_BYTES - STATUS_REPLY_RESERVE_BYTES - ids.length * STATUS_RECORD_RESERVE_BYTES} bytes as BSON. Ask for fewer ids at a time.`,
      );
    }
  }
}

export function validateListOptions(rawOptions: unknown): { owner: string | undefined; limit: number; after: { id: unknown } | undefined } {
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

/**
 * Canonical text of a document `_id` that keeps its BSON type, to match ids that are equal but
 * not `===` (two ObjectId instances) and to encode cursors.
 */
export function canonicalId(id: unknown): string {
  // EJSON writes a Buffer (and Mongoose's Buffer subclass) as an object of its bytes; as BSON it
  // is a Binary, so encode it as one.
  const value = Buffer.isBuffer(id) ? new mongo.Binary(Buffer.from(id), (id as { _subtype?: number })._subtype ?? mongo.Binary.SUBTYPE_DEFAULT) : id;
  return mongo.BSON.EJSON.stringify({ id: value } as mongo.Document, { relaxed: false });
}

/**
 * A stored `_id` as the application passed it: the driver reads a Buffer `_id` back as a BSON
 * Binary (subtype 0, generic), which the schema's caster does not take; everything else comes
 * back as it went in.
 */
export function fromStoredId(id: unknown): unknown {
  return id instanceof mongo.Binary && id.sub_type === mongo.Binary.SUBTYPE_DEFAULT ? Buffer.from(id.value()) : id;
}

/** The cursor that continues a listing after `documentId`. Opaque to callers; it holds only that `_id`. */
export function cursorAfter(documentId: unknown): string {
  return `c1.${Buffer.from(canonicalId(documentId), 'utf8').toString('base64url')}`;
}

/**
 * Reads a cursor back into the `_id` it holds. The value is still untrusted (a caller can send
 * anything): plugin.ts casts it with the schema's `_id` caster, which refuses everything that is
 * not a scalar id, so a cursor can never smuggle an operator into the filter.
 */
function readCursor(cursor: unknown): { id: unknown } {
  const invalid = () => new InvalidLockOptionError('after', 'this is not a cursor from listLocks(): pass `next` from the previous page unchanged.');
  if (typeof cursor !== 'string' || cursor.length > MAX_CURSOR_LENGTH || !/^c1\.[A-Za-z0-9_-]+$/.test(cursor)) throw invalid();
  let parsed: unknown;
  try {
    parsed = mongo.BSON.EJSON.parse(Buffer.from(cursor.slice(3), 'base64url').toString('utf8'), { relaxed: true });
  } catch {
    throw invalid();
  }
  if (parsed === null || typeof parsed !== 'object' || !('id' in parsed) || Object.keys(parsed).length !== 1) throw invalid();
  return { id: (parsed as { id: unknown }).id };
}
