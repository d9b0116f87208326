/**
 * .ci/run's steps that depend on the machine (scripts/ci-lib.sh), on the machines it runs on:
 * root with Debian (this project's CI), a user with passwordless sudo (GitHub's runners), a user
 * without it, Ubuntu (whose chromium package is a snap). Before, .ci/run called apt-get without
 * sudo whenever /usr/bin/chromium was missing, which stops a non-root job before any test.
 * `id`, `sudo` and `apt-get` are stubs on PATH that log what they were asked to do; nothing is
 * installed. Also: the GitHub workflow passes actionlint, and a broken one does not.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const LIB = resolve(__dirname, '../../scripts/ci-lib.sh');
const ROOT = resolve(__dirname, '../..');

let dir: string;
let bin: string;
let log: string;

beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'mpl-ci-'));
  bin = join(dir, 'bin');
  log = join(dir, 'calls.log');
  mkdirSync(bin);
  writeFileSync(log, '');
  script(join(bin, 'id'), 'if [ "$1" = -u ]; then echo "$STUB_UID"; else exec /usr/bin/id "$@"; fi');
  // sudo -n: allowed (runs the command) or refused (exit 1), as STUB_SUDO says.
  script(join(bin, 'sudo'), [
    '[ "$STUB_SUDO" = ok ] || { echo "sudo: a password is required" >&2; exit 1; }',
    '[ "$1" = -n ] && shift',
    '[ "$1" = true ] && exit 0',
    'echo "sudo $*" >> "$STUB_LOG"',
    'exec "$@"',
  ].join('\n'));
  // apt-get: logs; `install ... chromium` puts a browser at STUB_INSTALL_TARGET.
  script(join(bin, 'apt-get'), [
    'echo "apt-get $* (uid $(id -u), DEBIAN_FRONTEND=${DEBIAN_FRONTEND:-})" >> "$STUB_LOG"',
    'if [ "$1" = install ]; then case "$*" in',
    '  *spin*) for t in spin gcc; do printf \'#!/bin/sh\\necho "%s 6.5.2"\\n\' "$t" > "$STUB_TOOL_DIR/$t"; chmod +x "$STUB_TOOL_DIR/$t"; done ;;',
    '  *) printf \'#!/bin/sh\\necho "Chromium 140.0.0.0"\\n\' > "$STUB_INSTALL_TARGET"; chmod +x "$STUB_INSTALL_TARGET" ;;',
    'esac; fi',
  ].join('\n'));
});

afterEach(() => {
  rmSync(dir, { recursive: true, force: true });
});

function script(path: string, body: string): void {
  writeFileSync(path, `#!/bin/sh\n${body}\n`);
  chmodSync(path, 0o755);
}

function osRelease(id: string, idLike = ''): string {
  const path = join(dir, 'os-release');
  writeFileSync(path, `ID=${id}\n${idLike ? `ID_LIKE=${idLike}\n` : ''}`);
  return path;
}

interface Run {
  status: number | null;
  stdout: string;
  stderr: string;
  calls: string[];
}

/** Runs `ci_ensure_browser <defaultPath> <osRelease>` and prints the exported CHROMIUM_PATH. */
function ensureBrowser(opts: { uid: number; sudo: 'ok' | 'refused'; defaultPath: string; osRelease: string; chromiumPath?: string }): Run {
  const env: NodeJS.ProcessEnv = {
    PATH: `${bin}:${process.env.PATH ?? '/usr/bin:/bin'}`,
    STUB_UID: String(opts.uid),
    STUB_SUDO: opts.sudo,
    STUB_LOG: log,
    STUB_INSTALL_TARGET: opts.defaultPath,
  };
  if (opts.chromiumPath !== undefined) env.CHROMIUM_PATH = opts.chromiumPath;
  const result = spawnSync('bash', ['-c', 'source "$0"; ci_ensure_browser "$1" "$2" || exit 1; echo "CHROMIUM_PATH=$CHROMIUM_PATH"', LIB, opts.defaultPath, opts.osRelease], {
    env,
    encoding: 'utf8',
    timeout: 60_000,
  });
  const calls = readFileSync(log, 'utf8').split('\n').filter(Boolean);
  return { status: result.status, stdout: result.stdout, stderr: result.stderr, calls };
}

