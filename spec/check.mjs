#!/usr/bin/env node
/**
 * Runs the spin checks of spec/*.pml: every configuration of a suite, each compiled with its own
 * -D switches and searched exhaustively (`spin -a`, `gcc -DSAFETY -DCOLLAPSE`, `./pan`), and
 * compares the outcome with what the configuration expects: `holds` (no assertion fails in any
 * reachable state) or `fails` (spin finds a counterexample: a broken variant, a documented window,
 * a finding). A counterexample's trail is replayed (`spin -t`) and its events (the model's
 * `printf("EV ...")` lines) are written next to the report, for the replay tests.
 *
 *   node spec/check.mjs [--suite full|ci] [--only <name,...>] [--json <file>] [--traces <dir>]
 *                       [--time-limit <seconds per search>]
 *
 * `npm run model` runs the full suite (see spec/README.md for the bounds and the state counts);
 * __tests__/model/model-check.test.ts runs the ci suite. Needs spin (Debian's `spin` package) and
 * gcc on PATH. Exits 1 if any configuration does not behave as expected.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const SPEC = dirname(fileURLToPath(import.meta.url));

/** Memory a single search may use (MB): the search stops there and counts as incomplete. */
const MEMLIM_MB = Number(process.env.MPL_MODEL_MEMLIM_MB ?? 2048);

// Shared bounds of each model (spec/README.md, "Bounds").
const CORE = ['-DTTL=3', '-DDMAX=1', '-DPURGE=2'];
const GUARD = ['-DTTL=2', '-DDMAX=0', '-DPURGE=2'];
const MANY = ['-DTTL=3', '-DDMAX=1', '-DPURGE=2'];
const MANY_SMALL = ['-DTTL=2', '-DDMAX=0', '-DPURGE=2'];
const NEXT = ['-DTTL=2', '-DDMAX=0', '-DNO_PURGE', '-DAGEMAX=2'];

/**
 * Every configuration: its model, its switches, what it expects, and the suites it belongs to.
 * `why` says what it shows; `invariant` names the assertion a counterexample must violate.
 */
