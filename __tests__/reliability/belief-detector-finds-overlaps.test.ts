/**
 * The belief tests' independent check (support/grant-history.ts) can fail: fed a made-up history
 * of one lock record, it reports an owner that believes it holds the lock after another owner's
 * grant was committed, and one that counts on more than the server granted; it does not report a
 * holder whose release was still uncommitted when the next acquisition read its `$$NOW`.
 */
import type { mongo } from 'mongoose';
import { beliefViolations, grantedAt, grantsFrom, serverOverlaps } from '../support/grant-history';

const T0 = 1_800_000_000_000;
const at = (ms: number) => new Date(T0 + ms);

function insert(ms: number, fields: Record<string, unknown>): mongo.ChangeStreamDocument {
  return { operationType: 'insert', wallTime: at(ms), fullDocument: fields } as unknown as mongo.ChangeStreamDocument;
}
function update(ms: number, fields: Record<string, unknown>): mongo.ChangeStreamDocument {
  return { operationType: 'update', wallTime: at(ms), updateDescription: { updatedFields: fields } } as unknown as mongo.ChangeStreamDocument;
}

/** A takes the lock at 0 for 1 s; its release, run at 90 in a transaction, is committed at 100; B's acquisition read $$NOW at 95 and is committed at 105. */
const history = [
  insert(0, { owner: 'A', token: 'a1', acquiredAt: at(0), expiresAt: at(1_000) }),
  update(100, { token: null, expiresAt: at(90) }),
  update(105, { owner: 'B', token: 'b1', acquiredAt: at(95), expiresAt: at(1_095) }),
];

test('replays grants: the release ends the first, the next one starts at its acquiredAt and is committed at its wall time', () => {
  const grants = grantsFrom(history);
  expect(grants.map(({ owner, token, start, committed, end }) => ({ owner, token, start, committed, end }))).toEqual([
    { owner: 'A', token: 'a1', start: T0, committed: T0, end: T0 + 90 },
    { owner: 'B', token: 'b1', start: T0 + 95, committed: T0 + 105, end: T0 + 1_095 },
  ]);
  expect(serverOverlaps(grants)).toEqual([]);
});

test('an owner still believing after the next grant was committed is reported; before that commit it is not', () => {
  const grants = grantsFrom(history);
  // At 97 A's release is not written yet: A's belief is right, although B's acquiredAt is 95.
  expect(beliefViolations({ owner: 'A', token: 'a1', t: T0 + 97, m: 1 }, grants)).toEqual([]);
  const late = beliefViolations({ owner: 'A', token: 'a1', t: T0 + 110, m: 50 }, grants);
  expect(late).toHaveLength(2);
  expect(late[0]).toMatch(/^A believed at \d+ \(for 50 ms\) while B held/);
  expect(late[1]).toMatch(/^A counted at \d+ on its lock until \d+, the server had granted it until \d+$/);
});

test('counting on more than the server granted, or on an acquisition it never granted, is reported', () => {
  const grants = grantsFrom(history);
  expect(beliefViolations({ owner: 'A', token: 'a1', t: T0 + 50, m: 952 }, grants)).toHaveLength(1);
  expect(beliefViolations({ owner: 'A', token: 'a1', t: T0 + 50, m: 951 }, grants)).toEqual([]);
  expect(beliefViolations({ owner: 'C', token: 'c1', t: T0 + 2_000, m: 10 }, grants)).toEqual([expect.stringMatching(/never granted/)]);
});

test('two owners granted at once by the server are reported', () => {
  const overlapping = grantsFrom([
    insert(0, { owner: 'A', token: 'a1', acquiredAt: at(0), expiresAt: at(1_000) }),
    update(500, { owner: 'B', token: 'b1', acquiredAt: at(500), expiresAt: at(1_500) }),
  ]);
  // The replay ends A's grant where B's begins; property 1 is judged on what A was granted.
  overlapping[0]!.end = T0 + 1_000;
  expect(serverOverlaps(overlapping)).toEqual([`A until ${T0 + 1_000} / B from ${T0 + 500}`]);
});

test('a write in the very millisecond of a sample may come before or after it: either expiry is allowed', () => {
  const [grant] = grantsFrom([
    insert(0, { owner: 'A', token: 'a1', acquiredAt: at(0), expiresAt: at(1_000) }),
    update(200, { expiresAt: at(600) }),
  ]);
  expect(grantedAt(grant!, T0 + 199)).toBe(T0 + 1_000);
  expect(grantedAt(grant!, T0 + 200)).toBe(T0 + 1_000);
  expect(grantedAt(grant!, T0 + 201)).toBe(T0 + 600);
});

test('a takeover of a record whose expiry the server had not reached is reported on the replayed history itself', () => {
  // B's acquisition overwrites A's record at 500 (no release in between) although the expiry the
  // server last wrote for A is 1000: the server granted the lock to two owners at once (property 1).
  const grants = grantsFrom([
    insert(0, { owner: 'A', token: 'a1', acquiredAt: at(0), expiresAt: at(1_000) }),
    update(500, { owner: 'B', token: 'b1', acquiredAt: at(500), expiresAt: at(1_500) }),
  ]);
  expect(serverOverlaps(grants)).toEqual([`A until ${T0 + 1_000} / B from ${T0 + 500}`]);
  // A's lease (conservative) had ended before 500, so no sample of A's shows it: property 1 is the
  // only check that can see this history.
  expect([0, 100, 400].flatMap((ms) => beliefViolations({ owner: 'A', token: 'a1', t: T0 + ms, m: 50 }, grants))).toEqual([]);
});

test('a takeover at or after the expiry the server last wrote (extensions included) is not reported', () => {
  const grants = grantsFrom([
    insert(0, { owner: 'A', token: 'a1', acquiredAt: at(0), expiresAt: at(400) }),
    update(300, { expiresAt: at(1_000) }),
    update(1_000, { owner: 'B', token: 'b1', acquiredAt: at(1_000), expiresAt: at(2_000) }),
  ]);
  expect(serverOverlaps(grants)).toEqual([]);
});
