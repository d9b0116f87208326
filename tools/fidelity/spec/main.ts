/**
 * `npm run fidelity:spec -- <checkout of mongodb/specifications> [--filter SUBSTRING] [--topology replset|standalone] [--verbose]`
 *
 * Runs the unified-format test files of the CRUD, transactions, change-streams, retryable-writes and
 * sessions specifications against a fresh emulator per file and prints pass/fail per file and the
 * totals. Development tooling: the suites are read from the checkout given on the command line and
 * nothing of them is part of this repository.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { EJSON, type Document } from 'bson';
import { MongoClient } from 'mongodb';
import { startEmulator } from '../../../test-backend/emulator';
import { MatchError } from './match';
import { describeError, requirementsMet, SkipTest, UnifiedRun } from './runner';

const SUITES = ['source/crud/tests/unified', 'source/transactions/tests/unified', 'source/change-streams/tests/unified', 'source/retryable-writes/tests/unified', 'source/sessions/tests'];
const TEST_TIMEOUT_MS = 30_000;

interface Args {
  root: string;
  filter?: string;
  topology: 'replset' | 'standalone';
  verbose: boolean;
}

function parseArgs(argv: string[]): Args {
  const out: Args = { root: '', topology: 'replset', verbose: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === '--filter') out.filter = argv[++i];
    else if (a === '--topology') out.topology = argv[++i] as Args['topology'];
    else if (a === '--verbose') out.verbose = true;
    else out.root = a;
  }
  if (!out.root) throw new Error('usage: npm run fidelity:spec -- <checkout of mongodb/specifications> [--filter S] [--topology replset|standalone] [--verbose]');
  return out;
}

function jsonFiles(dir: string): string[] {
  let entries: string[];
  try {
    entries = readdirSync(dir);
  } catch {
    return [];
  }
  return entries.filter((f) => f.endsWith('.json') && statSync(join(dir, f)).isFile()).sort().map((f) => join(dir, f));
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([p, new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new MatchError(`${what}: no answer within ${ms} ms (hang)`)), ms)))]).finally(() => clearTimeout(timer));
}

type Outcome = { name: string; status: 'pass' | 'fail' | 'skip'; why?: string };

async function runFile(file: string, args: Args): Promise<Outcome[]> {
  const spec = EJSON.parse(readFileSync(file, 'utf8'), { relaxed: true }) as Document;
  const topo = args.topology === 'replset' ? 'replicaset' : 'single';
  const tests = (spec.tests as Document[]) ?? [];
  if (!requirementsMet(spec.runOnRequirements as Document[] | undefined, topo)) return tests.map((t) => ({ name: t.description as string, status: 'skip', why: 'runOnRequirements' }));
  const emu = await startEmulator({ port: 0, topology: args.topology });
  const internal = new MongoClient(emu.uri, { serverSelectionTimeoutMS: 5000 });
  await internal.connect();
  const out: Outcome[] = [];
  try {
    for (const t of tests) {
      const name = t.description as string;
      if (t.skipReason) {
        out.push({ name, status: 'skip', why: String(t.skipReason) });
        continue;
      }
      if (!requirementsMet(t.runOnRequirements as Document[] | undefined, topo)) {
        out.push({ name, status: 'skip', why: 'runOnRequirements' });
        continue;
      }
      const run = new UnifiedRun(emu.uri, internal);
      try {
        await withTimeout(runTest(spec, t, run, internal), TEST_TIMEOUT_MS, name);
        out.push({ name, status: 'pass' });
      } catch (e) {
        if (e instanceof SkipTest) out.push({ name, status: 'skip', why: e.message });
        else out.push({ name, status: 'fail', why: e instanceof MatchError ? e.message : describeError(e) });
      } finally {
        for (const name of run.failPointsSet) await internal.db('admin').command({ configureFailPoint: name, mode: 'off' }).catch(() => undefined);
        await withTimeout(run.close(), 10_000, 'closing entities').catch(() => undefined);
      }
    }
  } finally {
    await internal.close(true).catch(() => undefined);
    await emu.stop();
  }
  return out;
}

async function runTest(spec: Document, t: Document, run: UnifiedRun, internal: MongoClient): Promise<void> {
  for (const data of (spec.initialData as Document[] | undefined) ?? []) {
    const db = internal.db(data.databaseName as string);
    await db.collection(data.collectionName as string).drop({ writeConcern: { w: 'majority' } }).catch(() => undefined);
    const docs = (data.documents as Document[]) ?? [];
    if (docs.length) await db.collection(data.collectionName as string).insertMany(docs, { writeConcern: { w: 'majority' } });
    else await db.createCollection(data.collectionName as string, { writeConcern: { w: 'majority' }, ...((data.createOptions as Document) ?? {}) });
  }
  await run.createEntities((spec.createEntities as Document[]) ?? []);
  for (const op of (t.operations as Document[]) ?? []) await run.runOperation(op);
  if (t.expectEvents) run.checkEvents(t.expectEvents as Document[]);
  for (const o of (t.outcome as Document[] | undefined) ?? []) {
    const docs = await internal.db(o.databaseName as string).collection(o.collectionName as string).find({}, { sort: { _id: 1 } }).toArray();
    const { match } = await import('./match');
    const expected = o.documents as Document[];
    if (docs.length !== expected.length) throw new MatchError(`outcome ${String(o.collectionName)}: expected ${expected.length} documents, got ${docs.length}: ${EJSON.stringify(docs)}`);
    expected.forEach((e, i) => match(e, docs[i], { root: false, ctx: run, path: `outcome[${i}]` }));
  }
}

async function main(): Promise<void> {
  const args = parseArgs(process.argv.slice(2));
  const files = SUITES.flatMap((s) => jsonFiles(join(args.root, s))).filter((f) => !args.filter || f.includes(args.filter));
  const totals = { pass: 0, fail: 0, skip: 0 };
  const started = Date.now();
  for (const file of files) {
    const rel = relative(args.root, file);
    let outcomes: Outcome[];
    try {
      outcomes = await runFile(file, args);
    } catch (e) {
      outcomes = [{ name: '<file>', status: 'fail', why: describeError(e) }];
    }
    const count = (s: Outcome['status']): number => outcomes.filter((o) => o.status === s).length;
    totals.pass += count('pass');
    totals.fail += count('fail');
    totals.skip += count('skip');
    const verdict = count('fail') ? 'FAIL' : count('pass') ? 'PASS' : 'SKIP';
    process.stdout.write(`${verdict} ${rel}: ${count('pass')} passed, ${count('fail')} failed, ${count('skip')} skipped\n`);
    for (const o of outcomes) {
      if (o.status === 'fail') process.stdout.write(`    FAIL ${o.name}: ${String(o.why).slice(0, 400)}\n`);
      else if (args.verbose && o.status === 'skip') process.stdout.write(`    skip ${o.name}: ${o.why}\n`);
    }
  }
  const ran = totals.pass + totals.fail;
  process.stdout.write(`\nTOTAL: ${totals.pass} passed, ${totals.fail} failed, ${totals.skip} skipped; ${ran ? ((100 * totals.pass) / ran).toFixed(1) : '0'}% of the tests that ran pass (${files.length} files, ${((Date.now() - started) / 1000).toFixed(0)} s)\n`);
  process.exitCode = totals.fail ? 1 : 0;
}

main().catch((e) => {
  process.stderr.write(`${(e as Error).stack ?? String(e)}\n`);
  process.exit(2);
});
