/**
 * Lock tickets: how a later request continues the same acquisition (issue 11, PRODUCT.md
 * property 12). A web flow opens a document in one request (`Model.lock`) and submits the form
 * in another; the ticket (`doc.heldLock().ticket`) travels in the form or the session, and
 * `Model.lock(id, owner, { resume: ticket })` continues that acquisition only while it is still
 * the current one.
 *
 * A ticket is `mpl1.<token>.<fence>.<document digest>`:
 *  - `token`: the acquisition's 128-bit random token (22 base64url characters). It is what the
 *    server compares, so a ticket cannot be forged: guessing a current token is guessing 128
 *    random bits;
 *  - `fence`: the acquisition's fencing number (base 36), so that a stale ticket can say whether
 *    its lock was released, or taken over by a later acquisition;
 *  - a digest of the document's `_id` (SHA-256, 128 bits), so a ticket presented for another
 *    document is refused before anything is sent.
 * It carries nothing about the owner, not even a hash: the owner is checked by the server
 * (the resume's filter names the caller's owner key), so a ticket that leaks to another session
 * is useless there, and a ticket reveals nothing about who holds the lock.
 * Nothing in a ticket is ever evaluated: the token is matched as a plain string in a filter and
 * enters projections only inside `$literal`; the fence is a safe integer; the digest is
 * compared in this process.
 */
import { createHash } from 'node:crypto';
import { mongo } from 'mongoose';
import { InvalidLockOptionError } from './errors';
import { describeValue } from './options';

/** Longest string accepted as a ticket (a real one is about 60 characters). */
export const MAX_TICKET_LENGTH = 100;

const TICKET = /^mpl1\.([A-Za-z0-9_-]{22})\.([0-9a-z]{1,11})\.([A-Za-z0-9_-]{22})$/;

/** What a ticket names: one acquisition. */
export interface TicketParts {
  token: string;
  fence: number;
}

/** 128-bit digest of a (cast) document `_id`, in a canonical form that keeps its BSON type. */
function documentDigest(documentId: unknown): string {
  const canonical = mongo.BSON.EJSON.stringify({ id: documentId } as mongo.Document, { relaxed: false });
  return createHash('sha256').update(canonical, 'utf8').digest('base64url').slice(0, 22);
}

/** The ticket of one acquisition of one document. */
export function issueTicket(documentId: unknown, token: string, fence: number): string {
  return `mpl1.${token}.${fence.toString(36)}.${documentDigest(documentId)}`;
}

/**
 * Reads a ticket presented for `documentId` (already cast to the schema's `_id` type), or throws
 * InvalidLockOptionError naming `option` before anything is sent to the database.
 */
export function readTicket(ticket: unknown, documentId: unknown, option: string): TicketParts {
  if (typeof ticket !== 'string') {
    throw new InvalidLockOptionError(option, `expected a lock ticket (the string doc.heldLock().ticket), got ${describeValue(ticket)}.`);
  }
  const match = ticket.length <= MAX_TICKET_LENGTH ? TICKET.exec(ticket) : null;
  if (!match) {
    throw new InvalidLockOptionError(option, 'this is not a lock ticket: pass the string doc.heldLock().ticket unchanged (it was cut, altered, or is something else).');
  }
  const [, token, fence36, digest] = match;
  const fence = parseInt(fence36!, 36);
  if (!Number.isSafeInteger(fence)) throw new InvalidLockOptionError(option, 'this is not a lock ticket: its fencing number is out of range.');
  if (digest !== documentDigest(documentId)) {
    throw new InvalidLockOptionError(option, 'this ticket was issued for another document; pass the ticket of the document you are locking.');
  }
  return { token: token!, fence };
}
