/**
 * The example back office in a real browser (issue 11): two users, each in a headless Chromium
 * of their own, click through the server-rendered pages.
 *  1. Alice opens a work item for editing; Bob sees on the list and on the item's page that Alice
 *     is editing it and when it frees; Alice saves; Bob then gets the item with Alice's changes.
 *  2. The stale submit: Alice's lock expires while her form is open, Bob edits and saves
 *     ("refund sent"), Alice submits her stale form ("pending"): she is told her changes were
 *     not saved, and Bob's data is intact.
 * With UPDATE_SCREENSHOTS=1 it refreshes the README's screenshots in docs/screenshots/.
 * Without a browser it fails, saying how to install one (see support/browser.ts).
 */
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { createApp, workItemModel, type WorkItemModel } from '../../examples/express-app/app';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { browserAvailability, openUserBrowser, requireBrowser, type UserBrowser } from '../support/browser';

const availability = browserAvailability();
if (!availability.run) console.warn(`[browser] ${availability.skipReason}`);
const describeBrowser = availability.run ? describe : describe.skip;

const SCREENSHOTS = process.env.UPDATE_SCREENSHOTS === '1' ? join(__dirname, '..', '..', 'docs', 'screenshots') : undefined;

describeBrowser('the example app in headless Chromium, two users', () => {
  const db = testDatabase('browser');
  let conn: MonitoredConnection;
  let WorkItem: WorkItemModel;
  let app: ReturnType<typeof createApp>;
  let server: Server;
  let base: string;
  const browsers: UserBrowser[] = [];
  let alice: Page;
  let bob: Page;

  beforeAll(async () => {
    requireBrowser();
    conn = await connect(db.name);
    WorkItem = workItemModel(conn.connection);
    await WorkItem.init();
    await WorkItem.create([
      { title: 'Refund request #4711', status: 'pending', notes: 'Customer called twice.' },
      { title: 'Refund request #4712', status: 'pending', notes: '' },
      { title: 'Invoice #1042 disputed', status: 'open', notes: '' },
    ]);
    app = createApp({ WorkItem, sessionSecret: 'browser-test-secret-0123456789' });
    server = await new Promise<Server>((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s));
    });
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    for (const name of ['alice', 'bob']) browsers.push(await openUserBrowser(name));
    alice = await browsers[0]!.context.newPage();
    bob = await browsers[1]!.context.newPage();
  }, 90_000);

  afterAll(async () => {
    await Promise.all(browsers.map((browser) => browser.close()));
    await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
    if (conn) {
      await db.drop(conn.connection);
      await conn.close();
    }
  }, 60_000);

  async function signIn(page: Page, name: string): Promise<void> {
    await page.goto(`${base}/`);
    await page.fill('#name', name);
    await Promise.all([page.waitForURL(`${base}/items`), page.click('#sign-in')]);
    expect(await page.textContent('#user')).toBe(name);
  }

  const row = (page: Page, title: string) => page.locator('#items tbody tr', { hasText: title });
  const idOf = async (title: string) => (await WorkItem.findOne({ title }).orFail())._id;

  async function screenshot(page: Page, name: string): Promise<void> {
    const buffer = await page.screenshot({ fullPage: true });
    expect(buffer.subarray(1, 4).toString('latin1')).toBe('PNG');
    if (SCREENSHOTS) {
      mkdirSync(SCREENSHOTS, { recursive: true });
      await page.screenshot({ path: join(SCREENSHOTS, name), fullPage: true });
      expect(readFileSync(join(SCREENSHOTS, name)).length).toBeGreaterThan(1000);
    }
  }

  test('Bob sees who holds the item and when it frees; Alice saves; Bob then gets it with her changes', async () => {
    await signIn(alice, 'Alice');
    await signIn(bob, 'Bob');

    await Promise.all([alice.waitForURL(/\/edit$/), row(alice, 'Refund request #4711').locator('a.edit').click()]);
    expect(await alice.textContent('#lock-info')).toContain('You hold the lock');

    await bob.goto(`${base}/items`);
    expect(await row(bob, 'Refund request #4711').locator('.lock').textContent()).toMatch(/^being edited by Alice, free in \d+ s$/);
    expect(await row(bob, 'Invoice #1042 disputed').locator('.lock').textContent()).toBe('free');
    await screenshot(bob, 'list-with-lock-status.png');
    const [response] = await Promise.all([bob.waitForResponse((r) => r.url().endsWith('/edit')), row(bob, 'Refund request #4711').locator('a.edit').click()]);
    expect(response.status()).toBe(423);
    expect(await bob.textContent('#holder')).toBe('Alice');
    expect(await bob.textContent('#locked')).toMatch(/Alice is editing this item\. It frees at \d\d:\d\d:\d\d UTC \(in \d+ s\)/);
    expect(await bob.locator('#status').isDisabled()).toBe(true);
    await screenshot(bob, 'locked-by-alice.png');

    await alice.selectOption('#status', 'approved');
    await alice.fill('#notes', 'Approved by Alice after the second call.');
    await Promise.all([alice.waitForURL(`${base}/items`), alice.click('#save')]);
    expect(await alice.textContent('#flash')).toBe('Saved “Refund request #4711”.');
    expect(await row(alice, 'Refund request #4711').locator('.lock').textContent()).toBe('free');

    await Promise.all([bob.waitForURL(/\/edit$/), bob.click('#retry')]);
    expect(await bob.textContent('#lock-info')).toContain('You hold the lock');
    expect(await bob.inputValue('#status')).toBe('approved');
    expect(await bob.inputValue('#notes')).toBe('Approved by Alice after the second call.');
    await Promise.all([bob.waitForURL(`${base}/items`), bob.click('#cancel')]);
    expect(await WorkItem.isLocked(await idOf('Refund request #4711'))).toBe(false);
  }, 60_000);

  test('an expired user\'s stale submit is refused with a message and saves nothing', async () => {
    app.locals.lockTtlMs = 1_500;
    try {
      await alice.goto(`${base}/items`);
      await Promise.all([alice.waitForURL(/\/edit$/), row(alice, 'Refund request #4712').locator('a.edit').click()]);
      await alice.selectOption('#status', 'pending');
      await alice.fill('#notes', 'Alice: still waiting for the bank.');
      await sleep(1_800); // Alice's form stays open past her lock's ttl

      await bob.goto(`${base}/items`);
      expect(await row(bob, 'Refund request #4712').locator('.lock').textContent()).toBe('free');
      await Promise.all([bob.waitForURL(/\/edit$/), row(bob, 'Refund request #4712').locator('a.edit').click()]);
      await bob.selectOption('#status', 'refund sent');
      await bob.fill('#notes', 'Bob: refund SENT.');
      await Promise.all([bob.waitForURL(`${base}/items`), bob.click('#save')]);

      const [response] = await Promise.all([alice.waitForResponse((r) => r.request().method() === 'POST'), alice.click('#save')]);
      expect(response.status()).toBe(409);
      expect(await alice.textContent('h1')).toBe('Your changes were not saved');
      expect(await alice.textContent('#stale')).toContain('someone else has edited it since');
      expect(await alice.inputValue('#status')).toBe('refund sent'); // what is stored now
      await screenshot(alice, 'stale-submit-refused.png');

      const stored = await WorkItem.findOne({ title: 'Refund request #4712' }).orFail();
      expect(stored.status).toBe('refund sent');
      expect(stored.notes).toBe('Bob: refund SENT.');
    } finally {
      app.locals.lockTtlMs = 5 * 60_000;
    }
  }, 60_000);

  test('logout releases everything the user held', async () => {
    await alice.goto(`${base}/items`);
    await Promise.all([alice.waitForURL(/\/edit$/), row(alice, 'Invoice #1042 disputed').locator('a.edit').click()]);
    const id = await idOf('Invoice #1042 disputed');
    expect(await WorkItem.isLocked(id)).toBe(true);
    await Promise.all([alice.waitForURL(`${base}/`), alice.click('#logout')]);
    expect(await WorkItem.isLocked(id)).toBe(false);
    await bob.goto(`${base}/items`);
    expect(await row(bob, 'Invoice #1042 disputed').locator('.lock').textContent()).toBe('free');
  }, 60_000);
});
