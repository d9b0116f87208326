/**
 * Issue 11, item 6: "who is editing this?". An opt-in display label stored in clear beside the
 * hashed owner (`lock(id, owner, { label })`, returned by getLock and LockedError), the lock
 * status of a page of ids in ONE query, and an admin listing (by owner, per collection,
 * paginated), none of which reveals an owner or a token.
 */
import { createHash } from 'node:crypto';
import { inspect } from 'node:util';
import { mongo, type Types } from 'mongoose';
import { InvalidLockOptionError, LockedError, MAX_LABEL_LENGTH } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('status');
let conn: MonitoredConnection;
let WorkItem: WorkItemModel;

const ALICE = 'alice-session-9b1c';
const BOB = 'bob-session-44de';

beforeAll(async () => {
  conn = await connect(db.name);
  WorkItem = await workItemModel(conn.connection, { ttl: 60_000 });
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

async function items(count: number): Promise<Types.ObjectId[]> {
  const docs = await WorkItem.insertMany(Array.from({ length: count }, (_, i) => ({ title: `item ${i}` })));
  return docs.map((doc) => doc._id);
}

/** Nothing in `value` (however printed) reveals an owner, its hash or a token. */
function expectNoSecrets(value: unknown, tokens: string[]): void {
  const text = JSON.stringify(value) + inspect(value, { depth: 10, showHidden: true });
  for (const owner of [ALICE, BOB]) {
    expect(text).not.toContain(owner);
    expect(text).not.toContain(createHash('sha256').update(owner).digest('base64url'));
  }
  for (const token of tokens) expect(text).not.toContain(token);
}

describe('labels', () => {
  test('stored in clear beside the hashed owner, shown by getLock and by LockedError, cleared on release', async () => {
    const [id] = await items(1);
    const item = await WorkItem.lock(id!, ALICE, { label: 'Alice Example' });
    expect(item.heldLock()!.label).toBe('Alice Example');
    const record = await WorkItem.lockModel().collection.findOne({ _id: id });
    expect(record!.label).toBe('Alice Example');
    expect(record!.owner).toBe(createHash('sha256').update(ALICE).digest('base64url'));

    expect((await WorkItem.getLock(id!))!.label).toBe('Alice Example');
    const refused = await WorkItem.lock(id!, BOB).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(LockedError);
    expect((refused as LockedError).label).toBe('Alice Example');
    expect((refused as LockedError).message).not.toContain('Alice'); // label is data, not message text

    await item.unlock();
    expect((await WorkItem.lockModel().collection.findOne({ _id: id }))!.label).toBeNull();
    const unlabelled = await WorkItem.lock(id!, BOB);
    expect((await WorkItem.getLock(id!))!.label).toBeNull();
    await unlabelled.unlock();
  });

  test.each<[string, unknown]>([
    ['too long', 'x'.repeat(MAX_LABEL_LENGTH + 1)],
    ['empty', ''],
    ['blank', '   '],
    ['a newline', 'Alice\nSet-Cookie: x'],
    ['a NUL', 'Alice\u0000'],
    ['a DEL', 'Alice\u007f'],
    ['a C1 control', 'Alice\u0085'],
    ['a right-to-left override', 'Alice\u202etxt.exe'],
    ['a line separator', 'Alice\u2028Bob'],
    ['a lone surrogate', 'Alice\ud800'],
    ['a number', 42],
    ['an object', { $literal: 'x' }],
  ])('a label that is %s is refused before anything is sent', async (_what, label) => {
    const [id] = await items(1);
    conn.resetCommands();
    const error = await WorkItem.lock(id!, ALICE, { label: label as string }).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(InvalidLockOptionError);
    expect((error as InvalidLockOptionError).option).toBe('label');
    expect(conn.commands).toEqual([]);
  });

  test('HTML and $-strings are stored as given (escaping is the page\'s job; nothing is evaluated)', async () => {
    const [id] = await items(1);
    const label = '<script>alert(1)</script> $owner $$NOW';
    const item = await WorkItem.lock(id!, ALICE, { label });
    expect((await WorkItem.getLock(id!))!.label).toBe(label);
    await item.unlock();
  });
});

describe('lockStatus(ids): one query for a page', () => {
  test('150 ids, in order, null where free, label and mine, in exactly one find', async () => {
    const ids = await items(150);
    const tokens: string[] = [];
    for (const [i, id] of ids.entries()) {
      if (i % 3 === 0) tokens.push((await WorkItem.lock(id, ALICE, { label: 'Alice' })).heldLock()!.token);
      else if (i % 3 === 1) tokens.push((await WorkItem.lock(id, BOB)).heldLock()!.token);
    }
    conn.resetCommands();
    const page = await WorkItem.lockStatus(ids, { owner: ALICE });
    expect(conn.commands).toEqual(['find']); // no getMore: one batch
    expect(page).toHaveLength(150);
    page.forEach((status, i) => {
      if (i % 3 === 2) return expect(status).toBeNull();
      expect(status!.documentId).toEqual(ids[i]);
      expect(status!.mine).toBe(i % 3 === 0);
      expect(status!.label).toBe(i % 3 === 0 ? 'Alice' : null);
      expect(status!.remainingMs).toBeGreaterThan(0);
    });
    expectNoSecrets(page, tokens);

    // Ids as hex strings come back matched to their documents; without an owner, mine is false.
    const asStrings = await WorkItem.lockStatus(ids.slice(0, 3).map((id) => id.toHexString()));
    expect(asStrings.map((status) => status?.mine ?? null)).toEqual([false, false, null]);
    expect(await WorkItem.lockStatus([])).toEqual([]);

    await WorkItem.releaseAllFor(ALICE);
    await WorkItem.releaseAllFor(BOB);
  });

  test('bad input is refused before anything is sent', async () => {
    const cases: [unknown, unknown][] = [
      ['not an array', undefined],
      [Array.from({ length: 1001 }, () => 'x'), undefined],
      [[{ $ne: null }], undefined],
      [[], { owner: { $ne: null } }],
      [[], { viewer: 'x' }],
    ];
    for (const [ids, options] of cases) {
      conn.resetCommands();
      await expect(WorkItem.lockStatus(ids as never, options as never)).rejects.toMatchObject({ code: expect.stringMatching(/^INVALID_/) });
      expect(conn.commands).toEqual([]);
    }
  });
});

describe('listLocks: an admin listing', () => {
  test('by owner and for the whole collection, paginated with an opaque cursor, one find per page', async () => {
    const Fresh = await workItemModel(conn.connection, { ttl: 60_000 });
    const ids = (await Fresh.insertMany(Array.from({ length: 7 }, (_, i) => ({ title: `t${i}` })))).map((doc) => doc._id);
    const tokens: string[] = [];
    for (const [i, id] of ids.entries()) tokens.push((await Fresh.lock(id, i < 5 ? ALICE : BOB, { label: i < 5 ? 'Alice' : 'Bob' })).heldLock()!.token);

    const seen: string[] = [];
    let after: string | undefined;
    let pages = 0;
    do {
      conn.resetCommands();
      const page = await Fresh.listLocks({ owner: ALICE, limit: 2, after });
      expect(conn.commands).toEqual(['find']);
      expectNoSecrets(page, tokens);
      for (const lock of page.locks) {
        expect(lock.label).toBe('Alice');
        seen.push(String(lock.documentId));
      }
      after = page.next ?? undefined;
      pages++;
    } while (after !== undefined);
    expect(pages).toBe(3);
    expect(seen).toEqual(ids.slice(0, 5).map(String).sort());

    const everything = await Fresh.listLocks({ limit: 100 });
    expect(everything.locks.map((lock) => String(lock.documentId))).toEqual(ids.map(String).sort());
    expect(everything.next).toBeNull();
    expect((await Fresh.listLocks()).locks).toHaveLength(7); // default page size 50

    await Fresh.releaseAllFor(BOB);
    expect((await Fresh.listLocks({ owner: BOB })).locks).toEqual([]);
  });

  test('forged cursors and bad limits are refused before anything is sent', async () => {
    // Cursors in the current format (c2. + base64url of BSON { v: <id> }) holding what is no id.
    const forged = (value: unknown) => `c2.${Buffer.from(mongo.BSON.serialize({ v: value } as mongo.Document)).toString('base64url')}`;
    const oldFormat = `c1.${Buffer.from(JSON.stringify({ id: { $gt: '' } })).toString('base64url')}`;
    const cases: unknown[] = [
      { limit: 0 },
      { limit: 1001 },
      { limit: 2.5 },
      { after: 'nope' },
      { after: oldFormat },
      { after: forged({ $gt: '' }) },
      { after: forged(/./) },
      { after: forged([1]) },
      { after: forged(null) },
      { after: `${forged('x')}AA` }, // trailing bytes
      { after: 'c2.' + 'A'.repeat(600) },
      { owner: '' },
      { sort: 1 },
      'all',
    ];
    for (const options of cases) {
      conn.resetCommands();
      await expect(WorkItem.listLocks(options as never)).rejects.toMatchObject({ code: expect.stringMatching(/^INVALID_/) });
      expect(conn.commands).toEqual([]);
    }
  });
});
