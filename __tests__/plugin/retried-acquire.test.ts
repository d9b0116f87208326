/**
 * A findAndModify that the driver retried (retryable writes: the first attempt ran, its reply
 * was lost to a network error) is answered by mongod from the stored result WITHOUT the
 * projection: parseOplogEntryForFindAndModify in
 * src/mongo/db/query/write_ops/write_ops_retryability.cpp never reads the request's `fields`
 * (SERVER-31242, SERVER-48368 "findAndModify's fields option has never worked with retryable
 * writes"). The acquire must still recognise its own grant from the full record, and a
 * refusal must not crash on the missing `now`. The server's reply is stubbed here, shaped as
 * that function builds it; the integration path is exercised where the backend implements it.
 */
import type { mongo } from 'mongoose';
import { LockedError } from '../../src';
import { LockStore } from '../../src/lock-store';

/** The `$literal` token the acquire's pipeline writes (the `token` field's `$cond` true branch). */
function tokenOf(update: mongo.Document[]): string {
  const cond = (update[0].$set as mongo.Document).token.$cond as [unknown, { $literal: string }, unknown];
  return cond[1].$literal;
}

function storeAnswering(reply: (token: string) => mongo.Document): LockStore {
  const collection = {
    findOneAndUpdate: async (_filter: mongo.Document, update: mongo.Document[]) => reply(tokenOf(update)),
  };
  return new LockStore(collection as unknown as mongo.Collection<mongo.Document>);
}

const expiresAt = new Date('2030-01-01T00:00:30Z');
const acquiredAt = new Date('2030-01-01T00:00:00Z');

test('a retried acquire answered with the whole record (no projection) is recognised as granted by its token', async () => {
  const store = storeAnswering((token) => ({ _id: 'doc', owner: 'k', token, fence: 42, acquiredAt, expiresAt }));
  const grant = await store.acquire('doc', 'k', 30_000);
  expect(grant.fence).toBe(42);
  expect(grant.expiresAt).toBe(expiresAt);
  expect(grant.acquiredAt).toBe(acquiredAt);
});

test('a whole record carrying someone else\'s token is a refusal, with the expiry and no remaining time', async () => {
  const store = storeAnswering(() => ({ _id: 'doc', owner: 'other', token: 'someone-elses', fence: 7, acquiredAt, expiresAt }));
  const error = await store.acquire('doc', 'k', 30_000).catch((e: unknown) => e);
  expect(error).toBeInstanceOf(LockedError);
  expect((error as LockedError).expiresAt).toBe(expiresAt);
  expect((error as LockedError).retryAfterMs).toBeUndefined();
});

test('the projected reply decides by the server-side comparison and carries the remaining time', async () => {
  const now = new Date('2030-01-01T00:00:10Z');
  const refused = storeAnswering(() => ({ acquired: false, fence: 7, acquiredAt, expiresAt, now }));
  const error = await refused.acquire('doc', 'k', 30_000).catch((e: unknown) => e);
  expect((error as LockedError).retryAfterMs).toBe(20_000);
  const granted = storeAnswering(() => ({ acquired: true, fence: 8, acquiredAt, expiresAt, now }));
  expect((await granted.acquire('doc', 'k', 30_000)).fence).toBe(8);
});

describe('a retried resume answered with the whole record', () => {
  const ticket = { token: 'tok-tok-tok-tok-tok-tok', fence: 42 };
  const resumeAnswering = (record: mongo.Document): LockStore =>
    new LockStore({ findOneAndUpdate: async () => record } as unknown as mongo.Collection<mongo.Document>);
  const newExpiry = new Date('2030-01-01T00:10:30Z');

  test("without a ttl of the caller's: the server's time is the new expiry minus the record's stored ttl", async () => {
    const store = resumeAnswering({ _id: 'doc', owner: 'k', token: ticket.token, fence: 42, acquiredAt, expiresAt: newExpiry, ttl: 600_000 });
    const grant = await store.resume('doc', 'k', ticket, undefined, 30_000);
    expect(grant.ttl).toBe(600_000);
    expect(grant.serverNow).toEqual(new Date('2030-01-01T00:00:30Z'));
  });

  test("a record without a stored ttl: minus the plugin's ttl; with the caller's ttl: minus that", async () => {
    const old = resumeAnswering({ _id: 'doc', owner: 'k', token: ticket.token, fence: 42, acquiredAt, expiresAt: newExpiry });
    const fallback = await old.resume('doc', 'k', ticket, undefined, 30_000);
    expect(fallback.ttl).toBe(30_000);
    expect(fallback.serverNow).toEqual(new Date('2030-01-01T00:10:00Z'));
    const own = resumeAnswering({ _id: 'doc', owner: 'k', token: ticket.token, fence: 42, acquiredAt, expiresAt: newExpiry, ttl: 600_000 });
    const given = await own.resume('doc', 'k', ticket, 5_000, 30_000);
    expect(given.ttl).toBeUndefined(); // the caller chose it
    expect(given.serverNow).toEqual(new Date('2030-01-01T00:10:25Z'));
  });
});
