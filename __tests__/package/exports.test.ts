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

const expectedExports = ['lockPlugin', 'LockError', 'LockedError', 'LockNotHeldError', 'LockExpiredError', 'LockTargetNotFoundError', 'InvalidLockArgumentError', 'InvalidLockOptionError'];

test('CommonJS require() exposes the public API', () => {
  const out = run(['-e', "const m = require('mongoose-pessimistic-lock'); console.log(JSON.stringify(Object.keys(m).sort()))"]);
  const keys = JSON.parse(out) as string[];
  for (const name of expectedExports) expect(keys).toContain(name);
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
  expect(pkg.files).toEqual(['dist', 'README.md', 'CHANGELOG.md', 'LICENSE']);
  expect(pkg.peerDependencies.mongoose).toBe('^8.0.0 || ^9.0.0');
});