describe('ci_ensure_browser', () => {
  test('root on Debian without a browser: installs Debian\'s chromium with apt-get directly', () => {
    const target = join(dir, 'chromium');
    const run = ensureBrowser({ uid: 0, sudo: 'refused', defaultPath: target, osRelease: osRelease('debian') });
    expect(run.status).toBe(0);
    expect(run.calls).toEqual([
      'apt-get update -qq (uid 0, DEBIAN_FRONTEND=)',
      'apt-get install -y -qq --no-install-recommends chromium (uid 0, DEBIAN_FRONTEND=noninteractive)',
    ]);
    expect(run.stdout).toContain(`Browser for the end-to-end tests: ${target} (Chromium 140.0.0.0)`);
    expect(run.stdout).toContain(`CHROMIUM_PATH=${target}\n`);
  });

  test('not root, with passwordless sudo: the same apt-get steps through sudo -n', () => {
    const target = join(dir, 'chromium');
    const run = ensureBrowser({ uid: 1001, sudo: 'ok', defaultPath: target, osRelease: osRelease('debian') });
    expect(run.status).toBe(0);
    expect(run.calls).toEqual([
      'sudo apt-get update -qq',
      'apt-get update -qq (uid 1001, DEBIAN_FRONTEND=)',
      'sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium',
      'apt-get install -y -qq --no-install-recommends chromium (uid 1001, DEBIAN_FRONTEND=noninteractive)',
    ]);
    expect(run.stdout).toContain(`CHROMIUM_PATH=${target}\n`);
  });

  test('not root and no passwordless sudo: fails naming the command that needs root, runs nothing', () => {
    const target = join(dir, 'chromium');
    const run = ensureBrowser({ uid: 1001, sudo: 'refused', defaultPath: target, osRelease: osRelease('debian') });
    expect(run.status).toBe(1);
    expect(run.calls).toEqual([]);
    expect(run.stderr).toContain('.ci/run: this step needs root, and this is not root and has no passwordless sudo:\n    apt-get update -qq\n');
    expect(existsSync(target)).toBe(false);
  });

  test('Ubuntu without a browser: installs nothing (its chromium is a snap) and says to set CHROMIUM_PATH', () => {
    const run = ensureBrowser({ uid: 0, sudo: 'ok', defaultPath: join(dir, 'chromium'), osRelease: osRelease('ubuntu', 'debian') });
    expect(run.status).toBe(1);
    expect(run.calls).toEqual([]);
    expect(run.stderr).toContain('this is not Debian (os-release ID: ubuntu debian)');
    expect(run.stderr).toContain('Install Chromium or Google Chrome (not a snap) and set CHROMIUM_PATH to it');
  });

  test('an explicit CHROMIUM_PATH that does not exist fails without installing anything', () => {
    const run = ensureBrowser({ uid: 0, sudo: 'ok', defaultPath: join(dir, 'chromium'), osRelease: osRelease('debian'), chromiumPath: join(dir, 'nowhere') });
    expect(run.status).toBe(1);
    expect(run.calls).toEqual([]);
    expect(run.stderr).toContain(`CHROMIUM_PATH=${join(dir, 'nowhere')} is not an executable file`);
  });

  test('a browser that does not run (a snap launcher without snapd) is refused', () => {
    const stub = join(dir, 'chromium-browser');
    script(stub, 'echo "Command \'/usr/bin/chromium-browser\' requires the chromium snap to be installed." >&2; exit 1');
    const run = ensureBrowser({ uid: 1001, sudo: 'refused', defaultPath: join(dir, 'chromium'), osRelease: osRelease('ubuntu', 'debian'), chromiumPath: stub });
    expect(run.status).toBe(1);
    expect(run.stderr).toContain(`${stub} does not run`);
  });

  test('an existing browser is used as it is: no root, nothing installed', () => {
    const chrome = join(dir, 'google-chrome');
    script(chrome, 'echo "Google Chrome 140.0.7339.80"');
    const run = ensureBrowser({ uid: 1001, sudo: 'refused', defaultPath: join(dir, 'chromium'), osRelease: osRelease('ubuntu', 'debian'), chromiumPath: chrome });
    expect(run.status).toBe(0);
    expect(run.calls).toEqual([]);
    expect(run.stdout).toContain(`Browser for the end-to-end tests: ${chrome} (Google Chrome 140.0.7339.80)`);
  });
});

/**
 * Runs `ci_ensure_model_checker <osRelease>` with a PATH of the stubs and a few system tools only,
 * so that spin and gcc are missing unless `have` puts stubs of them there.
 */
function ensureModelChecker(opts: { uid: number; sudo: 'ok' | 'refused'; osRelease: string; have: string[] }): Run {
  const sys = join(dir, 'sys');
  mkdirSync(sys);
  for (const tool of ['head', 'env', 'chmod']) symlinkSync(execFileSync('sh', ['-c', `command -v ${tool}`], { encoding: 'utf8' }).trim(), join(sys, tool));
  for (const tool of opts.have) script(join(bin, tool), `echo "${tool} (already here)"`);
  const env: NodeJS.ProcessEnv = { PATH: `${bin}:${sys}`, STUB_UID: String(opts.uid), STUB_SUDO: opts.sudo, STUB_LOG: log, STUB_TOOL_DIR: bin };
  const result = spawnSync(execFileSync('sh', ['-c', 'command -v bash'], { encoding: 'utf8' }).trim(), ['-c', 'source "$0"; ci_ensure_model_checker "$1"', LIB, opts.osRelease], { env, encoding: 'utf8', timeout: 60_000 });
  const calls = readFileSync(log, 'utf8').split('\n').filter(Boolean);
  return { status: result.status, stdout: result.stdout, stderr: result.stderr, calls };
}

