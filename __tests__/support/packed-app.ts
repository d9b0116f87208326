/**
 * The package as an application installs it: built into a staging directory (never the
 * repository's dist/, which another test rebuilds), packed with `npm pack` from the published
 * package.json and `files`, and unpacked into an application's node_modules next to Mongoose,
 * the driver Mongoose uses and @types/node (links to this repository's copies: no registry, no
 * network).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const ROOT = join(__dirname, '..', '..');
const PACKAGE = 'mongoose-pessimistic-lock';

export interface PackedApp {
  /** The application's directory: write sources and tsconfigs here. */
  dir: string;
  /** Removes everything this created. */
  remove(): void;
}

export function installPackedApp(): PackedApp {
  const work = mkdtempSync(join(tmpdir(), 'mpl-packed-'));
  const stage = join(work, 'stage');
  mkdirSync(stage);
  const run = (command: string, args: string[], cwd: string) =>
    execFileSync(command, args, { cwd, encoding: 'utf8', timeout: 180_000, stdio: ['ignore', 'pipe', 'pipe'] });

  // Stage what npm would publish: package.json and its `files`, with dist built fresh.
  run(process.execPath, ['scripts/build.mjs', join(stage, 'dist')], ROOT);
  const manifest = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { files: string[] };
  cpSync(join(ROOT, 'package.json'), join(stage, 'package.json'));
  for (const entry of manifest.files) {
    if (entry !== 'dist' && existsSync(join(ROOT, entry))) cpSync(join(ROOT, entry), join(stage, entry), { recursive: true });
  }
  const packed = JSON.parse(run('npm', ['pack', '--json', '--ignore-scripts', '--pack-destination', work], stage)) as { filename: string }[];
  const tarball = join(work, packed[0]!.filename);

  // Install: unpack the tarball; link the peer dependency, the driver Mongoose uses where npm
  // hoists it (the app's node_modules: one copy, as an app that depends on Mongoose alone gets),
  // and Node's types.
  const dir = join(work, 'app');
  const installed = join(dir, 'node_modules', PACKAGE);
  mkdirSync(installed, { recursive: true });
  mkdirSync(join(dir, 'node_modules', '@types'));
  run('tar', ['-xzf', tarball, '-C', installed, '--strip-components=1'], work);
  const mongoose = join(ROOT, 'node_modules', 'mongoose');
  symlinkSync(mongoose, join(dir, 'node_modules', 'mongoose'), 'dir');
  // Mongoose's own driver: nested under it when this checkout's differs (the Mongoose 8 run), else hoisted.
  const nested = join(mongoose, 'node_modules', 'mongodb');
  symlinkSync(existsSync(nested) ? nested : join(ROOT, 'node_modules', 'mongodb'), join(dir, 'node_modules', 'mongodb'), 'dir');
  symlinkSync(join(ROOT, 'node_modules', '@types', 'node'), join(dir, 'node_modules', '@types', 'node'), 'dir');
  writeFileSync(join(dir, 'package.json'), JSON.stringify({ name: 'app', private: true }) + '\n');
  rmSync(stage, { recursive: true, force: true });
  return { dir, remove: () => rmSync(work, { recursive: true, force: true }) };
}

/** A TypeScript compiler installed in this repository: `typescript` (5.9), or an npm alias. */
export interface Compiler {
  /** The package directory under node_modules: `typescript`, `typescript6`, `typescript7`. */
  package: string;
  /** The version it reports (`tsc -v`). */
  version(): string;
  /** Runs `tsc -p <project>` in `cwd`; the exit status and every diagnostic line. */
  check(cwd: string, project: string): { status: number | null; output: string };
  /**
   * The same, type-checking only the project's own files and the declaration files whose path
   * contains `marker` (check-declarations.ts): the same diagnostics for those files, without
   * checking Node's and Mongoose's declarations. TypeScript 7 has no JavaScript API: there it is
   * `check` (its native compiler checks everything in a few seconds).
   */
  checkOnly(cwd: string, project: string, marker: string): { status: number | null; output: string };
}

export function compiler(pkg: string): Compiler {
  // TypeScript 7's `bin/tsc` is a small Node script that runs the native compiler from the
  // platform package (@typescript/typescript-<platform>-<arch>); 5.9's and 6's are JavaScript.
  const tsc = join(ROOT, 'node_modules', pkg, 'bin', 'tsc');
  const exec = (args: string[], cwd: string) =>
    spawnSync(process.execPath, [tsc, ...args], { cwd, encoding: 'utf8', timeout: 180_000 });
  const hasApi = existsSync(join(ROOT, 'node_modules', pkg, 'lib', 'typescript.js'));
  const check = (cwd: string, project: string) => {
    const result = exec(['-p', project, '--pretty', 'false'], cwd);
    if (result.error) throw result.error;
    return { status: result.status, output: `${result.stdout}${result.stderr}`.trim() };
  };
  return {
    package: pkg,
    version: () => exec(['-v'], ROOT).stdout.trim().replace(/^Version /, ''),
    check,
    checkOnly(cwd, project, marker) {
      if (!hasApi) return check(cwd, project);
      // tsx by its path: the app's directory, the working directory, has no tsx to resolve.
      const tsx = pathToFileURL(require.resolve('tsx')).href;
      const result = spawnSync(process.execPath, ['--import', tsx, join(__dirname, 'check-declarations.ts'), join(ROOT, 'node_modules', pkg), project, marker], {
        cwd,
        encoding: 'utf8',
        timeout: 180_000,
      });
      if (result.error) throw result.error;
      if (result.status !== 0 && result.status !== 2) throw new Error(`check-declarations.ts ended with ${result.status}: ${result.stderr}`);
      return { status: result.status, output: result.stdout.trim() };
    },
  };
}
