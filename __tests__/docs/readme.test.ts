/**
 * Documentation that is true (issue 11, item 8). README.md is checked as code:
 *  - every TypeScript block type-checks against the sources, and the blocks marked
 *    `<!-- doc-test: run -->` run against the test backend (support/readme-blocks.ts);
 *  - the shapes it documents (getLock, heldLock, lockStatus, the lock record) are the real ones;
 *  - every export of the package is documented;
 *  - its links resolve for npm readers (in-page anchors, absolute URLs, files in the tarball);
 *  - its benchmark figures are the ones in bench/results/latest.json;
 *  - the story the quick start promises is there and matches the demo.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import * as os from 'node:os';
import mongoose from 'mongoose';
import * as ts from 'typescript';
import * as pkg from '../../src';
import { readLatestManyResults, readLatestNextResults, readLatestResults, readmeFigures, readmeManyFigures, readmeNextFigures } from '../../bench/readme-tables';
import { testUri } from '../../test-backend/test-env';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { ROOT, compileBlock, describeBlock, extractBlocks, readReadme, typeCheck } from './support/readme-blocks';
import { createReadmeContext } from './support/readme-context';

const readme = readReadme();
const blocks = extractBlocks(readme);
const runnable = blocks.filter((block) => block.run);

/** The README without its fenced code blocks (prose, tables, headings). */
const prose = readme.replace(/^```[\s\S]*?^```$/gm, '');