describe('ci_ensure_model_checker (spin and gcc for __tests__/model/)', () => {
  test('root on Debian without spin: installs Debian\'s spin and gcc with apt-get, then finds them', () => {
    const run = ensureModelChecker({ uid: 0, sudo: 'refused', osRelease: osRelease('debian'), have: ['gcc'] });
    expect(run.status).toBe(0);
    expect(run.calls).toEqual([
      'apt-get update -qq (uid 0, DEBIAN_FRONTEND=)',
      'apt-get install -y -qq --no-install-recommends spin gcc (uid 0, DEBIAN_FRONTEND=noninteractive)',
    ]);
    expect(run.stdout).toContain('Model checker: spin 6.5.2, gcc 6.5.2');
  });

  test('a user with passwordless sudo on Ubuntu (GitHub\'s runners): the same steps through sudo -n', () => {
    const run = ensureModelChecker({ uid: 1001, sudo: 'ok', osRelease: osRelease('ubuntu', 'debian'), have: [] });
    expect(run.status).toBe(0);
    expect(run.calls).toEqual([
      'sudo apt-get update -qq',
      'apt-get update -qq (uid 1001, DEBIAN_FRONTEND=)',
      'sudo env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends spin gcc',
      'apt-get install -y -qq --no-install-recommends spin gcc (uid 1001, DEBIAN_FRONTEND=noninteractive)',
    ]);
  });

  test('both already on PATH: installs nothing and needs no root (a second run of .ci/run)', () => {
    const run = ensureModelChecker({ uid: 1001, sudo: 'refused', osRelease: osRelease('debian'), have: ['spin', 'gcc'] });
    expect(run.status).toBe(0);
    expect(run.calls).toEqual([]);
  });

  test('not root and no passwordless sudo: fails naming the command that needs root', () => {
    const run = ensureModelChecker({ uid: 1001, sudo: 'refused', osRelease: osRelease('debian'), have: [] });
    expect(run.status).toBe(1);
    expect(run.calls).toEqual([]);
    expect(run.stderr).toContain('this step needs root, and this is not root and has no passwordless sudo:\n    apt-get update -qq\n');
  });

  test('not Debian: installs nothing and says what to install', () => {
    const run = ensureModelChecker({ uid: 0, sudo: 'ok', osRelease: osRelease('fedora'), have: ['gcc'] });
    expect(run.status).toBe(1);
    expect(run.calls).toEqual([]);
    expect(run.stderr).toContain('no spin on PATH for the model check');
    expect(run.stderr).toContain('Install spin');
  });
});

describe('ci_lint_workflows (actionlint)', () => {
  function lint(workflows?: string): Run {
    const result = spawnSync('bash', ['-c', 'source "$0"; ci_lint_workflows "$1"', LIB, workflows ?? ''], { cwd: ROOT, encoding: 'utf8', timeout: 120_000 });
    return { status: result.status, stdout: result.stdout, stderr: result.stderr, calls: [] };
  }

  test('the project\'s workflows pass', () => {
    const run = lint();
    expect(run.stdout).toContain('All workflow files passed lint checks');
    expect(run.status).toBe(0);
  });

  test('a workflow with an unknown action input and an undefined matrix key fails', () => {
    const workflows = join(dir, 'workflows');
    mkdirSync(workflows);
    writeFileSync(
      join(workflows, 'broken.yml'),
      [
        'on: [push]',
        'jobs:',
        '  t:',
        '    runs-on: ubuntu-24.04',
        '    strategy:',
        '      matrix:',
        "        mongodb: ['7.0.16']",
        '    steps:',
        '      - uses: actions/checkout@v4',
        '        with:',
        '          fetch-dept: 1',
        '      - run: echo ${{ matrix.mongod }}',
        '',
      ].join('\n'),
    );
    const run = lint(workflows);
    expect(run.status).toBe(1);
    expect(run.stdout).toContain('input "fetch-dept" is not defined in action "actions/checkout@v4"');
    expect(run.stdout).toContain('property "mongod" is not defined in object type {mongodb: string}');
  });

  test('no workflow at all is a failure, not a pass', () => {
    const run = lint(join(dir, 'empty'));
    expect(run.status).toBe(1);
    expect(run.stderr).toContain('no workflow in');
  });
});
