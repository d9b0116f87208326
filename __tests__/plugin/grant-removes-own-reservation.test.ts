/**
 * A waiting call that reserved its document removes its reservation with the grant itself
 * (LockStore.acquire, docs/mongodb-compatibility.md#cmd-acquire, the second `$set` stage), so it
 * sends no separate clear afterwards. The acquisition told to clear (a waiter whose `clearingMark`
 * answers a mark) removes `reservedBy`, `reservedUntil` and `reservedSince` only when it is granted
 * AND the reservation is the caller's key; a lapsed reservation of another waiter (one that took
 * this call's over) stays as it was; a refusal writes nothing. A waiter that has not reserved sends
 * the one-stage acquisition of before. Commands sent to the server (the emulator here), the record
 * read back after each. Before the change the store ignored the mark: the first two tests failed
 * (the reservation stayed on the granted record).
 */
import { Types, type mongo } from 'mongoose';
import { LockedError } from '../../src';
import type { ReservingWaiter } from '../../src/lock-store';
import { sleep } from '../support/db';
import { lockStoreFixture } from '../support/lock-store-fixture';

const fx = lockStoreFixture('grant_removes_reservation');

const raw = (id: Types.ObjectId) => fx.M.lockModel().collection.findOne({ _id: id });
const since = new Date('2026-01-01T00:00:00.000Z');

/** A waiter that has reserved (clearingMark answers 1), recording the marks of its grants. */
function reservedWaiter(key: string): ReservingWaiter & { marks: Array<number | undefined> } {
  const marks: Array<number | undefined> = [];
  return { key, since, marks, clearingMark: () => 1, granted: (mark) => void marks.push(mark) };
}

/** The update pipelines of the findAndModify commands `run` sends. */
async function acquisitionsOf(run: () => Promise<unknown>): Promise<unknown[]> {
  const seen: unknown[] = [];
  const listener = (event: { commandName: string; command: mongo.Document }) => {
    if (event.commandName === 'findAndModify') seen.push(event.command.update);
  };
  fx.conn.connection.getClient().on('commandStarted', listener);
  try {
    await run();
  } finally {
    fx.conn.connection.getClient().off('commandStarted', listener);
  }
  return seen;
}

test('granted under its own reservation: the three reservation fields are gone, the grant told its mark', async () => {
  const id = new Types.ObjectId();
  expect(await fx.store.reserve(id, 'mine', since, 30_000)).toBe(true);
  const waiter = reservedWaiter('mine');
  const grant = await fx.store.acquire(id, 'owner-w', 30_000, null, waiter);
  const record = await raw(id);
  expect(record?.token).toBe(grant.token);
  expect(record?.owner).toBe('owner-w');
  expect(Object.keys(record ?? {}).filter((k) => k.startsWith('reserved'))).toEqual([]);
  expect(waiter.marks).toEqual([1]);
});

test("granted under another waiter's LAPSED reservation: that reservation is left as it was", async () => {
  const id = new Types.ObjectId();
  expect(await fx.store.reserve(id, 'other', since, 50)).toBe(true);
  const before = await raw(id);
  await sleep(200);
  const waiter = reservedWaiter('mine');
  const grant = await fx.store.acquire(id, 'owner-w', 30_000, null, waiter);
  const record = await raw(id);
  expect(record?.token).toBe(grant.token);
  expect({ by: record?.reservedBy, until: record?.reservedUntil, since: record?.reservedSince }).toEqual({ by: 'other', until: before?.reservedUntil, since });
});

test("refused under another waiter's live reservation, or behind a holder: nothing written, the reservation kept", async () => {
  const id = new Types.ObjectId();
  expect(await fx.store.reserve(id, 'other', since, 30_000)).toBe(true);
  const before = await raw(id);
  const waiter = reservedWaiter('mine');
  await expect(fx.store.acquire(id, 'owner-w', 30_000, null, waiter)).rejects.toBeInstanceOf(LockedError);
  expect(await raw(id)).toEqual(before);

  const held = new Types.ObjectId();
  await fx.store.acquire(held, 'holder', 30_000);
  expect(await fx.store.reserve(held, 'mine', since, 30_000)).toBe(true);
  const heldBefore = await raw(held);
  await expect(fx.store.acquire(held, 'owner-w', 30_000, null, reservedWaiter('mine'))).rejects.toBeInstanceOf(LockedError);
  expect(await raw(held)).toEqual(heldBefore);
  expect(waiter.marks).toEqual([]);
});

test('the holder renewing under its own reservation (a waiter that holds the lock) drops the reservation too', async () => {
  const id = new Types.ObjectId();
  await fx.store.acquire(id, 'owner-w', 30_000);
  expect(await fx.store.reserve(id, 'mine', since, 30_000)).toBe(true);
  const grant = await fx.store.acquire(id, 'owner-w', 30_000, null, reservedWaiter('mine'));
  const record = await raw(id);
  expect(record?.token).toBe(grant.token);
  expect(record?.reservedBy).toBeUndefined();
});

test('a waiter that has not reserved, and a call that does not wait, send the one-stage acquisition', async () => {
  const id = new Types.ObjectId();
  const notReserved: ReservingWaiter = { key: 'fresh', since: undefined, clearingMark: () => undefined, granted: () => undefined };
  const [first] = await acquisitionsOf(() => fx.store.acquire(id, 'a', 30_000, null, notReserved));
  const [second] = await acquisitionsOf(() => fx.store.acquire(new Types.ObjectId(), 'b', 30_000));
  const [third] = await acquisitionsOf(() => fx.store.acquire(new Types.ObjectId(), 'c', 30_000, null, reservedWaiter('k')));
  expect((first as unknown[]).length).toBe(1);
  expect((second as unknown[]).length).toBe(1);
  expect((third as unknown[]).length).toBe(2);
});
