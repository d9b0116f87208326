/**
 * Issue 11, item 1 (PRODUCT.md property 12): a web flow that opens a document in one request and
 * saves it in a later one cannot overwrite someone else's work. The later request continues the
 * same acquisition with its lock ticket (`Model.lock(id, owner, { resume: ticket })`), which
 * succeeds only while that acquisition is current; `Model.unlock(id, owner)` cancels from any
 * request in one command.
 */
import { Types } from 'mongoose';
import { InvalidLockOptionError, LockExpiredError, LockNotHeldError, LockedError, MAX_TICKET_LENGTH } from '../../src';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('resume');
let conn: MonitoredConnection;
let WorkItem: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  WorkItem = await workItemModel(conn.connection, { ttl: 10_000 });
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

const newItem = async (title = 'Refund #4711') => (await WorkItem.create({ title }))._id;
const errorOf = (promise: Promise<unknown>) => promise.then(() => undefined, (error: unknown) => error);

describe('a lock ticket continues the same acquisition in a later request', () => {
  test('open in one request, submit in another: same token and fence, a later expiry, two commands', async () => {
    const id = await newItem();
    const opened = await WorkItem.lock(id, 'alice-session');
    const { ticket, token, fence, expiresAt } = opened.heldLock()!;
    expect(ticket.length).toBeLessThanOrEqual(MAX_TICKET_LENGTH);
    expect(ticket).not.toContain('alice');
    await sleep(20);

    conn.resetCommands();
    const submitted = await WorkItem.lock(id.toHexString(), 'alice-session', { resume: ticket });
    expect(conn.commands).toEqual(['findAndModify', 'find']); // the resume, and loading the document
    const held = submitted.heldLock()!;
    expect(held.token).toBe(token);
    expect(held.fence).toBe(fence);
    expect(held.ticket).toBe(ticket);
    expect(held.expiresAt.getTime()).toBeGreaterThan(expiresAt.getTime());

    submitted.status = 'done';
    await submitted.saveAndUnlock();
    expect((await WorkItem.findById(id).orFail()).status).toBe('done');
    expect(await WorkItem.isLocked(id)).toBe(false);
  });

  test('the lost update of the issue: an expired opener whose lock someone else took, used and released cannot overwrite', async () => {
    const id = await newItem();
    const alice = await WorkItem.lock(id, 'alice-session', { ttl: 300 });
    const aliceTicket = alice.heldLock()!.ticket;
    await sleep(450); // Alice's form stays open past her ttl

    const bob = await WorkItem.lock(id, 'bob-session');
    bob.title = 'refund SENT';
    await bob.saveAndUnlock();

    // Before tickets, the submit re-locked, which succeeded because the lock was free again.
    const error = await errorOf(WorkItem.lock(id, 'alice-session', { resume: aliceTicket }));
    expect(error).toBeInstanceOf(LockNotHeldError);
    expect((error as LockNotHeldError).reason).toBe('taken_over');
    expect((error as LockNotHeldError).status).toBe(409);
    expect((await WorkItem.findById(id).orFail()).title).toBe('refund SENT');
    expect(await WorkItem.isLocked(id)).toBe(false); // a refused resume takes nothing
  });

  test('expired and nobody took it: LockExpiredError, and nothing is locked', async () => {
    const id = await newItem();
    const opened = await WorkItem.lock(id, 'alice-session', { ttl: 200 });
    await sleep(350);
    const error = await errorOf(WorkItem.lock(id, 'alice-session', { resume: opened.heldLock()!.ticket }));
    expect(error).toBeInstanceOf(LockExpiredError);
    expect((error as LockExpiredError).reason).toBe('expired');
    expect(await WorkItem.isLocked(id)).toBe(false);
  });

  test('released (logout in another tab, an admin): reason released', async () => {
    const id = await newItem();
    const opened = await WorkItem.lock(id, 'alice-session');
    await WorkItem.releaseAllFor('alice-session');
    const error = await errorOf(WorkItem.lock(id, 'alice-session', { resume: opened.heldLock()!.ticket }));
    expect((error as LockNotHeldError).reason).toBe('released');
  });

  test('the same owner opened the item again (a new acquisition): the older form is taken over', async () => {
    const id = await newItem();
    const firstTab = await WorkItem.lock(id, 'alice-session');
    const secondTab = await WorkItem.lock(id, 'alice-session');
    const error = await errorOf(WorkItem.lock(id, 'alice-session', { resume: firstTab.heldLock()!.ticket }));
    expect((error as LockNotHeldError).reason).toBe('taken_over');
    const resumed = await WorkItem.lock(id, 'alice-session', { resume: secondTab.heldLock()!.ticket });
    expect(resumed.heldLock()!.token).toBe(secondTab.heldLock()!.token);
    await resumed.unlock();
  });

  test('a ticket is useless to another owner and reveals nothing about the holder', async () => {
    const id = await newItem();
    const alice = await WorkItem.lock(id, 'alice-session');
    const { ticket, expiresAt } = alice.heldLock()!;
    const error = await errorOf(WorkItem.lock(id, 'mallory-session', { resume: ticket }));
    expect(error).toBeInstanceOf(LockNotHeldError);
    expect((error as LockNotHeldError).reason).toBe('not_locked');
    expect(JSON.stringify(error) + (error as Error).message).not.toContain('alice');
    expect((await WorkItem.getLock(id))!.expiresAt.getTime()).toBe(expiresAt.getTime()); // untouched
    await expect(WorkItem.lock(id, 'mallory-session')).rejects.toBeInstanceOf(LockedError);
    await alice.unlock();
  });

  test('a forged ticket (another token in the right format) continues nothing', async () => {
    const id = await newItem();
    const alice = await WorkItem.lock(id, 'alice-session');
    const real = alice.heldLock()!.ticket;
    const [prefix, token, fence, digest] = real.split('.');
    const forgedToken = (token!.startsWith('A') ? 'B' : 'A') + token!.slice(1);
    const error = await errorOf(WorkItem.lock(id, 'alice-session', { resume: [prefix, forgedToken, fence, digest].join('.') }));
    expect(error).toBeInstanceOf(LockNotHeldError);
    expect(alice.heldLock()).not.toBeNull();
    await alice.unlock(); // Alice's own acquisition is still intact
  });

  test('a ticket for another document, a mangled one, or resume with wait: InvalidLockOptionError before any command', async () => {
    const id = await newItem();
    const other = await newItem();
    const opened = await WorkItem.lock(id, 'alice-session');
    const ticket = opened.heldLock()!.ticket;
    const cases: [unknown, unknown][] = [
      [other, { resume: ticket }],
      [id, { resume: ticket.slice(0, -1) }],
      [id, { resume: `${ticket}x` }],
      [id, { resume: ticket.toUpperCase() }],
      [id, { resume: { $ne: null } }],
      [id, { resume: 'x'.repeat(10_000) }],
      [id, { resume: ticket, wait: 1000 }],
      [id, { resume: ticket, label: 'Alice' }],
    ];
    for (const [target, options] of cases) {
      conn.resetCommands();
      const error = await errorOf(WorkItem.lock(target as Types.ObjectId, 'alice-session', options as never));
      expect(error).toBeInstanceOf(InvalidLockOptionError);
      expect((error as InvalidLockOptionError).option).toBe('resume');
      expect(conn.commands).toEqual([]);
    }
    await opened.unlock();
  });

  test('the resumed document is guarded like any holder: a takeover after the resume still refuses its save', async () => {
    const id = await newItem();
    const opened = await WorkItem.lock(id, 'alice-session');
    const resumed = await WorkItem.lock(id, 'alice-session', { resume: opened.heldLock()!.ticket, ttl: 200 });
    await sleep(350);
    const bob = await WorkItem.lock(id, 'bob-session');
    resumed.title = 'stale';
    await expect(resumed.saveAndUnlock()).rejects.toBeInstanceOf(LockNotHeldError);
    await bob.unlock();
    expect((await WorkItem.findById(id).orFail()).title).toBe('Refund #4711');
  });
});