export const CONFIGS = [
  // ---- core.pml: acquire, lease, extend, resume, releases, expiry, purge, fences ----
  { name: 'core', model: 'core.pml', defines: [...CORE, '-DOPS=2', '-DOTHER_OPS=0'], expect: 'holds', suites: ['full'], why: 'LEASE, MUTEX, FENCE: A and B each lock, extend, unlock twice; mongod $$NOW' },
  { name: 'core-mongos', model: 'core.pml', defines: [...CORE, '-DOPS=2', '-DOTHER_OPS=0', '-DMONGOS'], expect: 'holds', suites: ['full'], why: 'the same through mongos: one $$NOW per command, however long it waits' },
  { name: 'core-others', model: 'core.pml', defines: [...CORE, '-DOPS=1', '-DOTHER_OPS=1'], expect: 'holds', suites: ['full'], why: 'with another request of A (renewal, resume, Model.unlock) or an administrator (forceUnlock)' },
  // Through mongos with another request the search outgrows 2 GB with a drifting clock (DMAX=1:
  // stopped at 26,963,531 states as one search, and past 1.7 GB for the renewal alone): it runs
  // with exact client clocks; drift is covered by core-others (mongod) and core-mongos.
  { name: 'core-others-mongos', model: 'core.pml', defines: [...CORE, '-DDMAX=0', '-DOPS=1', '-DOTHER_OPS=1', '-DMONGOS'], expect: 'holds', suites: ['full'], why: 'the same through mongos, client clocks exact' },
  { name: 'core-skew', model: 'core.pml', defines: ['-DTTL=3', '-DDMAX=1', '-DPURGE=3', '-DSKEW=1', '-DOPS=2', '-DOTHER_OPS=0', '-DMONGOS'], expect: 'holds', suites: ['full'], why: 'FENCE across purges with two clocks one tick apart: holds while no reading is PURGE/2 old' },
  { name: 'core-small', model: 'core.pml', defines: [...CORE, '-DOPS=1', '-DOTHER_OPS=0'], expect: 'holds', suites: ['ci'], why: 'LEASE, MUTEX, FENCE, one operation each' },
  { name: 'core-small-mongos', model: 'core.pml', defines: [...CORE, '-DOPS=1', '-DOTHER_OPS=0', '-DMONGOS'], expect: 'holds', suites: ['full', 'ci'], why: 'the same through mongos' },
  { name: 'core-small-others', model: 'core.pml', defines: [...CORE, '-DOPS=1', '-DOTHER_OPS=1', '-DOTHER=12', '-DDMAX=0', '-DTTL=2'], expect: 'holds', suites: ['ci'], why: 'Model.unlock(A) and forceUnlock from another request' },
  { name: 'old-acquire', model: 'core.pml', defines: [...CORE, '-DDMAX=0', '-DOPS=1', '-DOTHER_OPS=0', '-DOLD_ACQUIRE'], expect: 'fails', invariant: 'LEASE', suites: ['full', 'ci'], why: 'the lease of a grant timed from its reply (before issue 16 item 3): a late reply' },
  { name: 'no-drift', model: 'core.pml', defines: [...CORE, '-DOPS=1', '-DOTHER_OPS=0', '-DNO_DRIFT'], expect: 'fails', invariant: 'LEASE', suites: ['full', 'ci'], why: 'timed from the send but without the drift allowance: a slow client clock' },
  { name: 'extend-from-reply', model: 'core.pml', defines: [...CORE, '-DDMAX=0', '-DOPS=2', '-DOTHER_OPS=0', '-DEXT_FROM_REPLY'], expect: 'fails', invariant: 'LEASE', suites: ['full', 'ci'], why: "an extension's lease timed from its reply" },
  { name: 'release-any-token', model: 'core.pml', defines: [...CORE, '-DOPS=2', '-DOTHER_OPS=0', '-DRELEASE_ANY_TOKEN'], expect: 'fails', invariant: 'LEASE', suites: ['full', 'ci'], why: "doc.unlock without the token in its filter releases the next holder's lock" },
  { name: 'fence-strict', model: 'core.pml', defines: [...CORE, '-DOPS=2', '-DOTHER_OPS=0', '-DMONGOS', '-DFENCE_STRICT'], expect: 'fails', invariant: 'FENCE', suites: ['full', 'ci'], why: 'fences without the assumption: a stale $$NOW reading after a purge' },
  { name: 'fence-skew', model: 'core.pml', defines: ['-DTTL=3', '-DDMAX=0', '-DPURGE=2', '-DSKEW=1', '-DOPS=2', '-DOTHER_OPS=0', '-DFENCE_STRICT'], expect: 'fails', invariant: 'FENCE', suites: ['full'], why: 'fences without the assumption: clocks PURGE/2 apart (divergence 6)' },
  { name: 'finding-F1-fence-clock-only', model: 'core.pml', defines: [...CORE, '-DOPS=2', '-DOTHER_OPS=0', '-DMONGOS', '-DFENCE_CLOCK_ONLY'], expect: 'fails', invariant: 'FENCE', suites: ['full'], why: 'finding F1: divergence 6 as stated (clock lag only) is not enough: one clock, a command that waited' },
  { name: 'finding-F2-unlock-error', model: 'core.pml', defines: [...CORE, '-DDMAX=0', '-DOPS=2', '-DOTHER_OPS=0', '-DFINDING_UNLOCK_ERROR'], expect: 'fails', invariant: 'LEASE', suites: ['full', 'ci'], why: 'finding F2 (fixed): the release as built before the fix, counting on the lock until a failed doc.unlock returns, leaves msLeft() > 0' },
  // ---- guard.pml: guarded writes ----
  { name: 'guard-atomic', model: 'guard.pml', defines: [...GUARD, '-DOTHER_OPS=1'], expect: 'holds', suites: ['full'], why: 'atomic mode: no write lands after an acquisition in its window' },
  { name: 'guard-atomic-mongos', model: 'guard.pml', defines: [...GUARD, '-DOTHER_OPS=1', '-DMONGOS'], expect: 'holds', suites: ['full'], why: 'the same through mongos' },
  { name: 'guard-check', model: 'guard.pml', defines: [...GUARD, '-DOTHER_OPS=1', '-DCHECK_MODE', '-DADMIT_W4'], expect: 'holds', suites: ['full'], why: 'check mode: every window is W1, W2, W3 or W4' },
  { name: 'guard-check-mongos', model: 'guard.pml', defines: [...GUARD, '-DOTHER_OPS=1', '-DCHECK_MODE', '-DADMIT_W4', '-DMONGOS'], expect: 'holds', suites: ['full'], why: 'the same through mongos' },
  { name: 'guard-small-atomic', model: 'guard.pml', defines: [...GUARD, '-DOTHER_OPS=1', '-DOTHER=2'], expect: 'holds', suites: ['ci'], why: 'atomic mode, forceUnlock as the other request' },
  { name: 'guard-small-check', model: 'guard.pml', defines: [...GUARD, '-DOTHER_OPS=1', '-DOTHER=2', '-DCHECK_MODE'], expect: 'holds', suites: ['ci'], why: 'check mode, forceUnlock as the other request' },
  { name: 'window-W1', model: 'guard.pml', defines: [...GUARD, '-DOTHER_OPS=1', '-DCHECK_MODE', '-DADMIT_W4', '-DFIND_W1'], expect: 'fails', invariant: 'FIND', suites: ['full', 'ci'], why: 'check mode: the documented window W1 (expiry, then another owner) is reachable' },
  { name: 'window-W2', model: 'guard.pml', defines: [...GUARD, '-DOTHER_OPS=1', '-DOTHER=1', '-DCHECK_MODE', '-DADMIT_W4', '-DFIND_W2'], expect: 'fails', invariant: 'FIND', suites: ['full', 'ci'], why: 'check mode: the documented window W2 (a release by another request, then another owner) is reachable' },
  { name: 'window-W3', model: 'guard.pml', defines: [...GUARD, '-DOTHER_OPS=1', '-DCHECK_MODE', '-DADMIT_W4', '-DFIND_W3'], expect: 'fails', invariant: 'FIND', suites: ['full', 'ci'], why: "check mode: the documented window W3 (a non-holder's write checked while free) is reachable" },
  { name: 'finding-F3-renewal-window', model: 'guard.pml', defines: [...GUARD, '-DOTHER_OPS=1', '-DOTHER=4', '-DCHECK_MODE'], expect: 'fails', invariant: 'FIND', suites: ['full'], why: 'finding F3: check mode, a renewal by the same owner in another request opens the window too (W4)' },
  { name: 'read-verify', model: 'guard.pml', defines: [...GUARD, '-DOTHER_OPS=1', '-DREAD_VERIFY'], expect: 'fails', invariant: 'WINDOW', suites: ['full', 'ci'], why: 'atomic mode with a read for the check: the takeover does not wait for the transaction' },
  { name: 'claim-noop', model: 'guard.pml', defines: [...GUARD, '-DOTHER_OPS=1', '-DCLAIM_NOOP'], expect: 'fails', invariant: 'WINDOW', suites: ['full', 'ci'], why: "atomic mode with a claim that writes nothing on a free record" },
  { name: 'old-acquire-behind-transaction', model: 'guard.pml', defines: [...GUARD, '-DOTHER_OPS=1', '-DMONGOS', '-DOLD_ACQUIRE'], expect: 'fails', invariant: 'LEASE', suites: ['full', 'ci'], why: 'issue 16 item 3: a grant handed out already expired' },
  // ---- many.pml: lockMany ----
  { name: 'many', model: 'many.pml', defines: [...MANY, '-DOPS=1'], expect: 'holds', suites: ['full'], why: 'ALL-OR-NOTHING, LEASE, MUTEX: two overlapping groups in opposite orders, or a group and a lock' },
  { name: 'many-mongos', model: 'many.pml', defines: [...MANY, '-DOPS=1', '-DMONGOS'], expect: 'holds', suites: ['full'], why: 'the same through mongos' },
  { name: 'many-rounds', model: 'many.pml', defines: [...MANY_SMALL, '-DOPS=2'], expect: 'holds', suites: ['full'], why: 'two rounds each (a wait)' },
  { name: 'many-same-owner', model: 'many.pml', defines: [...MANY, '-DOPS=1', '-DOTHER_OWNER=1'], expect: 'holds', suites: ['full'], why: 'two requests of one owner' },
  { name: 'many-small', model: 'many.pml', defines: [...MANY_SMALL, '-DOPS=1'], expect: 'holds', suites: ['ci'], why: 'ALL-OR-NOTHING, LEASE, MUTEX' },
  { name: 'many-no-release', model: 'many.pml', defines: [...MANY_SMALL, '-DOPS=1', '-DNO_RELEASE'], expect: 'fails', invariant: 'ALL-OR-NOTHING', suites: ['full', 'ci'], why: 'lockMany without the release of a refused round' },
  // ---- ordered.pml: waiting groups in canonical order, one reservation, the hold bound (issue 17 item 2) ----
  { name: 'ordered', model: 'ordered.pml', defines: ['-DUSER', '-DROUNDS=2'], expect: 'holds', suites: ['ci'], why: 'NO-DEADLOCK: two waiting groups in opposite listed orders and a caller holding D1 then waiting for D0, two rounds each' },
  { name: 'ordered-3', model: 'ordered.pml', defines: ['-DUSER', '-DROUNDS=3'], expect: 'holds', suites: ['full'], why: 'the same, three rounds each' },
  { name: 'ordered-groups-no-bound', model: 'ordered.pml', defines: ['-DNO_BOUND', '-DROUNDS=3'], expect: 'holds', suites: ['full'], why: 'groups alone never deadlock, even without the hold bound (canonical order)' },
  { name: 'ordered-no-bound', model: 'ordered.pml', defines: ['-DUSER', '-DNO_BOUND', '-DROUNDS=2'], expect: 'fails', invariant: 'NO-DEADLOCK', suites: ['full', 'ci'], why: 'without the hold bound: a group holding D0 and the caller holding D1 wait for each other' },
  { name: 'ordered-reserve-all', model: 'ordered.pml', defines: ['-DUSER', '-DRESERVE_ALL'], expect: 'fails', invariant: 'NO-DEADLOCK', suites: ['full', 'ci'], why: 'the earlier design (fair2): a waiting group reserves every document it needs; the caller holding D1 waits for reserved D0' },
  { name: 'ordered-oldest', model: 'ordered.pml', defines: ['-DUSER', '-DOLDEST', '-DROUNDS=2'], expect: 'holds', suites: ['ci'], why: 'NO-DEADLOCK with single-document waiters that reserve (issue 17 gap (a)): the caller holding D1 then waiting for D0 reserves each document it waits for, and the oldest waiter takes a reservation over' },
  { name: 'ordered-oldest-single', model: 'ordered.pml', defines: ['-DUSER', '-DOLDEST', '-DSINGLE'], expect: 'holds', suites: ['full'], why: 'the same with a fourth waiter, a single-document waiter for D0 alone, one round each' },
  { name: 'ordered-oldest-no-bound', model: 'ordered.pml', defines: ['-DOLDEST', '-DSINGLE', '-DNO_BOUND', '-DROUNDS=2'], expect: 'holds', suites: ['full'], why: 'groups and a single waiter that reserve, oldest first, never deadlock, even without the hold bound' },
  { name: 'ordered-next', model: 'ordered.pml', defines: ['-DOLDEST', '-DSINGLE', '-DNEXT'], expect: 'holds', suites: ['full', 'ci'], why: 'NO-DEADLOCK with a waiting lockNext worker that reserves the first held match (src/next-reservation.ts) beside two groups and a single waiter, and a job that may stop matching: nobody waits behind a reservation of a document the worker will not take' },
  { name: 'ordered-next-user', model: 'ordered.pml', defines: ['-DUSER', '-DOLDEST', '-DSINGLE', '-DNEXT'], expect: 'holds', suites: ['full'], why: 'the same with the caller holding D1 then waiting for D0' },
  { name: 'ordered-next-keeps', model: 'ordered.pml', defines: ['-DOLDEST', '-DSINGLE', '-DNEXT', '-DNEXT_KEEPS'], expect: 'fails', invariant: 'NO-DEADLOCK', suites: ['full', 'ci'], why: 'a lockNext worker that keeps its reservation after the document stopped matching: the groups wait for ever for the free D0 it reserved and will never take' },
  { name: 'ordered-listed-order', model: 'ordered.pml', defines: ['-DNO_BOUND', '-DLISTED_ORDER', '-DROUNDS=2'], expect: 'fails', invariant: 'NO-DEADLOCK', suites: ['full', 'ci'], why: 'groups holding prefixes of their own listed order (not the canonical one) deadlock' },
  // ---- next.pml: lockNext ----
  { name: 'next', model: 'next.pml', defines: [...NEXT], expect: 'holds', suites: ['full'], why: 'RETURNED, ONE-CLAIMANT, LEASE, MUTEX: two workers, two jobs, two changes' },
  { name: 'next-mongos', model: 'next.pml', defines: [...NEXT, '-DMONGOS'], expect: 'holds', suites: ['full'], why: 'the same through mongos' },
  { name: 'next-same-owner', model: 'next.pml', defines: [...NEXT, '-DOTHER_OWNER=1'], expect: 'holds', suites: ['full'], why: 'two workers of one owner' },
  { name: 'next-null-fix', model: 'next.pml', defines: [...NEXT, '-DCHECK_NULL', '-DNULL_FIX'], expect: 'holds', suites: ['full'], why: 'NULL holds with the fix of finding F4 (as in src/lock-next.ts: "none" only from a read that leaves out no missed document)' },
  { name: 'next-small', model: 'next.pml', defines: [...NEXT, '-DATTEMPTS=1', '-DFLIPS=1'], expect: 'holds', suites: ['ci'], why: 'RETURNED, ONE-CLAIMANT, LEASE, MUTEX, one attempt each' },
  { name: 'next-no-recheck', model: 'next.pml', defines: [...NEXT, '-DATTEMPTS=1', '-DFLIPS=1', '-DNO_RECHECK'], expect: 'fails', invariant: 'RETURNED', suites: ['full', 'ci'], why: 'lockNext loading by _id alone returns a job that no longer matches' },
  { name: 'next-mine', model: 'next.pml', defines: [...NEXT, '-DATTEMPTS=1', '-DFLIPS=0', '-DOTHER_OWNER=1', '-DNEXT_MINE'], expect: 'fails', invariant: 'RETURNED', suites: ['full', 'ci'], why: "lockNext claiming with Model.lock's 'free or mine': two workers of one owner share a job" },
  { name: 'next-no-snapshot', model: 'next.pml', defines: [...NEXT, '-DFLIPS=0', '-DCHECK_NULL', '-DNULL_FIX', '-DNON_SNAPSHOT'], expect: 'fails', invariant: 'NULL', suites: ['full'], why: 'reads without a snapshot (standalone, mongos) can answer null falsely: documented in R34' },
  { name: 'finding-F4-false-null', model: 'next.pml', defines: [...NEXT, '-DCHECK_NULL'], expect: 'fails', invariant: 'NULL', suites: ['full'], why: 'finding F4 (fixed): lockNext as built before the fix, a job skipped because it stopped matching never proposed again, also once it matches again' },
  // ---- upsert.pml: the check-mode upsert of issue 16 item 1 ----
  { name: 'upsert', model: 'upsert.pml', defines: [], expect: 'holds', suites: ['full', 'ci'], why: 'SERIAL in check mode (branch guard)' },
  { name: 'upsert-atomic', model: 'upsert.pml', defines: ['-DATOMIC'], expect: 'holds', suites: ['full', 'ci'], why: 'SERIAL in atomic mode' },
  { name: 'upsert-narrowed', model: 'upsert.pml', defines: ['-DOLD_UPSERT'], expect: 'fails', invariant: 'SERIAL', suites: ['full', 'ci'], why: 'issue 16 item 1: the narrowed upsert inserts a stray document' },
  { name: 'upsert-window', model: 'upsert.pml', defines: ['-DFIND_WINDOW'], expect: 'fails', invariant: 'FIND', suites: ['full', 'ci'], why: 'the documented window: an upsert that found nothing inserts although a document started to match' },
];

