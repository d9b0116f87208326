/**
 * The example back office over HTTP (supertest): sign in, the list with lock status, the edit
 * page that takes the lock, the submit that resumes it with the form's ticket, cancel, the admin
 * listing and logout. The same flows in a real browser: browser.test.ts.
 */
import request from 'supertest';
import type { Types } from 'mongoose';
import { createApp, workItemModel, type WorkItemModel } from '../../examples/express-app/app';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';

const db = testDatabase('express');
let conn: MonitoredConnection;
let WorkItem: WorkItemModel;
let app: ReturnType<typeof createApp>;

beforeAll(async () => {
  conn = await connect(db.name);
  WorkItem = workItemModel(conn.connection);
  await WorkItem.init();
  app = createApp({ WorkItem, sessionSecret: 'test-secret-test-secret' });
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

async function newItem(title = 'Refund #1'): Promise<Types.ObjectId> {
  return (await WorkItem.create({ title, status: 'pending' }))._id;
}

async function signIn(name: string): Promise<ReturnType<typeof request.agent>> {
  const agent = request.agent(app);
  await agent.post('/login').type('form').send({ name }).expect(303);
  return agent;
}

/** Waits (bounded) until the item's lock has expired by the server's clock: a condition, not a fixed sleep. */
async function untilExpired(id: string): Promise<void> {
  const deadline = Date.now() + 60_000;
  while (await WorkItem.isLocked(id)) {
    if (Date.now() > deadline) throw new Error(`${id} is still locked after 60 s`);
    await sleep(50);
  }
}

const ticketIn = (page: string): string => /name="ticket" value="([^"]+)"/.exec(page)![1]!;

test('sign in first: the list and the edit pages redirect to the sign-in page', async () => {
  await request(app).get('/items').expect(303).expect('Location', '/');
  const page = await request(app).get('/').expect(200);
  expect(page.text).toContain('Sign in');
});

test('two users: the second sees who edits and when it frees; the first saves; then the second gets it', async () => {
  const alice = await signIn('Alice');
  const bob = await signIn('Bob');
  const id = (await newItem()).toHexString();

  const edit = await alice.get(`/items/${id}/edit`).expect(200);
  expect(edit.text).toContain('You hold the lock');
  const ticket = ticketIn(edit.text);

  const list = await bob.get('/items').expect(200);
  expect(list.text).toMatch(/being edited by Alice, free in \d+ s/);
  const locked = await bob.get(`/items/${id}/edit`).expect(423);
  expect(locked.text).toContain('<b id="holder">Alice</b> is editing this item.');
  expect(locked.text).toMatch(/It frees at .*\(in \d+ s\)/);
  expect(Number(locked.headers['retry-after'])).toBeGreaterThan(0);
  expect(locked.text).not.toContain('name="ticket"');

  await alice.post(`/items/${id}`).type('form').send({ ticket, title: 'Refund #1', status: 'approved', notes: 'ok' }).expect(303).expect('Location', '/items');
  expect((await WorkItem.findById(id).orFail()).status).toBe('approved');
  expect(await WorkItem.isLocked(id)).toBe(false);
  expect((await alice.get('/items').expect(200)).text).toContain('Saved “Refund #1”.');

  await bob.get(`/items/${id}/edit`).expect(200);
  await bob.post('/logout').expect(303);
  expect(await WorkItem.isLocked(id)).toBe(false);
});

test('the stale submit of the issue: Alice\'s lock expired, Bob saved "refund sent"; Alice\'s "pending" is refused, nothing is lost', async () => {
  const alice = await signIn('Alice');
  const bob = await signIn('Bob');
  const id = (await newItem('Refund #2')).toHexString();
  app.locals.lockTtlMs = 1_500;
  try {
    const aliceForm = ticketIn((await alice.get(`/items/${id}/edit`).expect(200)).text);
    await untilExpired(id);
    const bobForm = ticketIn((await bob.get(`/items/${id}/edit`).expect(200)).text);
    await bob.post(`/items/${id}`).type('form').send({ ticket: bobForm, title: 'Refund #2', status: 'refund sent', notes: 'sent by Bob' }).expect(303);

    const stale = await alice.post(`/items/${id}`).type('form').send({ ticket: aliceForm, title: 'Refund #2', status: 'pending', notes: 'Alice, stale' }).expect(409);
    expect(stale.text).toContain('Your changes were not saved');
    // Bob's acquisition has ended (he saved), and a release forgets its owner: the page says what is known.
    expect(stale.text).toContain('the item was opened for editing again (in another tab, or by someone else after your lock expired)');
    expect(stale.text).toContain('<textarea id="mine-notes" rows="4" maxlength="2000" readonly>Alice, stale</textarea>'); // her text, in full
    const stored = await WorkItem.findById(id).orFail();
    expect(stored.status).toBe('refund sent');
    expect(stored.notes).toBe('sent by Bob');
    expect(await WorkItem.isLocked(id)).toBe(false);

    // Expired and nobody touched it: still refused (someone could have written meanwhile).
    const form = ticketIn((await alice.get(`/items/${id}/edit`).expect(200)).text);
    await untilExpired(id);
    const expired = await alice.post(`/items/${id}`).type('form').send({ ticket: form, title: 'x', status: 'done', notes: '' }).expect(409);
    expect(expired.text).toContain('Your lock on this item expired before you saved');
    expect((await WorkItem.findById(id).orFail()).status).toBe('refund sent');
  } finally {
    app.locals.lockTtlMs = 5 * 60_000;
  }
});

