/** The published package: built output loads through both require() and import, with types. */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';

const root = join(__dirname, '..', '..');
const run = (args: string[], input?: string) =>
  execFileSync(process.execPath, args, { cwd: root, encoding: 'utf8', input, timeout: 120_000, stdio: ['pipe', 'pipe', 'pipe'] });

beforeAll(() => {
  run(['scripts/build.mjs']);
}, 180_000);

const expectedExports = [
  'lockPlugin',
  'LockError',
  'LockedError',
  'LockNotHeldError',
  'LockExpiredError',
  'LockExpiredOnArrivalError',
  'LockTargetNotFoundError',
  'LockConfigurationError',
  'InvalidLockArgumentError',
  'InvalidLockOptionError',
  'lockErrorHandler',
  'lockErrorBody',
];

test('CommonJS require() exposes the public API', () => {
  const out = run(['-e', "const m = require('mongoose-pessimistic-lock'); console.log(JSON.stringify(Object.keys(m).sort()))"]);
  const keys = JSON.parse(out) as string[];
  for (const name of expectedExports) expect(keys).toContain(name);
  // A type only: handles come from Model.acquireLock, never from `new`.
  expect(keys).not.toContain('LockHandle');
});

test('ESM import exposes the same classes as require(), with their hierarchy', () => {
  const out = run(['--input-type=module', '-e', "import { createRequire } from 'node:module'; import { LockExpiredError, LockNotHeldError, LockError, lockPlugin } from 'mongoose-pessimistic-lock'; const cjs = createRequire(import.meta.url)('mongoose-pessimistic-lock'); const e = new LockExpiredError('x', undefined); console.log(JSON.stringify([typeof lockPlugin, e instanceof LockNotHeldError, e instanceof LockError, e.code, cjs.LockError === LockError]))"]);
  // The last value: one implementation behind both entry points, so instanceof works across them.
  expect(JSON.parse(out)).toEqual(['function', true, true, 'LOCK_EXPIRED', true]);
});

test('declarations are emitted for both formats and `files` publishes only dist and docs', () => {
  expect(existsSync(join(root, 'dist/cjs/index.d.ts'))).toBe(true);
  expect(existsSync(join(root, 'dist/esm/index.d.ts'))).toBe(true);
  const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { files: string[]; peerDependencies: Record<string, string> };
  expect(pkg.files).toEqual(['dist', 'docs/*.md', 'docs/screenshots', 'README.md', 'CHANGELOG.md', 'CONTRIBUTING.md', 'LICENSE']);
  expect(pkg.peerDependencies.mongoose).toBe('^8.0.0 || ^9.0.0');
});

// Issue 11, item 8: what npm readers and debuggers get.
describe('the tarball', () => {
  // One `npm pack --dry-run` (a few seconds of npm) for the tests below, after the build above.
  let files: string[] | undefined;
  const packed = (): string[] => {
    if (!files) {
      const out = execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: root, encoding: 'utf8', timeout: 120_000, stdio: ['ignore', 'pipe', 'pipe'] });
      files = (JSON.parse(out) as { files: { path: string }[] }[])[0]!.files.map((file) => file.path);
    }
    return files;
  };

  test('declares "type": "commonjs"', () => {
    expect((JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as { type?: string }).type).toBe('commonjs');
  });

  test('every source map resolves: it embeds the sources it points to, or they are in the tarball', () => {
    const files = packed();
    const maps = files.filter((file) => file.endsWith('.map'));
    expect(maps.length).toBeGreaterThan(10);
    const unresolved: string[] = [];
    for (const map of maps) {
      const { sources, sourcesContent } = JSON.parse(readFileSync(join(root, map), 'utf8')) as { sources: string[]; sourcesContent?: (string | null)[] };
      sources.forEach((source, i) => {
        const shipped = files.includes(join(map, '..', source));
        if (!shipped && typeof sourcesContent?.[i] !== 'string') unresolved.push(`${map} -> ${source}`);
      });
    }
    expect(unresolved).toEqual([]);
  }, 180_000);

  test('ships the README\'s screenshots and nothing from the repository\'s tests, examples or tooling', () => {
    const files = packed();
    expect(files).toEqual(expect.arrayContaining(['docs/screenshots/locked-by-alice.png', 'docs/screenshots/stale-submit-refused.png', 'docs/screenshots/list-with-lock-status.png']));
    // The guides the README links to, for npm readers (issue 18).
    expect(files).toEqual(expect.arrayContaining(['docs/web-apps.md', 'docs/api.md', 'docs/limits.md', 'docs/mongodb-compatibility.md']));
    expect(files.filter((file) => /^(src|__tests__|examples|test-backend|bench|scripts)\//.test(file))).toEqual([]);
  }, 180_000);
});
