/**
 * The reserve command (LockStore.reserve, docs/mongodb-compatibility.md#cmd-reserve) keeps a
 * document's reservation with its OLDEST waiter: (since, key) ordered by `since` (the server time of
 * the waiting call's first refusal), then by key. A younger waiter's reserve is a no-op on an older
 * live reservation; an older one takes a younger one over; a reservation written before
 * `reservedSince` existed reads as the newest; a lapsed one is anyone's; the holder's own renewal
 * keeps it. A clear ends only its own key's reservation (so a taken-over waiter's clear is a no-op).
 * Commands sent to the server (the emulator here), the record read back after each.
 */
import { Types, type mongo } from 'mongoose';
import { LockedError } from '../../src';
import { sleep } from '../support/db';
import { lockStoreFixture } from '../support/lock-store-fixture';

const fx = lockStoreFixture('reservation_oldest');

const record = async (id: Types.ObjectId) => {
  const found = await fx.M.lockModel().collection.findOne({ _id: id });
  return { by: found?.reservedBy as unknown, since: (found?.reservedSince as Date | undefined)?.toISOString(), until: found?.reservedUntil as Date | undefined };
};
const older = new Date('2026-01-01T00:00:00.000Z');
const younger = new Date('2026-01-01T00:00:00.001Z');

test('a younger waiter never overwrites an older live reservation, in either order of arrival', async () => {
  // reserve resolves to whether the caller holds the reservation afterwards (the update wrote: an
  // insert, a reservation, a renewal or a takeover; a no-op, R5, when an older waiter keeps it).
  const id = new Types.ObjectId();
  expect(await fx.store.reserve(id, 'old-key', older, 30_000)).toBe(true);
  expect(await fx.store.reserve(id, 'young-key', younger, 30_000)).toBe(false);
  expect(await record(id)).toMatchObject({ by: 'old-key', since: older.toISOString() });
  // The older one renews: still its own.
  expect(await fx.store.reserve(id, 'old-key', older, 30_000)).toBe(true);
  expect(await record(id)).toMatchObject({ by: 'old-key', since: older.toISOString() });

  const other = new Types.ObjectId();
  expect(await fx.store.reserve(other, 'young-key', younger, 30_000)).toBe(true);
  expect(await record(other)).toMatchObject({ by: 'young-key', since: younger.toISOString() });
  expect(await fx.store.reserve(other, 'old-key', older, 30_000)).toBe(true);
  expect(await record(other)).toMatchObject({ by: 'old-key', since: older.toISOString() });
  // The taken-over waiter's renewal and clear change nothing.
  const until = (await record(other)).until;
  expect(await fx.store.reserve(other, 'young-key', younger, 30_000)).toBe(false);
  await fx.store.clearReservation(other, 'young-key');
  expect(await record(other)).toEqual({ by: 'old-key', since: older.toISOString(), until });
});

test('equal since: the smaller key keeps it (a total order), whichever arrives first', async () => {
  for (const [first, second] of [['aaa', 'bbb'], ['bbb', 'aaa']]) {
    const id = new Types.ObjectId();
    expect(await fx.store.reserve(id, first!, older, 30_000)).toBe(true);
    expect(await fx.store.reserve(id, second!, older, 30_000)).toBe(second === 'aaa');
    expect((await record(id)).by).toBe('aaa');
  }
});

test('a reservation without reservedSince (written before it existed) reads as the newest; a lapsed one is anyone\'s', async () => {
  const id = new Types.ObjectId();
  await fx.M.lockModel().collection.insertOne({ _id: id, expiresAt: new Date(0), reservedBy: 'legacy', reservedUntil: new Date(Date.now() + 60_000) } as mongo.Document);
  await fx.store.reserve(id, 'young-key', younger, 30_000);
  expect(await record(id)).toMatchObject({ by: 'young-key', since: younger.toISOString() });

  const lapsed = new Types.ObjectId();
  await fx.store.reserve(lapsed, 'old-key', older, 50);
  await sleep(300);
  await fx.store.reserve(lapsed, 'young-key', younger, 30_000);
  expect(await record(lapsed)).toMatchObject({ by: 'young-key', since: younger.toISOString() });
});

test('a waiting call that holds no reservation is refused by a live one, whoever is older; wait-less calls too', async () => {
  const id = new Types.ObjectId();
  await fx.store.reserve(id, 'reserver', younger, 30_000);
  const waiter = { key: 'another', since: undefined as Date | undefined };
  const refusal = await fx.store.acquire(id, 'owner-of-waiter', 30_000, null, waiter).catch((error: unknown) => error);
  expect(refusal).toBeInstanceOf(LockedError);
  expect(refusal).toMatchObject({ expiresAt: undefined, label: null });
  expect((refusal as LockedError).retryAfterMs).toBeGreaterThan(0);
  // The refusal recorded the server time of the waiter's first refusal.
  expect(waiter.since).toBeInstanceOf(Date);
  await expect(fx.store.acquire(id, 'no-wait', 30_000)).rejects.toThrow(LockedError);
  // The reserver's own key lets it in.
  await expect(fx.store.acquire(id, 'reserver-owner', 30_000, null, { key: 'reserver', since: younger })).resolves.toMatchObject({ fence: expect.any(Number) });
});