test('labels are user data: a name full of HTML is shown escaped to the other user', async () => {
  const mallory = await signIn('<img src=x onerror=alert(1)>');
  const bob = await signIn('Bob');
  const id = (await newItem('XSS probe')).toHexString();
  await mallory.get(`/items/${id}/edit`).expect(200);
  const locked = await bob.get(`/items/${id}/edit`).expect(423);
  expect(locked.text).not.toContain('<img src=x');
  expect(locked.text).toContain('&lt;img src=x onerror=alert(1)&gt;');
  expect((await bob.get('/items')).text).not.toContain('<img src=x');
  await mallory.post('/logout').expect(303);
});

test('cancel releases in one request; a validation error keeps the lock and the ticket; bad ids and missing items are pages with 400 and 404', async () => {
  const carol = await signIn('Carol');
  const id = (await newItem()).toHexString();
  const ticket = ticketIn((await carol.get(`/items/${id}/edit`).expect(200)).text);
  const invalid = await carol.post(`/items/${id}`).type('form').send({ ticket, title: '', status: 'done', notes: '' }).expect(400);
  expect(invalid.text).toContain('title');
  expect(ticketIn(invalid.text)).toBe(ticket);
  expect(await WorkItem.isLocked(id)).toBe(true);
  await carol.post(`/items/${id}/cancel`).type('form').send({ ticket }).expect(303);
  expect(await WorkItem.isLocked(id)).toBe(false);

  await carol.get('/items/%7B%22%24ne%22%3Anull%7D/edit').expect(400);
  await carol.get('/items/656f1f77bcf86cd799439011/edit').expect(404);
  const forged = await carol.post(`/items/${id}`).type('form').send({ ticket: 'mpl1.forged', title: 'x', status: 'done', notes: '' }).expect(400);
  expect(forged.text).toContain('not a lock ticket');
});

test('logout releases everything the session held; the admin page lists current locks with labels', async () => {
  const dave = await signIn('Dave');
  const ids = await Promise.all([newItem('a'), newItem('b'), newItem('c')]);
  for (const id of ids) await dave.get(`/items/${id.toHexString()}/edit`).expect(200);
  const admin = await dave.get('/admin/locks').expect(200);
  expect(admin.text.match(/<td>Dave<\/td>/g)?.length).toBeGreaterThanOrEqual(3);
  await dave.post('/logout').expect(303).expect('Location', '/');
  for (const id of ids) expect(await WorkItem.isLocked(id)).toBe(false);
});

