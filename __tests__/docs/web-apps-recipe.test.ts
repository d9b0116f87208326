/**
 * The keep-alive recipe of docs/web-apps.md, as written (issue 18, item 4): its route block and its
 * page script, taken from the guide, served together and run in headless Chromium.
 *  - A heartbeat from a page in use renews the lock and keeps the acquisition's ttl (10 minutes,
 *    where the plugin's is 30 s).
 *  - When the same user opened the item again (another tab), the next heartbeat is refused with
 *    the other-tab message, the page shows it, and it stops beating.
 *  - When an administrator force-unlocked it, the next heartbeat is refused as released.
 * The page's timers run on Playwright's fake clock (`page.clock`): a heartbeat is a minute of the
 * page's time that passes at once, so nothing here waits for real minutes or races a ttl. Every
 * wait is for a condition, bounded by BROWSER_WAIT_MS.
 */
import type { AddressInfo } from 'node:net';
import type { Server } from 'node:http';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import type { NextFunction, Request, Response } from 'express';
import type { Page } from 'playwright-core';
import * as ts from 'typescript';
import * as pkg from '../../src';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { BROWSER_WAIT_MS, browserAvailability, openUserBrowser, requireBrowser, type UserBrowser } from '../support/browser';
import { ROOT, compileBlock, extractBlocks } from './support/readme-blocks';
import { createReadmeContext, type ReadmeContext } from './support/readme-context';

const availability = browserAvailability();
if (!availability.run) console.warn(`[browser] ${availability.skipReason}`);
const describeBrowser = availability.run ? describe : describe.skip;

const GUIDE = 'docs/web-apps.md';
const guideBlocks = extractBlocks(readFileSync(join(ROOT, GUIDE), 'utf8'), GUIDE);
const routeBlock = guideBlocks.find((block) => block.run && block.code.includes("'/items/:id/keep-alive'"))!;
const pageBlock = guideBlocks.find((block) => block.browser)!;
/** The page script as the browser runs it (types stripped). */
const pageScript = ts.transpileModule(pageBlock.code, { compilerOptions: { target: ts.ScriptTarget.ES2022 } }).outputText;

const OWNER = 'recipe-session-alice';
const TEN_MINUTES = 600_000;
const TEST_MS = 300_000;

