/**
 * PRODUCT.md property 13 and README "Keeping a lock alive": every instance of one acquisition in
 * this process shares one lease, so a release through any of them ends every instance's belief,
 * and extensions or resumes through any of them shorten what all of them count on.
 *
 * Since f0c6a94 (issue 16) a lease enters this process's map of leases (src/held-lock.ts) only
 * when an instance's `ticket` is read, on the argument that "a resume needs the ticket", so the
 * instance that issued it is in the map. That holds when the ticket was issued in this process.
 * A web application behind a load balancer resumes tickets that ANOTHER server issued (the lock
 * was opened there; the form is submitted here), and two requests of one session can resume the
 * same ticket on this server at once (the form submitted twice, a second tab). The resumed
 * instances are created with the ticket as a function of the grant (plugin.ts, takeLease) and
 * never read it, so neither enters the map and each gets a lease of its own: the release or the
 * shorter extension of one is not heard by the other, nor by `Model.unlock(id, owner, { ticket })`.
 *
 * The ticket here comes from a child process (__tests__/regressions/workers/ticket-issuer.ts) that
 * locks the document and exits without releasing it. The check of what an instance believes is
 * independent of the plugin's bookkeeping: the emulator runs on this machine, so the lock record's
 * `expiresAt` (server clock) and `Date.now()` read one clock.
 */
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import type { Types } from 'mongoose';
import type { LockableDocument } from '../../src';
import { testUri } from '../../test-backend/test-env';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItem, type WorkItemModel } from '../support/work-item';
import type { TicketIssuerConfig } from './workers/ticket-issuer';

const db = testDatabase('resumeshare');
const MODEL = 'ResumeShare';
const TTL = 30_000;
let conn: MonitoredConnection;
let M: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  M = await workItemModel(conn.connection, { ttl: TTL }, MODEL);
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

/** Another server of the application locks `id` for `owner` and hands over the ticket (as a form or a session would). */
function ticketFromAnotherServer(id: Types.ObjectId, owner: string): Promise<string> {
  const config: TicketIssuerConfig = { uri: testUri(), dbName: db.name, modelName: MODEL, id: id.toHexString(), owner, ttl: TTL };
  return new Promise((resolve, reject) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', join(__dirname, 'workers', 'ticket-issuer.ts')],
      { env: { ...process.env, MPL_TICKET_ISSUER: JSON.stringify(config) }, timeout: 60_000 },
      (error, stdout, stderr) => (error ? reject(new Error(`${error.message}\n${stderr}`)) : resolve((JSON.parse(stdout.trim().split('\n').pop()!) as { ticket: string }).ticket)),
    );
  });
}

type Doc = LockableDocument<WorkItem>;

/** Two requests of one session resume the same ticket on this server. */
async function resumedTwice(title: string): Promise<{ id: Types.ObjectId; ticket: string; first: Doc; second: Doc }> {
  const { _id: id } = await M.create({ title });
  const ticket = await ticketFromAnotherServer(id, 'alice');
  const first = await M.lock(id, 'alice', { resume: ticket });
  const second = await M.lock(id, 'alice', { resume: ticket });
  expect(second.heldLock()!.token).toBe(first.heldLock()!.token);
  return { id, ticket, first, second };
}

/** Milliseconds past the server's expiry of the lock that `doc` counts on (≤ 0 is within the grant); the server's expiry is 0 once the lock is free. */
async function beliefPastServer(doc: Doc, id: Types.ObjectId): Promise<number> {
  const info = await M.getLock(id);
  const believedUntil = Date.now() + (doc.heldLock()?.msLeft() ?? 0);
  return info ? believedUntil - info.expiresAt.getTime() : (doc.heldLock()?.msLeft() ?? 0);
}

describe('two instances resumed in this process from a ticket another server issued', () => {
  test('one of them unlocks: the other no longer counts on the lock', async () => {
    const { first, second } = await resumedTwice('unlock through one');
    await first.unlock();
    expect(second.heldLock()?.msLeft() ?? 0).toBe(0);
  }, 90_000);

  test('saveAndUnlock through one: the other no longer counts on the lock', async () => {
    const { first, second } = await resumedTwice('saveAndUnlock through one');
    first.status = 'done';
    await first.saveAndUnlock();
    expect(second.heldLock()?.msLeft() ?? 0).toBe(0);
  }, 90_000);

  test('Model.unlock with the ticket: neither counts on the lock', async () => {
    const { id, ticket, first, second } = await resumedTwice('Model.unlock with the ticket');
    await expect(M.unlock(id, 'alice', { ticket })).resolves.toBe(true);
    expect([first.heldLock()?.msLeft() ?? 0, second.heldLock()?.msLeft() ?? 0]).toEqual([0, 0]);
  }, 90_000);

  test('one extends to 30 s, then the other to 500 ms: neither counts on more than the server grants', async () => {
    const { id, first, second } = await resumedTwice('extended through both');
    await first.extendLock(30_000);
    await second.extendLock(500);
    expect(await beliefPastServer(first, id)).toBeLessThanOrEqual(1);
    expect(await beliefPastServer(second, id)).toBeLessThanOrEqual(1);
  }, 90_000);

  test('a third resume with a 500 ms ttl: the earlier instances do not count on more than the server grants', async () => {
    const { id, ticket, first, second } = await resumedTwice('resumed shorter');
    await M.lock(id, 'alice', { resume: ticket, ttl: 500 });
    expect(await beliefPastServer(first, id)).toBeLessThanOrEqual(1);
    expect(await beliefPastServer(second, id)).toBeLessThanOrEqual(1);
  }, 90_000);
});