describe('the edit page kept alive, a second tab, force-unlock (issue 18)', () => {
  test('the keep-alive route resumes the lock with the acquisition\'s ttl (10 minutes, not the plugin\'s 5) and answers its expiry and lease as JSON', async () => {
    const erin = await signIn('Erin');
    const id = (await newItem('Keep-alive')).toHexString();
    const page = (await erin.get(`/items/${id}/edit`).expect(200)).text;
    expect(page).toMatch(/data-keep-alive-url="\/items\/[0-9a-f]{24}\/keep-alive"/);
    expect(page).toMatch(/data-keep-alive-every="100000" data-warn-before="60000" data-idle-after="600000"/);
    expect(page).toMatch(/You hold the lock on this item for another <b class="countdown" id="countdown">[45]:\d\d<\/b>/);
    await erin.post(`/items/${id}/cancel`).type('form').send({ ticket: ticketIn(page) }).expect(303);

    app.locals.lockTtlMs = 10 * 60_000; // longer than the model's plugin ttl (5 minutes)
    try {
      const long = ticketIn((await erin.get(`/items/${id}/edit`).expect(200)).text);
      const before = (await WorkItem.getLock(id))!.expiresAt;
      const beat = await erin.post(`/items/${id}/keep-alive`).type('form').send({ ticket: long }).expect(200).expect('Content-Type', /json/);
      const body = beat.body as { expiresAt: string; msLeft: number };
      const after = (await WorkItem.getLock(id))!;
      expect(new Date(body.expiresAt).getTime()).toBe(after.expiresAt.getTime());
      expect(after.expiresAt.getTime()).toBeGreaterThan(before.getTime());
      // The page's 10 minutes: the heartbeat does not shorten the lock to the plugin's 5.
      expect(after.remainingMs).toBeGreaterThan(9 * 60_000);
      expect(body.msLeft).toBeGreaterThan(9 * 60_000);
      expect(body.msLeft).toBeLessThanOrEqual(after.remainingMs + 1_000);
      await erin.post(`/items/${id}/cancel`).type('form').send({ ticket: long }).expect(303);
    } finally {
      app.locals.lockTtlMs = 5 * 60_000;
    }
  });

  test('a second tab of the same user takes the lock over: the first tab\'s heartbeat and save say so, and name nobody', async () => {
    const frank = await signIn('Frank');
    const id = (await newItem('Two tabs')).toHexString();
    const firstTab = ticketIn((await frank.get(`/items/${id}/edit`).expect(200)).text);
    const secondTab = ticketIn((await frank.get(`/items/${id}/edit`).expect(200)).text);
    expect(secondTab).not.toBe(firstTab);

    const beat = await frank.post(`/items/${id}/keep-alive`).type('form').send({ ticket: firstTab }).expect(409);
    expect(beat.body).toEqual({ reason: 'taken_over', sameOwner: true, message: expect.stringContaining('You opened this item again in another tab or window') });

    const stale = await frank.post(`/items/${id}`).type('form').send({ ticket: firstTab, title: 'Two tabs', status: 'done', notes: 'from the first tab' }).expect(409);
    expect(stale.text).toContain('You opened this item again in another tab or window, and that page holds the lock now');
    expect(stale.text).toContain('Nothing expired and nobody else edited it');
    expect(stale.text).not.toContain('someone else');
    expect(stale.text).toContain('readonly>from the first tab</textarea>');
    expect((await WorkItem.findById(id).orFail()).status).toBe('pending');

    // The second tab still holds the lock and saves.
    await frank.post(`/items/${id}`).type('form').send({ ticket: secondTab, title: 'Two tabs', status: 'done', notes: 'from the second tab' }).expect(303);
    expect((await WorkItem.findById(id).orFail()).notes).toBe('from the second tab');
  });

  test('force-unlock on the admin page releases another user\'s lock; her heartbeat and her save are refused as released', async () => {
    const grace = await signIn('Grace');
    const admin = await signIn('Heidi');
    const id = (await newItem('Force me')).toHexString();
    const ticket = ticketIn((await grace.get(`/items/${id}/edit`).expect(200)).text);

    const locks = await admin.get('/admin/locks').expect(200);
    expect(locks.text).toContain(`action="/admin/locks/${id}/force-unlock"`);
    await admin.post(`/admin/locks/${id}/force-unlock`).expect(303).expect('Location', '/admin/locks');
    expect(await WorkItem.isLocked(id)).toBe(false);
    expect((await admin.get('/admin/locks').expect(200)).text).toContain('Unlocked “Force me”: whoever had it open can no longer save it.');
    await admin.post(`/admin/locks/${id}/force-unlock`).expect(303);
    expect((await admin.get('/admin/locks').expect(200)).text).toContain('“Force me” was not locked any more.');

    const beat = await grace.post(`/items/${id}/keep-alive`).type('form').send({ ticket }).expect(409);
    expect(beat.body).toMatchObject({ reason: 'released', message: expect.stringContaining('unlocked by an administrator') });
    const stale = await grace.post(`/items/${id}`).type('form').send({ ticket, title: 'Force me', status: 'done', notes: 'Grace' }).expect(409);
    expect(stale.text).toContain('it was released (cancelled or logged out in another tab, or unlocked by an administrator)');
    expect((await WorkItem.findById(id).orFail()).status).toBe('pending');
  });

  test('the keep-alive route needs a session', async () => {
    const id = (await newItem('No session')).toHexString();
    await request(app).post(`/items/${id}/keep-alive`).type('form').send({ ticket: 'x' }).expect(401);
  });
});