/** How each invariant's assertion reads in spin's report (the expanded expression). */
const INVARIANT_PATTERNS = {
  LEASE: /htok\[ci\]/,
  MUTEX: /own\[\(ci\//,
  FENCE: /fnew>mFr/,
  FIND: /^0$/,
  WINDOW: /winAny\[c\]/,
  'ALL-OR-NOTHING': /rTok\[(0|1)\]==tok/,
  RETURNED: /match\[d\]|!\(c1\)|BEL|left\[/,
  NULL: /allAlong/,
  SERIAL: /exists\[0\]&&match\[0\]/,
  'NO-DEADLOCK': /done==/,
};

function parseArgs(argv) {
  const args = { suite: 'full', only: undefined, json: undefined, traces: undefined, timeLimitS: undefined };
  for (let i = 0; i < argv.length; i++) {
    const arg = argv[i];
    if (arg === '--suite') args.suite = argv[++i];
    else if (arg === '--only') args.only = argv[++i].split(',');
    else if (arg === '--json') args.json = argv[++i];
    else if (arg === '--traces') args.traces = argv[++i];
    else if (arg === '--time-limit') args.timeLimitS = Number(argv[++i]);
    else throw new Error(`unknown argument ${arg}`);
  }
  return args;
}

/** Whether a tool is on PATH. */
export function hasTool(name) {
  return spawnSync('sh', ['-c', `command -v ${name}`], { stdio: 'ignore' }).status === 0;
}

function field(text, pattern) {
  const match = text.match(pattern);
  return match ? Number(match[1]) : undefined;
}

/** The events of a counterexample: the EV lines `spin -t` prints, in order. */
function eventsOf(output) {
  return output
    .split('\n')
    .map((line) => line.trim())
    .filter((line) => line.startsWith('EV '))
    .map((line) => line.slice(3));
}

/**
 * Checks one configuration in a fresh directory. Returns what happened: whether it behaved as
 * expected, the state counts, and for a counterexample the failed assertion and its events.
 */
export function runConfig(config, { traces, fast = false, timeLimitS } = {}) {
  const dir = mkdtempSync(join(tmpdir(), `mpl-spin-${config.name}-`));
  const started = Date.now();
  try {
    for (const file of readdirSync(SPEC)) if (file.endsWith('.pml')) copyFileSync(join(SPEC, file), join(dir, file));
    const run = (cmd, args) => execFileSync(cmd, args, { cwd: dir, encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'], maxBuffer: 64 * 1024 * 1024 });
    run('spin', [...config.defines, '-a', config.model]);
    // -O0 compiles in a third of -O2's time: the small suite's searches are short, so it wins there.
    const optimise = fast ? '-O0' : config.expect === 'holds' ? '-O2' : '-O1';
    run('gcc', [optimise, '-w', '-DSAFETY', '-DCOLLAPSE', `-DMEMLIM=${MEMLIM_MB}`, '-o', 'pan', 'pan.c']);
    const pan = spawnSync('./pan', ['-m100000'], { cwd: dir, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024, timeout: timeLimitS ? timeLimitS * 1000 : undefined });
    if (pan.error || pan.signal) throw new Error(`${config.name}: pan did not finish${timeLimitS ? ` within ${timeLimitS} s` : ''} (${pan.error?.message ?? pan.signal})`);
    const out = `${pan.stdout}${pan.stderr}`;
    const errors = field(out, /errors: (\d+)/);
    const result = {
      name: config.name,
      model: config.model,
      defines: config.defines,
      expect: config.expect,
      why: config.why,
      states: field(out, /(\d+) states, stored/),
      transitions: field(out, /(\d+) transitions/),
      depth: field(out, /depth reached (\d+)/),
      memoryMb: field(out, /([\d.]+)\s+total actual memory usage/),
      seconds: (Date.now() - started) / 1000,
      incomplete: /reached -DMEMLIM bound|max search depth too small/.test(out) && errors === 0,
      errors,
      assertion: out.match(/assertion violated (.*) \(at depth/)?.[1],
      events: undefined,
      ok: false,
    };
    if (errors === undefined) throw new Error(`pan gave no result:\n${out}`);
    if (errors > 0) {
      const trail = spawnSync('spin', [...config.defines, '-t', config.model], { cwd: dir, encoding: 'utf8', maxBuffer: 64 * 1024 * 1024 });
      result.events = eventsOf(trail.stdout);
      if (traces) {
        mkdirSync(traces, { recursive: true });
        writeFileSync(join(traces, `${config.name}.events`), `${result.events.join('\n')}\n`);
      }
    }
    // A counterexample must break the invariant the configuration is about, not another one.
    result.ok = config.expect === 'holds' ? errors === 0 && !result.incomplete : errors > 0 && INVARIANT_PATTERNS[config.invariant].test(result.assertion ?? '');
    return result;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

function line(result) {
  const states = result.states === undefined ? '?' : result.states.toLocaleString('en-US');
  const verdict = result.expect === 'holds' ? (result.errors === 0 ? (result.incomplete ? 'INCOMPLETE' : 'holds') : 'COUNTEREXAMPLE') : result.errors > 0 ? 'counterexample' : 'NO COUNTEREXAMPLE';
  return `${result.ok ? 'ok  ' : 'FAIL'} ${result.name.padEnd(32)} ${verdict.padEnd(18)} ${states.padStart(12)} states ${String(result.depth ?? '?').padStart(5)} depth ${result.seconds.toFixed(1).padStart(7)} s  ${result.why}`;
}

async function main() {
  const args = parseArgs(process.argv.slice(2));
  for (const tool of ['spin', 'gcc']) {
    if (!hasTool(tool)) {
      console.error(`spec/check.mjs: ${tool} is not on PATH. Install Debian's spin and gcc packages (apt-get install spin gcc), or run .ci/run, which installs them.`);
      process.exit(2);
    }
  }
  const configs = CONFIGS.filter((c) => (args.only ? args.only.includes(c.name) : c.suites.includes(args.suite)));
  if (configs.length === 0) throw new Error('no configuration selected');
  const results = [];
  for (const config of configs) {
    const result = runConfig(config, { traces: args.traces, fast: args.suite === 'ci', timeLimitS: args.timeLimitS });
    results.push(result);
    console.log(line(result));
    if (!result.ok && result.assertion) console.log(`     ${result.assertion}`);
  }
  if (args.json) writeFileSync(args.json, JSON.stringify(results, null, 2));
  const failed = results.filter((r) => !r.ok);
  const total = results.reduce((sum, r) => sum + (r.states ?? 0), 0);
  console.log(`${results.length - failed.length}/${results.length} as expected; ${total.toLocaleString('en-US')} states in all, ${results.reduce((s, r) => s + r.seconds, 0).toFixed(0)} s.`);
  process.exit(failed.length === 0 ? 0 : 1);
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  main().catch((error) => {
    console.error(error);
    process.exit(2);
  });
}
