/**
 * `npm run fidelity:mongoose -- <checkout of Automattic/mongoose> [--filter SUBSTRING] [--timeout-s N]`
 *
 * Runs Mongoose's own mocha test suite against a fresh emulator (a one-node replica set) and prints
 * per-file results and totals, then every failing test with its error. Development tooling: the
 * checkout (with its dev dependencies installed, `npm install --ignore-scripts`) is given on the
 * command line and nothing of it is part of this repository.
 *
 * Mongoose's test/mocha-fixtures.js starts mongodb-memory-server unless MONGOOSE_TEST_URI is set;
 * here it is set to the emulator, so every test that talks to a server talks to the emulator.
 * Two passes, as Mongoose's own CI runs: every file against a standalone (its default
 * MongoMemoryServer), then the files that look for REPLICA_SET (transactions, change streams...)
 * against a one-node replica set with REPLICA_SET=rs0. Each pass prints its own totals.
 * Each test file runs in its own mocha process (bounded in time), so one hanging file cannot stop
 * the run.
 */
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative } from 'node:path';
import { startEmulator } from '../../../test-backend/emulator';

interface Args {
  root: string;
  filter?: string;
  timeoutS: number;
}

function parseArgs(argv: string[]): Args {
  const out: Args = { root: '', timeoutS: 240 };
  for (let i = 0; i < argv.length; i++) {
    if (argv[i] === '--filter') out.filter = argv[++i];
    else if (argv[i] === '--timeout-s') out.timeoutS = Number(argv[++i]);
    else out.root = argv[i];
  }
  if (!out.root) throw new Error('usage: npm run fidelity:mongoose -- <checkout of Automattic/mongoose> [--filter S] [--timeout-s N]');
  if (!existsSync(join(out.root, 'node_modules', 'mocha'))) throw new Error(`${out.root} has no node_modules/mocha: run "npm install --ignore-scripts" there first`);
  return out;
}

function testFiles(dir: string): string[] {
  const out: string[] = [];
  for (const f of readdirSync(dir)) {
    const p = join(dir, f);
    if (statSync(p).isDirectory()) {
      if (f === 'encryption' || f === 'types' || f === 'node_modules') continue;
      out.push(...testFiles(p));
    } else if (f.endsWith('.test.js')) out.push(p);
  }
  return out.sort();
}

interface MochaTest {
  fullTitle: string;
  file?: string;
  err?: { message?: string; code?: number };
}

interface MochaReport {
  stats: { passes: number; failures: number; pending: number };
  passes: MochaTest[];
  failures: MochaTest[];
  pending: MochaTest[];
}

function runFile(root: string, file: string, uri: string, replSet: string, timeoutS: number): Promise<{ report?: MochaReport; error?: string }> {
  const outDir = mkdtempSync(join(tmpdir(), 'mpl-mongoose-'));
  const out = join(outDir, 'report.json');
  const mocha = join(root, 'node_modules', 'mocha', 'bin', 'mocha.js');
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [mocha, '--exit', '--reporter', 'json', '--reporter-option', `output=${out}`, '--timeout', '20000', file], {
      cwd: root,
      env: { ...process.env, MONGOOSE_TEST_URI: uri, MONGOOSE_REPLSET_URI: '', START_REPLICA_SET: '', REPLICA_SET: replSet, CI: '' },
      stdio: ['ignore', 'ignore', 'pipe'],
    });
    let stderr = '';
    child.stderr.on('data', (d: Buffer) => (stderr = (stderr + d.toString()).slice(-2000)));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutS * 1000);
    child.on('exit', (code, signal) => {
      clearTimeout(timer);
      let report: MochaReport | undefined;
      try {
        report = JSON.parse(readFileSync(out, 'utf8')) as MochaReport;
      } catch {
        report = undefined;
      }
      rmSync(outDir, { recursive: true, force: true });
      if (report) resolve({ report });
      else resolve({ error: signal ? `killed after ${timeoutS} s (${signal})` : `mocha exited ${code} without a report: ${stderr.split('\n').slice(-5).join(' | ')}` });
    });
  });
}

async function runPass(args: Args, files: string[], topology: 'standalone' | 'replset'): Promise<{ passes: number; failures: number; pending: number; broken: number }> {
  const emu = await startEmulator({ port: 0, topology, setParameters: { ttlMonitorSleepSecs: 1 } });
  const uri = topology === 'replset' ? emu.uri.replace('/?', '/mongoose_test?') : `${emu.uri}mongoose_test`;
  const totals = { passes: 0, failures: 0, pending: 0, broken: 0 };
  const failures: string[] = [];
  const started = Date.now();
  process.stdout.write(`\n== ${topology} pass (${files.length} files) ==\n`);
  try {
    for (const file of files) {
      const rel = relative(args.root, file);
      const { report, error } = await runFile(args.root, file, uri, topology === 'replset' ? 'rs0' : '', args.timeoutS);
      if (!report) {
        totals.broken++;
        process.stdout.write(`BROKEN ${rel}: ${error}\n`);
        continue;
      }
      const s = report.stats;
      totals.passes += s.passes;
      totals.failures += s.failures;
      totals.pending += s.pending;
      process.stdout.write(`${s.failures ? 'FAIL' : 'PASS'} ${rel}: ${s.passes} passed, ${s.failures} failed, ${s.pending} pending\n`);
      for (const f of report.failures) failures.push(`${rel} :: ${f.fullTitle} :: ${(f.err?.message ?? '').split('\n')[0].slice(0, 300)}`);
    }
  } finally {
    await emu.stop();
  }
  process.stdout.write(`\nFailures (${topology}):\n`);
  for (const f of failures) process.stdout.write(`  ${f}\n`);
  const ran = totals.passes + totals.failures;
  process.stdout.write(`\nTOTAL ${topology}: ${totals.passes} passed, ${totals.failures} failed, ${totals.pending} pending, ${totals.broken} files without a report; ${ran ? ((100 * totals.passes) / ran).toFixed(1) : '0'}% of the tests that ran pass (${files.length} files, ${((Date.now() - started) / 1000).toFixed(0)} s)\n`);
  return totals;
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const files = testFiles(join(args.root, 'test')).filter((f) => !args.filter || f.includes(args.filter));
  const needReplSet = files.filter((f) => readFileSync(f, 'utf8').includes('REPLICA_SET'));
  const a = await runPass(args, files, 'standalone');
  const b = needReplSet.length ? await runPass(args, needReplSet, 'replset') : { failures: 0, broken: 0 };
  process.exitCode = a.failures || a.broken || b.failures || b.broken ? 1 : 0;
}

main().catch((e) => {
  process.stderr.write(`${(e as Error).stack ?? String(e)}\n`);
  process.exit(2);
});
