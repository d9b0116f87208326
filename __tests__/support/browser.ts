/**
 * Headless Chromium for the end-to-end tests, through playwright-core and the system's Chromium
 * (Debian's `chromium` package; `.ci/run` installs it). Each user gets a browser of their own
 * with a fresh profile directory, removed afterwards.
 *
 * No browser is never a silent pass: without one the tests fail with a message saying how to
 * install it. Only MPL_SKIP_BROWSER_TESTS=1 skips them, and never in CI (CI=true).
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium, type BrowserContext } from 'playwright-core';

export const CHROMIUM_PATH = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

const ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

/**
 * How long a page action or a wait may take (navigation, click, selector, `waitForFunction`). A
 * bound, not a timing: generous because on a loaded machine (load average 15-25 on 2 cores) a
 * page load once took more than 10 s. Tests wait for conditions, never for fixed times.
 */
export const BROWSER_WAIT_MS = 90_000;

export type BrowserAvailability = { run: true } | { run: false; skipReason: string };

/** Decided when the test file is collected, so a skip shows in Jest's summary as a skip. */
export function browserAvailability(): BrowserAvailability {
  const skipRequested = process.env.MPL_SKIP_BROWSER_TESTS === '1';
  const inCi = process.env.CI !== undefined && process.env.CI !== '' && process.env.CI !== 'false';
  if (skipRequested && !inCi) {
    return { run: false, skipReason: 'MPL_SKIP_BROWSER_TESTS=1: the browser end-to-end tests are SKIPPED (not passed); they run in CI.' };
  }
  return { run: true };
}

/** Throws a message that says what to do when there is no browser (or skipping was asked in CI). */
export function requireBrowser(): void {
  if (process.env.MPL_SKIP_BROWSER_TESTS === '1') {
    throw new Error('MPL_SKIP_BROWSER_TESTS=1 is set, but this is CI (CI is set): the browser tests must run here. Install Chromium (apt-get install -y chromium).');
  }
  if (!existsSync(CHROMIUM_PATH)) {
    throw new Error(
      `No browser available: no Chromium at ${CHROMIUM_PATH}. Install it (apt-get install -y chromium), or point CHROMIUM_PATH at one, ` +
        'or set MPL_SKIP_BROWSER_TESTS=1 to skip these tests outside CI.',
    );
  }
}

export interface UserBrowser {
  context: BrowserContext;
  close(): Promise<void>;
}

/** A browser for one user: its own process and a fresh --user-data-dir (launchPersistentContext passes it). */
export async function openUserBrowser(name: string): Promise<UserBrowser> {
  const profile = mkdtempSync(join(tmpdir(), `mpl-chromium-${name}-`));
  let context: BrowserContext;
  try {
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM_PATH,
      headless: true,
      args: ARGS,
      timeout: 120_000,
      viewport: { width: 960, height: 620 },
    });
  } catch (error) {
    rmSync(profile, { recursive: true, force: true });
    throw error;
  }
  context.setDefaultTimeout(BROWSER_WAIT_MS);
  context.setDefaultNavigationTimeout(BROWSER_WAIT_MS);
  return {
    context,
    close: async () => {
      await context.close().catch(() => undefined);
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
