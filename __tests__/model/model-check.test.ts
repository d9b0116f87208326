/**
 * The model check in the suite (issue 19): spin searches the small configurations of spec/
 * exhaustively (`node spec/check.mjs --suite ci`: each model compiled to pan with gcc, every
 * reachable state visited, each search bounded in time) and every one behaves as spec/README.md
 * says:
 *  - the protocol as built holds every invariant (LEASE, MUTEX, FENCE in core.pml; WINDOW in
 *    guard.pml's atomic mode and only the README's windows W1-W3 in check mode; ALL-OR-NOTHING in
 *    many.pml; RETURNED and ONE-CLAIMANT in next.pml; SERIAL in upsert.pml);
 *  - each broken variant (the old acquire, a lease timed from the reply, an upsert narrowed in
 *    check mode, a release without its token, a guard whose check is a read, lockMany without the
 *    release of a refused round, lockNext without its recheck, ...) makes spin find a
 *    counterexample, and that counterexample breaks the invariant the variant is about (so the
 *    model is shown able to fail);
 *  - each documented check-mode window (W1 expiry, W2 a release by another request, W3 a
 *    non-holder's write checked while free, the upsert's) is reachable.
 * `npm run model` runs the full suite at the bounds of spec/README.md.
 *
 * Needs spin and gcc (.ci/run installs them): without them it skips, saying so.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { hasSpin } from './support/tools';

interface Result {
  name: string;
  expect: 'holds' | 'fails';
  errors: number;
  states: number;
  incomplete: boolean;
  assertion: string | undefined;
  ok: boolean;
}

const SPEC = join(__dirname, '..', '..', 'spec');
const it = hasSpin() ? test : test.skip;
if (!hasSpin()) process.stdout.write('[skipped] model check: spin or gcc is not on PATH (apt-get install spin gcc; .ci/run installs them)\n');

describe('the checked model (spec/, small bounds)', () => {
  it(
    'every configuration of the small suite behaves as expected: the protocol holds, each broken variant fails',
    () => {
      const dir = mkdtempSync(join(tmpdir(), 'mpl-model-check-'));
      try {
        const json = join(dir, 'results.json');
        const run = spawnSync(process.execPath, [join(SPEC, 'check.mjs'), '--suite', 'ci', '--time-limit', '240', '--json', json], { encoding: 'utf8', timeout: 590_000 });
        process.stdout.write(run.stdout);
        if (run.status !== 0 && run.status !== 1) throw new Error(`spec/check.mjs failed (exit ${run.status}):\n${run.stdout}${run.stderr}`);
        const results = JSON.parse(readFileSync(json, 'utf8')) as Result[];
        const summary = (r: Result) => ({ name: r.name, expect: r.expect, counterexample: r.errors > 0, incomplete: r.incomplete, ok: r.ok });
        expect(results.map(summary)).toEqual(results.map((r) => ({ name: r.name, expect: r.expect, counterexample: r.expect === 'fails', incomplete: false, ok: true })));
        // The suite really searched: the protocol's configurations visit many states each.
        for (const r of results.filter((x) => x.expect === 'holds' && x.name !== 'upsert' && x.name !== 'upsert-atomic')) expect(r.states).toBeGreaterThan(10_000);
        // The broken variants the issue names are among them.
        expect(results.map((r) => r.name)).toEqual(expect.arrayContaining(['old-acquire', 'extend-from-reply', 'upsert-narrowed', 'window-W1', 'window-W2', 'window-W3', 'ordered', 'ordered-no-bound', 'ordered-reserve-all', 'ordered-listed-order']));
        expect(run.status).toBe(0);
      } finally {
        rmSync(dir, { recursive: true, force: true });
      }
    },
    600_000,
  );
});