describe('Model.unlock(id, owner): cancel from another request', () => {
  test('one command; releases only the owner\'s lock; a second call reports false', async () => {
    const id = await newItem();
    await WorkItem.lock(id, 'alice-session');
    await expect(WorkItem.unlock(id, 'bob-session')).resolves.toBe(false);
    expect(await WorkItem.isLocked(id)).toBe(true);
    conn.resetCommands();
    await expect(WorkItem.unlock(id.toHexString(), 'alice-session')).resolves.toBe(true);
    expect(conn.commands).toEqual(['update']);
    expect(await WorkItem.isLocked(id)).toBe(false);
    await expect(WorkItem.unlock(id, 'alice-session')).resolves.toBe(false);
  });

  test('with a ticket, only that acquisition: a stale form cannot cancel a newer one', async () => {
    const id = await newItem();
    const older = await WorkItem.lock(id, 'alice-session');
    const newer = await WorkItem.lock(id, 'alice-session');
    await expect(WorkItem.unlock(id, 'alice-session', { ticket: older.heldLock()!.ticket })).resolves.toBe(false);
    expect(await WorkItem.isLocked(id)).toBe(true);
    await expect(WorkItem.unlock(id, 'alice-session', { ticket: newer.heldLock()!.ticket })).resolves.toBe(true);
    expect(await WorkItem.isLocked(id)).toBe(false);
  });

  test('the holder\'s document learns that its lock was released', async () => {
    const id = await newItem();
    const opened = await WorkItem.lock(id, 'alice-session');
    await WorkItem.unlock(id, 'alice-session');
    opened.title = 'after cancel';
    const error = await errorOf(opened.save());
    expect((error as LockNotHeldError).reason).toBe('released');
  });
});