/** The text of one section: from its heading to the next heading of the same or a higher level. */
function section(heading: string): string {
  const lines = readme.split('\n');
  const start = lines.findIndex((line) => line.replace(/^#+\s*/, '') === heading && line.startsWith('#'));
  if (start < 0) throw new Error(`README has no section "${heading}"`);
  const level = /^#+/.exec(lines[start]!)![0].length;
  const end = lines.findIndex((line, i) => i > start && /^#+\s/.test(line) && /^#+/.exec(line)![0].length <= level);
  return lines.slice(start, end < 0 ? undefined : end).join('\n');
}

/** Field names of the first `{ a, b?, c }` after `marker` in the README. */
function documentedFields(marker: string): string[] {
  const at = readme.indexOf(marker);
  if (at < 0) throw new Error(`README does not contain ${JSON.stringify(marker)}`);
  const braces = /\{([^{}]*)\}/.exec(readme.slice(at))!;
  return braces[1]!
    .split(',')
    .map((field) => field.trim().replace(/\?$/, ''))
    .filter(Boolean)
    .sort();
}

describe('README TypeScript blocks', () => {
  test('there are blocks, and the runnable ones are marked', () => {
    expect(blocks.length).toBeGreaterThanOrEqual(11);
    expect(runnable.length).toBeGreaterThanOrEqual(10);
  });

  test('every block type-checks against the sources', () => {
    expect(typeCheck(blocks)).toEqual([]);
  }, 120_000);

  describe('the runnable blocks run against the test backend', () => {
    const db = testDatabase('readme');
    let conn: MonitoredConnection;
    const globalPlugins = (mongoose as unknown as { plugins: unknown[] }).plugins;
    const pluginsBefore = [...globalPlugins];

    beforeAll(async () => {
      conn = await connect(db.name);
      // Blocks that compile their own model (`model('WorkItem', ...)`) use Mongoose's default connection.
      const workaround = Number(mongoose.version.split('.')[0]) >= 9 ? { runtimeAdapters: { os } } : {};
      await mongoose.connect(testUri(), { dbName: db.name, ...workaround } as mongoose.ConnectOptions);
      // A snippet that uses a field its schema does not have must fail, not be silently stripped.
      mongoose.set('strict', 'throw');
      mongoose.set('strictQuery', 'throw');
    });

    afterEach(() => {
      globalPlugins.splice(0, globalPlugins.length, ...pluginsBefore);
      for (const name of mongoose.modelNames()) mongoose.deleteModel(name);
    });

    afterAll(async () => {
      mongoose.set('strict', true);
      mongoose.set('strictQuery', false);
      await db.drop(conn.connection);
      await conn.close();
      await mongoose.disconnect();
    });

    const modules: Record<string, unknown> = { 'mongoose-pessimistic-lock': pkg };
    // The snippets' own imports resolve through this test's module registry (the same mongoose).
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const resolve = (name: string): unknown => modules[name] ?? require(name);

    test.each(runnable.map((block) => [describeBlock(block), block] as const))('%s', async (_name, block) => {
      const run = compileBlock(block, resolve);
      const context = await createReadmeContext(conn.connection);
      try {
        await run(context);
      } catch (error) {
        throw new Error(`README block at line ${block.line} failed: ${(error as Error).stack ?? String(error)}`);
      }
    }, 30_000);
  });
});

describe('README facts', () => {
  let conn: MonitoredConnection;
  const db = testDatabase('readmefacts');
  beforeAll(async () => {
    conn = await connect(db.name);
  });
  afterAll(async () => {
    await db.drop(conn.connection);
    await conn.close();
  });

  test("getLock's, heldLock()'s and lockStatus's documented shapes are the real ones", async () => {
    const { WorkItem, id } = await createReadmeContext(conn.connection);
    const item = await WorkItem.lock(id, 'readme-owner', { label: 'Alice' });
    expect(documentedFields('| `Model.getLock(id)` |')).toEqual(Object.keys((await WorkItem.getLock(id))!).sort());
    expect(documentedFields('| `doc.heldLock()` |')).toEqual(Object.keys(item.heldLock()!).sort());
    expect(documentedFields('returns, in the order of\n`ids`, the unexpired lock of each')).toEqual(Object.keys((await WorkItem.lockStatus([id]))[0]!).sort());
    await item.unlock();
  });

  test('the lock record fields in "How locking works" are the lock schema\'s', async () => {
    const { WorkItem } = await createReadmeContext(conn.connection);
    expect(documentedFields('A lock is one record in the sibling collection')).toEqual(Object.keys(WorkItem.lockModel().schema.paths).sort());
  });

  test('every export of the package is documented', () => {
    const source = ts.createSourceFile('index.ts', readFileSync(join(ROOT, 'src', 'index.ts'), 'utf8'), ts.ScriptTarget.ES2022);
    const names: string[] = [];
    source.forEachChild((node) => {
      if (ts.isExportDeclaration(node) && node.exportClause && ts.isNamedExports(node.exportClause)) {
        for (const element of node.exportClause.elements) names.push(element.name.text);
      }
    });
    expect(names.length).toBeGreaterThan(40);
    const codeSpans = [...prose.matchAll(/`([^`]+)`/g)].map((m) => m[1]!);
    const undocumented = names.filter((name) => !codeSpans.some((span) => new RegExp(`(^|[^A-Za-z0-9_])${name}([^A-Za-z0-9_]|$)`).test(span)));
    expect(undocumented).toEqual([]);
  });

  test('links resolve for npm readers: in-page anchors exist, files are in the package', () => {
    const { files } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { files: string[] };
    const slugs = new Set(
      readme
        .split('\n')
        .filter((line) => /^#{1,6}\s/.test(line))
        .map((line) =>
          line
            .replace(/^#+\s*/, '')
            .toLowerCase()
            .replace(/[^\p{L}\p{N}\s_-]/gu, '')
            .replace(/\s/g, '-'),
        ),
    );
    const targets = [...prose.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!);
    expect(targets.length).toBeGreaterThan(10);
    const broken = targets.filter((target) => {
      if (/^https:\/\//.test(target)) return false;
      if (target.startsWith('#')) return !slugs.has(target.slice(1));
      return !files.some((entry) => target === entry || target.startsWith(`${entry}/`));
    });
    expect(broken).toEqual([]);
    // And the files linked from the package exist.
    for (const target of targets.filter((t) => !t.startsWith('#') && !t.startsWith('https://'))) expect(() => readFileSync(join(ROOT, target))).not.toThrow();
  });

  test('no references to files that are not part of the project (PRODUCT.md lives outside it)', () => {
    expect(readme).not.toContain('PRODUCT.md');
  });

  test('the benchmark figures are those of bench/results/latest.json, all from one run', () => {
    const missing = readmeFigures(readLatestResults()).filter((line) => !readme.includes(line));
    expect(missing).toEqual([]);
  });

  test('the lockNext figures (benchmark 8) are those of its latest run', () => {
    const missing = readmeNextFigures(readLatestNextResults()).filter((line) => !readme.includes(line));
    expect(missing).toEqual([]);
  });

  test('the lockMany figures are those of bench/results/latest-many.json', () => {
    const figures = readmeManyFigures(readLatestManyResults());
    expect(figures.length).toBeGreaterThanOrEqual(4);
    expect(figures.filter((line) => !readme.includes(line))).toEqual([]);
  });

  test('the quick start is two commands, and the story it promises is there, step by step as the demo tells it', () => {
    const quickStart = section('Quick start');
    const commands = /```sh\n([\s\S]*?)```/.exec(quickStart)![1]!.trim().split('\n');
    expect(commands.map((line) => line.replace(/\s+#.*$/, ''))).toEqual(['npm ci && npm run demo', 'npm test']);
    expect(quickStart).toContain('"The story"');

    const story = section('The story');
    const demo = readFileSync(join(ROOT, 'examples', 'demo.ts'), 'utf8');
    const steps = [...demo.matchAll(/console\.log\('\\n(\d+)\. ([^']+)'\)/g)].map((m) => [m[1]!, m[2]!]);
    expect(steps.length).toBeGreaterThanOrEqual(5);
    let from = 0;
    for (const [n, title] of steps) {
      const at = story.indexOf(`${n}. ${title}`, from);
      expect({ step: `${n}. ${title}`, found: at >= 0 }).toEqual({ step: `${n}. ${title}`, found: true });
      from = at;
    }
  });

  test("connect-mongo's 'destroy' is described as what it is: store.destroy(sid), not expiry", () => {
    const sessionEnd = section('Releasing on session end');
    expect(sessionEnd).toContain('store.destroy(sid)');
    expect(sessionEnd).toContain('emits nothing when a session expires');
    expect(readme).not.toMatch(/Sessions that end without a logout \(expiry/);
  });
});
