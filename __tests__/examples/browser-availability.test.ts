/**
 * The browser tests never pass silently without a browser (issue 11): they fail with a message
 * saying how to get one, and MPL_SKIP_BROWSER_TESTS=1 skips them only outside CI.
 */
import { browserAvailability, requireBrowser } from '../support/browser';

const saved = { ...process.env };
afterEach(() => {
  process.env = { ...saved };
  jest.resetModules();
});

function freshSupport(): typeof import('../support/browser') {
  let support!: typeof import('../support/browser');
  jest.isolateModules(() => {
    support = jest.requireActual('../support/browser');
  });
  return support;
}

test('no Chromium: requireBrowser fails and says how to install one', () => {
  process.env.CHROMIUM_PATH = '/nonexistent/chromium';
  delete process.env.MPL_SKIP_BROWSER_TESTS;
  expect(() => freshSupport().requireBrowser()).toThrow(/No browser available: no Chromium at \/nonexistent\/chromium\. Install it \(apt-get install -y chromium\)/);
});

test('MPL_SKIP_BROWSER_TESTS=1 skips outside CI, and is refused in CI', () => {
  process.env.MPL_SKIP_BROWSER_TESTS = '1';
  delete process.env.CI;
  expect(browserAvailability()).toEqual({ run: false, skipReason: expect.stringContaining('SKIPPED (not passed)') });
  process.env.CI = 'true';
  expect(browserAvailability()).toEqual({ run: true });
  expect(() => requireBrowser()).toThrow(/this is CI/);
});