describeBrowser('the keep-alive recipe of docs/web-apps.md, in headless Chromium', () => {
  const db = testDatabase('webappsrecipe');
  let conn: MonitoredConnection;
  let context: ReadmeContext;
  let server: Server;
  let base: string;
  let browser: UserBrowser;
  let page: Page;
  let beats = 0;

  beforeAll(async () => {
    requireBrowser();
    expect(routeBlock).toBeDefined();
    expect(pageBlock).toBeDefined();
    conn = await connect(db.name);
    context = await createReadmeContext(conn.connection); // the plugin's ttl there is 30 s
    const { app, WorkItem } = context;
    // The recipe's owner is req.sessionID: one signed-in user for this test.
    app.use((req: Request, _res: Response, next: NextFunction) => {
      req.sessionID = OWNER;
      if (req.path.endsWith('/keep-alive')) beats++;
      next();
    });
    // The guide's route, as written.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    await compileBlock(routeBlock, (name) => (name === 'mongoose-pessimistic-lock' ? pkg : require(name)))(context);
    // An edit page as the guide describes it: a form posting to /items/:id, its ticket, #lock-lost, the script.
    app.get('/items/:id/edit', async (req, res) => {
      const item = await WorkItem.lock(String(req.params.id), req.sessionID, { ttl: TEN_MINUTES });
      res.type('html').send(`<!doctype html><html><body>
<form id="edit" action="/items/${item._id.toHexString()}" method="post">
  <input type="hidden" name="ticket" value="${item.heldLock()!.ticket}">
  <textarea id="notes" name="notes"></textarea>
</form>
<p id="lock-lost"></p>
<script>${pageScript}</script>
</body></html>`);
    });
    server = await new Promise<Server>((resolve) => {
      const s = app.listen(0, '127.0.0.1', () => resolve(s));
    });
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
    browser = await openUserBrowser('recipe');
  }, 120_000);

  afterAll(async () => {
    await browser?.close();
    await new Promise((resolve) => (server ? server.close(resolve) : resolve(undefined)));
    if (conn) {
      await db.drop(conn.connection);
      await conn.close();
    }
  }, 60_000);

  /** Opens the edit page with the page's timers on a fake clock. */
  async function openEditPage(): Promise<void> {
    page = await browser.context.newPage();
    await page.clock.install();
    await page.goto(`${base}/items/${context.id.toHexString()}/edit`);
  }

  /** Lets a minute of the page's time pass (one heartbeat) and returns the heartbeat's response. */
  async function nextBeat(): Promise<{ status: number; body: { msLeft?: number; reason?: string; message?: string } }> {
    const [response] = await Promise.all([page.waitForResponse((r) => r.url().endsWith('/keep-alive')), page.clock.runFor(60_000)]);
    return { status: response.status(), body: (await response.json()) as { msLeft?: number; reason?: string; message?: string } };
  }

  /** Waits (bounded) until #lock-lost shows something. */
  async function lockLostText(): Promise<string> {
    const deadline = Date.now() + BROWSER_WAIT_MS;
    for (;;) {
      const text = (await page.textContent('#lock-lost')) ?? '';
      if (text !== '') return text;
      if (Date.now() > deadline) throw new Error(`#lock-lost is still empty after ${BROWSER_WAIT_MS} ms`);
      await sleep(50);
    }
  }

  test("a page in use renews its lock, keeping the acquisition's 10 minutes; the user's other tab ends it, and the page says so and stops", async () => {
    const { WorkItem, id } = context;
    await openEditPage();
    const opened = (await WorkItem.getLock(id))!;
    expect(opened.remainingMs).toBeGreaterThan(TEN_MINUTES / 2);

    await page.fill('#notes', 'Alice is typing.');
    const beat = await nextBeat();
    expect(beat.status).toBe(200);
    expect(beat.body.msLeft).toBeGreaterThan(TEN_MINUTES / 2); // not the plugin's 30 s
    const renewed = (await WorkItem.getLock(id))!;
    expect(renewed.expiresAt.getTime()).toBeGreaterThan(opened.expiresAt.getTime());
    expect(renewed.remainingMs).toBeGreaterThan(TEN_MINUTES / 2);

    // Alice opens the item again in another tab: a new acquisition of the same owner.
    await WorkItem.lock(id, OWNER, { ttl: TEN_MINUTES });
    await page.fill('#notes', 'Still typing in the first tab.');
    const refused = await nextBeat();
    expect(refused).toEqual({ status: 409, body: { reason: 'taken_over', message: 'You opened this item in another tab: continue there.' } });
    expect(await lockLostText()).toBe('You opened this item in another tab: continue there.');

    // The page stopped beating: more minutes pass, no request.
    const sent = beats;
    await page.clock.runFor(5 * 60_000);
    await sleep(200);
    expect(beats).toBe(sent);
    await page.close();
    await WorkItem.unlock(id, OWNER);
  }, TEST_MS);

  test("an administrator's force-unlock: the next heartbeat is refused as released, and the page says so", async () => {
    const { WorkItem, id } = context;
    await openEditPage();
    await page.fill('#notes', 'Alice, before the admin stepped in.');
    expect((await nextBeat()).status).toBe(200);

    expect(await WorkItem.forceUnlock(id)).toBe(true);
    await page.fill('#notes', 'Alice, after.');
    const refused = await nextBeat();
    expect(refused.status).toBe(409);
    expect(refused.body.reason).toBe('released');
    expect(await lockLostText()).toBe('Your lock is gone (released): saving this page will be refused. Copy your changes.');
    expect(await WorkItem.isLocked(id)).toBe(false); // a refused heartbeat takes nothing
    await page.close();
  }, TEST_MS);
});
