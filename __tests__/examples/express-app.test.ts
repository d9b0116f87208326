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
    await sleep(1_700);
    const bobForm = ticketIn((await bob.get(`/items/${id}/edit`).expect(200)).text);
    await bob.post(`/items/${id}`).type('form').send({ ticket: bobForm, title: 'Refund #2', status: 'refund sent', notes: 'sent by Bob' }).expect(303);

    const stale = await alice.post(`/items/${id}`).type('form').send({ ticket: aliceForm, title: 'Refund #2', status: 'pending', notes: 'Alice, stale' }).expect(409);
    expect(stale.text).toContain('Your changes were not saved');
    expect(stale.text).toContain('someone else has edited it since');
    const stored = await WorkItem.findById(id).orFail();
    expect(stored.status).toBe('refund sent');
    expect(stored.notes).toBe('sent by Bob');
    expect(await WorkItem.isLocked(id)).toBe(false);

    // Expired and nobody touched it: still refused (someone could have written meanwhile).
    const form = ticketIn((await alice.get(`/items/${id}/edit`).expect(200)).text);
    await sleep(1_700);
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
