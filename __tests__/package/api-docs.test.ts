/**
 * The API reference (issue 18, item 2): `npm run docs` builds it with TypeDoc from the TSDoc
 * comments, and typedoc.json makes an export without documentation a build failure
 * (`validation.notDocumented` with `treatWarningsAsErrors`: every exported class, function,
 * variable, interface and type alias, and their properties and methods). Both runs go to a
 * temporary directory, never the repository's docs/api-reference.
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as api from '../../src';

const ROOT = join(__dirname, '..', '..');
const TYPEDOC = join(ROOT, 'node_modules', 'typedoc', 'bin', 'typedoc');

/** Runs TypeDoc in `cwd` with `args`; its exit status and output, colours off. */
function typedoc(cwd: string, args: string[]): { status: number | null; output: string } {
  const result = spawnSync(process.execPath, [TYPEDOC, ...args], { cwd, encoding: 'utf8', timeout: 240_000, env: { ...process.env, NO_COLOR: '1', FORCE_COLOR: '0' } });
  if (result.error) throw result.error;
  return { status: result.status, output: `${result.stdout}${result.stderr}` };
}

let work: string;
beforeAll(() => {
  work = mkdtempSync(join(tmpdir(), 'mpl-api-docs-'));
});
afterAll(() => rmSync(work, { recursive: true, force: true }));

// TypeDoc reads the whole program (Mongoose's and the driver's declarations included): a few
// seconds of CPU, much longer on a loaded machine.
jest.setTimeout(300_000);

test('npm run docs builds the reference without a warning, with a page for every runtime export', () => {
  const out = join(work, 'api');
  const { status, output } = typedoc(ROOT, ['--out', out]);
  expect(output).not.toMatch(/\[warning\]|\[error\]/);
  expect(status).toBe(0);
  const index = readFileSync(join(out, 'index.html'), 'utf8');
  const missing = Object.keys(api).filter((name) => !index.includes(`>${name}<`));
  expect(missing).toEqual([]);
  // A few pages by their kind: a function, a class, an interface.
  for (const page of ['functions/lockPlugin.html', 'classes/LockedError.html', 'interfaces/LockPluginOptions.html']) {
    expect(existsSync(join(out, page))).toBe(true);
  }
});

test("an undocumented export, or an undocumented member of a documented one, fails the build with the project's settings", () => {
  const fixture = join(work, 'fixture');
  const options = JSON.parse(readFileSync(join(ROOT, 'typedoc.json'), 'utf8')) as Record<string, unknown>;
  delete options.intentionallyNotExported;
  const source = [
    '/** Documented. */',
    'export function documented(): number { return 1; }',
    'export function undocumentedHelper(): number { return 2; }',
    '/** Documented, but one of its members is not. */',
    'export interface Settings {',
    '  /** Documented. */',
    '  ttl: number;',
    '  label: string;',
    '}',
  ].join('\n');
  rmSync(fixture, { recursive: true, force: true });
  mkdirSync(fixture);
  writeFileSync(join(fixture, 'index.ts'), `${source}\n`);
  writeFileSync(join(fixture, 'tsconfig.json'), JSON.stringify({ compilerOptions: { strict: true, target: 'es2022', module: 'commonjs', lib: ['es2022'], types: [], noEmit: true }, files: ['index.ts'] }));
  writeFileSync(join(fixture, 'typedoc.json'), JSON.stringify({ ...options, entryPoints: ['index.ts'], tsconfig: 'tsconfig.json', emit: 'none' }));
  const { status, output } = typedoc(fixture, ['--options', 'typedoc.json']);
  expect(status).not.toBe(0);
  expect(output).toMatch(/undocumentedHelper \((Function|CallSignature)\).*does not have any documentation/);
  expect(output).toMatch(/Settings\.label \(Property\).*does not have any documentation/);
  expect(output).not.toMatch(/documented \(Function\)|Settings \(Interface\)|Settings\.ttl/);
});
