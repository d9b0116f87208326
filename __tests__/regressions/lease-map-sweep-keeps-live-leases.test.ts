/**
 * This process's map of leases (src/held-lock.ts, since f0c6a94): a lease enters it when an
 * instance's ticket is read (or the instance is a resume), leaves it when released, and entries
 * whose lease was garbage-collected are swept whenever the map has doubled. The sweep must never
 * drop a lease an instance still carries: a resume (newHeldLockState of the same lock collection,
 * `_id` and token) must join it however many acquisitions came and went around it, with the
 * collector run in between (the WeakRef of a collected lease is empty; a live one never is).
 *
 * The check reads nothing of the map: it asks what a later resume joins (`state.lease` is the
 * shared lease object).
 */
import { Types } from 'mongoose';
import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { newHeldLockState, releaseLease, type HeldLockFields, type HeldLockState } from '../../src/held-lock';
import { monotonicNow } from '../../src/lease';

setFlagsFromString('--expose-gc');
const collectGarbage = runInNewContext('gc') as () => void;

/** Lets WeakRefs read in this job be emptied, then runs the collector. */
async function collect(): Promise<void> {
  await new Promise((resolve) => setImmediate(resolve));
  collectGarbage();
}

const SCOPE = 'db.items.locks';
const timing = () => ({ sentAt: monotonicNow(), serverNow: new Date(), expiresAt: new Date(Date.now() + 60_000) });

function fields(documentId: unknown, token: string): HeldLockFields {
  return { documentId, owner: 'alice', token, fence: 1, acquiredAt: new Date(), expiresAt: new Date(Date.now() + 60_000), ttl: 60_000, ticket: () => `mpl1.${token}`, label: null };
}

let counter = 0;
const nextToken = () => `t${String(++counter).padStart(21, '0')}`;

test('live leases are joined by a resume after 10,000 acquisitions came and went around them, with the collector run between batches', async () => {
  const live: { id: Types.ObjectId; token: string; state: HeldLockState }[] = [];
  for (let batch = 0; batch < 10; batch++) {
    for (let i = 0; i < 1_000; i++) {
      const id = new Types.ObjectId();
      const token = nextToken();
      const state = newHeldLockState(fields(id, token), timing(), SCOPE);
      void state.view().ticket; // enters the map
      if (i % 100 === 7) live.push({ id, token, state }); // kept by "its instance"
      else if (i % 3 === 0) releaseLease(state); // leaves the map at once
      // else: dropped, collected at the next collection, swept later
    }
    await collect();
  }
  expect(live).toHaveLength(100);
  for (const { id, token, state } of live) {
    // A resume of the same acquisition, with the id as another instance (same bytes, another object).
    const resumed = newHeldLockState({ ...fields(new Types.ObjectId(id.toHexString()), token), ticket: `mpl1.${token}` }, timing(), SCOPE);
    expect(resumed.lease).toBe(state.lease);
    // The same _id and token in another lock collection is another acquisition.
    expect(newHeldLockState(fields(id, token), timing(), 'db.other.locks').lease).not.toBe(state.lease);
  }
}, 60_000);

test('a released lease is never joined again, whether it was released before or after its ticket was read', () => {
  const id = new Types.ObjectId();
  const before = newHeldLockState(fields(id, nextToken()), timing(), SCOPE);
  releaseLease(before);
  void before.view().ticket; // read after the release: not entered
  expect(newHeldLockState({ ...fields(id, before.lock.token), ticket: before.view().ticket }, timing(), SCOPE).lease).not.toBe(before.lease);

  const after = newHeldLockState(fields(id, nextToken()), timing(), SCOPE);
  void after.view().ticket;
  releaseLease(after);
  expect(newHeldLockState({ ...fields(id, after.lock.token), ticket: after.view().ticket }, timing(), SCOPE).lease).not.toBe(after.lease);
});

test('a lease whose instances were all collected is not joined (its entry is empty), and the resume that replaces it is joined by the next', async () => {
  const id = new Types.ObjectId();
  const token = nextToken();
  (() => {
    const gone = newHeldLockState(fields(id, token), timing(), SCOPE);
    void gone.view().ticket;
  })();
  await collect();
  const first = newHeldLockState({ ...fields(id, token), ticket: `mpl1.${token}` }, timing(), SCOPE);
  const second = newHeldLockState({ ...fields(id, token), ticket: `mpl1.${token}` }, timing(), SCOPE);
  expect(second.lease).toBe(first.lease);
});
