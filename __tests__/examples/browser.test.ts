/**
 * The example back office in a real browser (issues 11 and 18): two users, each in a headless
 * Chromium of their own, click through the server-rendered pages; one of them also in two tabs.
 *  1. Alice opens a work item for editing (its countdown goes down live); Bob sees on the list and
 *     on the item's page that Alice is editing it and when it frees; Alice saves; Bob then gets
 *     the item with Alice's changes.
 *  2. The stale submit: Alice's lock expires while her form is open (her page is idle, so nothing
 *     renews it, and the page says so), Bob edits and saves ("refund sent"), Alice submits her
 *     stale form ("pending"): she is told her changes were not saved, her own text stays in view,
 *     and Bob's data is intact.
 *  3. Keep-alive: while Alice works on the page, its heartbeat renews the lock, and the countdown
 *     moves forward after a heartbeat; the lock keeps the page's ttl.
 *  4. The warning: an idle page warns before the lock ends; "Keep editing" renews it.
 *  5. A second tab: Alice opens the item again in another tab of the same browser (the same
 *     session); the first tab learns at its next heartbeat that the other tab holds the lock, and
 *     its save is refused with that message (nothing expired, nobody else edited), her text kept.
 *  6. Force-unlock: Bob unlocks Alice's item on the admin page; Alice's page learns it, and her
 *     save is refused, her text kept.
 * Robust on a loaded machine: every wait is for a condition (a URL, a selector, a page state, the
 * server's lock state), bounded generously; no step depends on how fast the machine is, except
 * where a lock must still be held, and there the ttl leaves tens of seconds of slack.
 * With UPDATE_SCREENSHOTS=1 it refreshes the screenshots in docs/screenshots/.
 * Without a browser it fails, saying how to install one (see support/browser.ts).
 */
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { mkdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { Page } from 'playwright-core';
import { createApp, workItemModel, type WorkItemModel } from '../../examples/express-app/app';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { BROWSER_WAIT_MS, browserAvailability, openUserBrowser, requireBrowser, type UserBrowser } from '../support/browser';

const availability = browserAvailability();
if (!availability.run) console.warn(`[browser] ${availability.skipReason}`);
const describeBrowser = availability.run ? describe : describe.skip;

const SCREENSHOTS = process.env.UPDATE_SCREENSHOTS === '1' ? join(__dirname, '..', '..', 'docs', 'screenshots') : undefined;

/** One test's bound: several page loads and waits of up to BROWSER_WAIT_MS each, on a loaded machine. */
const TEST_MS = 300_000;

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
      { title: 'Address change for order #88', status: 'open', notes: '' },
      { title: 'Chargeback #77', status: 'open', notes: '' },
      { title: 'Warranty claim #5', status: 'open', notes: '' },
      { title: 'Duplicate payment #310', status: 'open', notes: '' },
    ]);
    app = createApp({ WorkItem, sessionSecret: 'browser-test-secret-0123456789' });
    server = await new Promise<Server>((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s));
    });
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    for (const name of ['alice', 'bob']) browsers.push(await openUserBrowser(name));
    alice = await browsers[0]!.context.newPage();
    bob = await browsers[1]!.context.newPage();
    await signIn(alice, 'Alice');
    await signIn(bob, 'Bob');
  }, TEST_MS);

  afterAll(async () => {
    await Promise.all(browsers.map((browser) => browser.close()));
    await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
    if (conn) {
      await db.drop(conn.connection);
      await conn.close();
    }
  }, 60_000);

  /** The app's settings for one test (ttl, heartbeat, warning, idle), restored afterwards. */
  async function withSettings(settings: Record<string, number>, fn: () => Promise<void>): Promise<void> {
    const saved = Object.fromEntries(Object.keys(settings).map((key) => [key, app.locals[key] as unknown]));
    Object.assign(app.locals, settings);
    try {
      await fn();
    } finally {
      Object.assign(app.locals, saved);
    }
  }

  async function signIn(page: Page, name: string): Promise<void> {
    await page.goto(`${base}/`);
    await page.fill('#name', name);
    await Promise.all([page.waitForURL(`${base}/items`), page.click('#sign-in')]);
    expect(await page.textContent('#user')).toBe(name);
  }

  const row = (page: Page, title: string) => page.locator('#items tbody tr', { hasText: title });
  const idOf = async (title: string) => (await WorkItem.findOne({ title }).orFail())._id;

  /** Opens the item's edit page from the list and waits until it is there. */
  async function openForEdit(page: Page, title: string): Promise<void> {
    await page.goto(`${base}/items`);
    await Promise.all([page.waitForURL(/\/edit$/), row(page, title).locator('a.edit').click()]);
    expect(await page.textContent('#lock-info')).toContain('You hold the lock');
  }

  /** The edit page's state, as its script keeps it: its deadline (page clock), heartbeats so far, held / ending / lost. */
  async function lockPanel(page: Page): Promise<{ deadline: number; beats: number; state: string }> {
    const panel = page.locator('#lock-panel');
    const [deadline, beats, state] = await Promise.all(['data-deadline', 'data-beats', 'data-state'].map((name) => panel.getAttribute(name)));
    return { deadline: Number(deadline), beats: Number(beats), state: state ?? '' };
  }

  /** Waits (bounded) until the edit page's panel is in `state`. */
  async function panelState(page: Page, state: 'held' | 'ending' | 'lost'): Promise<void> {
    await page.waitForFunction(`document.getElementById('lock-panel')?.dataset.state === ${JSON.stringify(state)}`, undefined, { timeout: BROWSER_WAIT_MS });
  }

  /** Waits (bounded) until the edit page's deadline (its own clock) is later than `before`: a heartbeat came in. */
  async function deadlineAfter(page: Page, before: number): Promise<void> {
    await page.waitForFunction(`Number(document.getElementById('lock-panel')?.dataset.deadline) > ${before}`, undefined, { timeout: BROWSER_WAIT_MS });
  }

  /** Waits until the server says the item is free (its lock expired or was released). */
  async function untilFree(title: string): Promise<void> {
    const id = await idOf(title);
    const deadline = Date.now() + BROWSER_WAIT_MS;
    while (await WorkItem.isLocked(id)) {
      if (Date.now() > deadline) throw new Error(`${title} is still locked after ${BROWSER_WAIT_MS} ms`);
      await sleep(100);
    }
  }

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
    await openForEdit(alice, 'Refund request #4711');
    // A live countdown: about 5:00 at first, then less, on the page's own clock.
    const seconds = (shown: string | null): number => {
      const [, minutes, secs] = /^(\d):(\d\d)$/.exec(shown ?? '')!;
      return Number(minutes) * 60 + Number(secs);
    };
    const first = await alice.textContent('#countdown');
    expect(first).toMatch(/^[45]:\d\d$/);
    await alice.waitForFunction(`document.getElementById('countdown')?.textContent !== ${JSON.stringify(first)}`, undefined, { timeout: BROWSER_WAIT_MS });
    expect(seconds(await alice.textContent('#countdown'))).toBeLessThan(seconds(first));

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
  }, TEST_MS);

  test("an expired user's stale submit is refused with a message, saves nothing, and keeps her text in view", async () => {
    // Alice's page is idle (idleAfterMs 0: it never renews by itself), so her 1.5 s lock expires.
    await withSettings({ lockTtlMs: 1_500, idleAfterMs: 0 }, () => openForEdit(alice, 'Refund request #4712'));
    await alice.selectOption('#status', 'pending');
    await alice.fill('#notes', 'Alice: still waiting for the bank.');
    await untilFree('Refund request #4712'); // expired by the server's clock
    await panelState(alice, 'lost'); // and her page's countdown says so (it ends no later than the server's)
    expect(await alice.textContent('#lock-lost')).toContain('Your lock on this item has expired');

    // Bob takes it with the app's usual 5 minutes, edits and saves.
    await bob.goto(`${base}/items`);
    expect(await row(bob, 'Refund request #4712').locator('.lock').textContent()).toBe('free');
    await Promise.all([bob.waitForURL(/\/edit$/), row(bob, 'Refund request #4712').locator('a.edit').click()]);
    await bob.selectOption('#status', 'refund sent');
    await bob.fill('#notes', 'Bob: refund SENT.');
    await Promise.all([bob.waitForURL(`${base}/items`), bob.click('#save')]);

    const [response] = await Promise.all([alice.waitForResponse((r) => r.request().method() === 'POST' && !r.url().endsWith('/keep-alive')), alice.click('#save')]);
    expect(response.status()).toBe(409);
    expect(await alice.textContent('h1')).toBe('Your changes were not saved');
    expect(await alice.textContent('#stale')).toContain('the item was opened for editing again');
    // Her own text, in full and in view (not collapsed), selectable; then what is stored now.
    expect(await alice.locator('#mine-notes').isVisible()).toBe(true);
    expect(await alice.inputValue('#mine-notes')).toBe('Alice: still waiting for the bank.');
    expect(await alice.inputValue('#mine-status')).toBe('pending');
    expect(await alice.locator('#mine-notes').isEditable()).toBe(false);
    expect(await alice.inputValue('#status')).toBe('refund sent');
    await screenshot(alice, 'stale-submit-refused.png');

    const stored = await WorkItem.findOne({ title: 'Refund request #4712' }).orFail();
    expect(stored.status).toBe('refund sent');
    expect(stored.notes).toBe('Bob: refund SENT.');
  }, TEST_MS);

  test('keep-alive: while Alice works on the page, its heartbeat renews the lock and the countdown moves forward', async () => {
    // A 60 s page lock, a heartbeat every second while she is active: the lock cannot expire
    // during this test however slow the machine, and heartbeats come quickly.
    await withSettings({ lockTtlMs: 60_000, keepAliveEveryMs: 1_000 }, async () => {
      await openForEdit(alice, 'Invoice #1042 disputed');
      const id = await idOf('Invoice #1042 disputed');
      const opened = await lockPanel(alice);
      const expiry = (await WorkItem.getLock(id))!.expiresAt;
      expect(opened).toMatchObject({ beats: 0, state: 'held' });
      await alice.fill('#notes', 'Alice is typing.');

      // The deadline on the page's clock moves forward once heartbeats come in.
      await deadlineAfter(alice, opened.deadline);
      const renewed = await lockPanel(alice);
      expect(renewed.beats).toBeGreaterThanOrEqual(1);
      expect(renewed.state).toBe('held');
      expect(await alice.textContent('#countdown')).toMatch(/^[01]:\d\d$/);
      // On the server: a later expiry, and still the page's 60 s (a resume keeps the acquisition's ttl).
      const lock = (await WorkItem.getLock(id))!;
      expect(lock.expiresAt.getTime()).toBeGreaterThan(expiry.getTime());
      expect(lock.remainingMs).toBeGreaterThan(30_000);
      expect(lock.remainingMs).toBeLessThanOrEqual(60_000);
      const shown = new Date((await alice.getAttribute('#lock-expires', 'datetime'))!);
      expect(shown.getTime()).toBeGreaterThan(expiry.getTime());
      await Promise.all([alice.waitForURL(`${base}/items`), alice.click('#cancel')]);
    });
  }, TEST_MS);

  test('an idle page warns before its lock ends; "Keep editing" renews it', async () => {
    // No automatic heartbeat (idle from the start); the warning shows in the last 25 s of 30, which
    // leaves 25 s for the click's heartbeat to arrive before the lock would expire.
    await withSettings({ lockTtlMs: 30_000, warnBeforeMs: 25_000, idleAfterMs: 0 }, async () => {
      await openForEdit(alice, 'Address change for order #88');
      await panelState(alice, 'ending');
      expect(await alice.locator('#lock-warning').isVisible()).toBe(true);
      expect(await alice.textContent('#lock-warning')).toMatch(/Your lock on this item ends in 0:[0-2]\d: this page has been idle/);
      const ending = await lockPanel(alice);
      await screenshot(alice, 'edit-lock-ending.png');

      await alice.click('#keep-editing');
      await deadlineAfter(alice, ending.deadline);
      const renewed = await lockPanel(alice);
      expect(renewed.beats).toBe(1);
      expect(renewed.state).toBe('held');
      expect(await alice.locator('#lock-warning').isHidden()).toBe(true);
      await Promise.all([alice.waitForURL(`${base}/items`), alice.click('#cancel')]);
    });
  }, TEST_MS);

  test("a second tab of Alice's takes the lock over: the first tab says so, and its save is refused with that message", async () => {
    await withSettings({ lockTtlMs: 60_000, keepAliveEveryMs: 1_000 }, async () => {
      await openForEdit(alice, 'Chargeback #77');
      await alice.fill('#notes', 'Typed in the first tab.');
      const secondTab = await browsers[0]!.context.newPage(); // the same browser: the same session
      try {
        await openForEdit(secondTab, 'Chargeback #77');

        // The first tab's next heartbeat learns that its acquisition was replaced by her own.
        await panelState(alice, 'lost');
        expect(await alice.textContent('#lock-lost')).toContain('You opened this item again in another tab or window, and that page holds the lock now');
        await screenshot(alice, 'second-tab-took-over.png');

        const [response] = await Promise.all([alice.waitForResponse((r) => r.request().method() === 'POST' && !r.url().endsWith('/keep-alive')), alice.click('#save')]);
        expect(response.status()).toBe(409);
        const message = await alice.textContent('#stale');
        expect(message).toContain('You opened this item again in another tab or window');
        expect(message).toContain('Nothing expired and nobody else edited it');
        expect(message).not.toMatch(/expired and someone else/);
        expect(await alice.locator('#mine-notes').isVisible()).toBe(true);
        expect(await alice.inputValue('#mine-notes')).toBe('Typed in the first tab.');

        // The second tab still holds the lock and saves.
        expect(await secondTab.locator('#lock-panel').getAttribute('data-state')).toBe('held');
        await secondTab.fill('#notes', 'Saved from the second tab.');
        await Promise.all([secondTab.waitForURL(`${base}/items`), secondTab.click('#save')]);
        expect((await WorkItem.findOne({ title: 'Chargeback #77' }).orFail()).notes).toBe('Saved from the second tab.');
      } finally {
        await secondTab.close();
      }
    });
  }, TEST_MS);

  test("force-unlock: Bob releases Alice's lock on the admin page; her page learns it and her save is refused", async () => {
    await withSettings({ lockTtlMs: 60_000, keepAliveEveryMs: 1_000 }, async () => {
      await openForEdit(alice, 'Warranty claim #5');
      await alice.fill('#notes', 'Alice, before the admin stepped in.');

      await bob.goto(`${base}/admin/locks`);
      const lockRow = bob.locator('#locks tbody tr', { hasText: 'Warranty claim #5' });
      expect(await lockRow.locator('td').nth(1).textContent()).toBe('Alice');
      await Promise.all([bob.waitForURL(`${base}/admin/locks`), lockRow.locator('button.force-unlock').click()]);
      expect(await bob.textContent('#flash')).toBe('Unlocked “Warranty claim #5”: whoever had it open can no longer save it.');
      expect(await bob.locator('#locks tbody tr', { hasText: 'Warranty claim #5' }).count()).toBe(0);
      expect(await WorkItem.isLocked(await idOf('Warranty claim #5'))).toBe(false);

      await panelState(alice, 'lost');
      expect(await alice.textContent('#lock-lost')).toContain('unlocked by an administrator');
      const [response] = await Promise.all([alice.waitForResponse((r) => r.request().method() === 'POST' && !r.url().endsWith('/keep-alive')), alice.click('#save')]);
      expect(response.status()).toBe(409);
      expect(await alice.textContent('#stale')).toContain('it was released');
      expect(await alice.inputValue('#mine-notes')).toBe('Alice, before the admin stepped in.');
      expect((await WorkItem.findOne({ title: 'Warranty claim #5' }).orFail()).notes).toBe('');
    });
  }, TEST_MS);

  test('logout releases everything the user held', async () => {
    await openForEdit(alice, 'Duplicate payment #310');
    const id = await idOf('Duplicate payment #310');
    expect(await WorkItem.isLocked(id)).toBe(true);
    await Promise.all([alice.waitForURL(`${base}/`), alice.click('#logout')]);
    expect(await WorkItem.isLocked(id)).toBe(false);
    await bob.goto(`${base}/items`);
    expect(await row(bob, 'Duplicate payment #310').locator('.lock').textContent()).toBe('free');
  }, TEST_MS);
});
