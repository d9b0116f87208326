/**
 * Documentation that is true (issue 11, item 8; issue 18: the README and the guides in docs/).
 * README.md, CONTRIBUTING.md and every guide in docs/ are checked as code:
 *  - the README stays short (at most 300 lines: the rest belongs in the guides);
 *  - every TypeScript block type-checks against the sources, and the blocks marked
 *    `<!-- doc-test: run -->` run against the test backend (support/readme-blocks.ts); page
 *    scripts (`<!-- doc-test: browser -->`) type-check with the DOM's types;
 *  - neither the README nor a guide hides code in a fence the test does not read (```js, ```javascript, ...);
 *  - the shapes it documents (getLock, heldLock, lockStatus, the lock record) are the real ones;
 *  - every export of the package is documented;
 *  - its links resolve for npm readers (in-page anchors, absolute URLs, files in the tarball);
 *  - its benchmark figures are the ones in bench/results/latest.json;
 *  - the story the quick start promises is there and matches the demo.
 */
import { readFileSync } from 'node:fs';
import { dirname, join, normalize, relative } from 'node:path';
import * as os from 'node:os';
import mongoose from 'mongoose';
import * as ts from 'typescript';
import * as pkg from '../../src';
import { diagnosticsFigures, identicalFigures, readLatestDiagnosticsResults, readLatestIdenticalResults, readLatestManyResults, readLatestNextResults, readLatestResults, readmeFigures, readmeManyFigures, readmeNextFigures } from '../../bench/readme-tables';
import { testUri } from '../../test-backend/test-env';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { onReplicaSet } from '../support/topology';
import { ROOT, compileBlock, describeBlock, docFiles, extractBlocks, guideFiles, readDoc, readReadme, typeCheck, typeCheckBrowser } from './support/readme-blocks';
import { createReadmeContext } from './support/readme-context';

const readme = readReadme();
const files = docFiles();
const texts = new Map(files.map((file) => [file, readDoc(file)] as const));
/** Every document checked, one after the other (for facts that may live in any of them). */
const allDocs = [...texts.values()].join('\n');
const blocks = files.flatMap((file) => extractBlocks(texts.get(file)!, file));
const runnable = blocks.filter((block) => block.run);

/** Markdown without its fenced code blocks (prose, tables, headings). */
const withoutCode = (markdown: string): string => markdown.replace(/^```[\s\S]*?^```$/gm, '');
const prose = withoutCode(allDocs);

/** The text of one section of `markdown`: from its heading to the next heading of the same or a higher level. */
function sectionOf(markdown: string, heading: string): string | undefined {
  const lines = markdown.split('\n');
  const start = lines.findIndex((line) => line.replace(/^#+\s*/, '') === heading && line.startsWith('#'));
  if (start < 0) return undefined;
  const level = /^#+/.exec(lines[start]!)![0].length;
  const end = lines.findIndex((line, i) => i > start && /^#+\s/.test(line) && /^#+/.exec(line)![0].length <= level);
  return lines.slice(start, end < 0 ? undefined : end).join('\n');
}

/** A section of the README, or else of the first guide that has it. */
function section(heading: string): string {
  for (const file of files) {
    const found = sectionOf(texts.get(file)!, heading);
    if (found !== undefined) return found;
  }
  throw new Error(`no document has a section "${heading}"`);
}

/** GitHub's anchor for a heading. */
const slug = (heading: string): string =>
  heading
    .toLowerCase()
    .replace(/[^\p{L}\p{N}\s_-]/gu, '')
    .replace(/\s/g, '-');

/** Field names of the first `{ a, b?, c }` after `marker` in the documentation. */
function documentedFields(marker: string): string[] {
  const at = allDocs.indexOf(marker);
  if (at < 0) throw new Error(`the documentation does not contain ${JSON.stringify(marker)}`);
  const braces = /\{([^{}]*)\}/.exec(allDocs.slice(at))!;
  return braces[1]!
    .split(',')
    .map((field) => field.trim().replace(/\?$/, ''))
    .filter(Boolean)
    .sort();
}

describe('TypeScript blocks of the README and the guides', () => {
  test('there are blocks, and the runnable ones are marked', () => {
    expect(blocks.length).toBeGreaterThanOrEqual(11);
    expect(runnable.length).toBeGreaterThanOrEqual(10);
    // The README and every guide with code run some of it.
    expect(blocks.filter((block) => block.file === 'README.md' && block.run).length).toBeGreaterThanOrEqual(5);
  });

  test('the guides under docs/ are read too: their blocks are collected, and none hides code in a fence this test does not check', () => {
    const guides = guideFiles();
    expect(guides).toContain('docs/web-apps.md');
    const webApps = blocks.filter((block) => block.file === 'docs/web-apps.md');
    expect(webApps.filter((block) => block.run).map((block) => block.code)).toEqual(expect.arrayContaining([expect.stringContaining("app.post('/items/:id/keep-alive'")]));
    expect(webApps.filter((block) => block.browser).map((block) => block.code)).toEqual([expect.stringContaining('/keep-alive`')]);
    // Code in any other language than these is not type-checked: write it as ```ts (or ```sh, ...).
    // The compatibility record is not a guide: its ```js blocks are command shapes with
    // placeholders (`<id>`), checked against the recorder by compatibility-record.test.ts.
    const checked = ['ts', 'typescript', 'sh', 'json', 'text', 'html'];
    // The language is the info string's first word (```ts title="x" is TypeScript, extracted as such).
    const unchecked = ['README.md', ...guides, 'CONTRIBUTING.md']
      .filter((file) => file !== 'docs/mongodb-compatibility.md')
      .flatMap((file) => [...readFileSync(join(ROOT, file), 'utf8').matchAll(/^```([^\s`]+)/gm)].map((m) => `${file}: \`\`\`${m[1]!}`))
      .filter((fence) => !checked.some((lang) => fence.endsWith(`\`\`\`${lang}`)));
    expect(unchecked).toEqual([]);
  });

  test('every block type-checks against the sources', () => {
    expect(typeCheck(blocks)).toEqual([]);
  }, 120_000);

  test('every page script type-checks with the DOM types', () => {
    expect(blocks.some((block) => block.browser)).toBe(true);
    expect(typeCheckBrowser(blocks)).toEqual([]);
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
      if (block.replicaSetOnly && !onReplicaSet()) {
        console.log(`${block.file}:${block.line} skipped on a standalone server: it uses a transaction, which needs a replica set`);
        return;
      }
      const run = compileBlock(block, resolve);
      const context = await createReadmeContext(conn.connection);
      try {
        await run(context);
      } catch (error) {
        throw new Error(`${block.file} block at line ${block.line} failed: ${(error as Error).stack ?? String(error)}`);
      }
    }, 30_000);
  });
});

describe('documentation facts', () => {
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

  test('the README is for users: at most 300 lines, the rest in the guides', () => {
    expect(readme.split('\n').length).toBeLessThanOrEqual(300);
    for (const file of files.filter((f) => f.startsWith('docs/'))) expect({ file, linked: readme.includes(`](${file}`) }).toEqual({ file, linked: true });
  });

  test('links resolve on GitHub and for npm readers: anchors exist, files are in the package', () => {
    const { files: published } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { files: string[] };
    const inPackage = (path: string) =>
      published.some((entry) =>
        entry.includes('*') ? new RegExp(`^${entry.replace(/[.]/g, '\\.').replace(/\*/g, '[^/]*')}$`).test(path) : path === entry || path.startsWith(`${entry}/`),
      );
    // Headings' anchors, and explicit ones (`<a id="...">`, as the compatibility record names its commands).
    const anchors = (markdown: string) =>
      new Set([
        ...withoutCode(markdown)
          .split('\n')
          .filter((line) => /^#{1,6}\s/.test(line))
          .map((line) => slug(line.replace(/^#+\s*/, ''))),
        ...[...markdown.matchAll(/<a (?:id|name)="([^"]+)"/g)].map((m) => m[1]!),
      ]);
    const broken: string[] = [];
    let count = 0;
    for (const file of files) {
      // Only files the package ships are read on npm; CONTRIBUTING.md is read in the repository.
      const text = withoutCode(texts.get(file)!);
      for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        count++;
        if (/^https:\/\//.test(target!)) continue;
        const [path, anchor] = target!.split('#') as [string, string | undefined];
        const resolved = path === '' ? file : normalize(join(dirname(file), path));
        if (resolved.startsWith('..')) {
          broken.push(`${file}: ${target} (outside the repository)`);
          continue;
        }
        let content: string;
        try {
          content = readFileSync(join(ROOT, resolved), 'utf8');
        } catch {
          broken.push(`${file}: ${target} (no such file)`);
          continue;
        }
        if (inPackage(file) && !inPackage(resolved)) broken.push(`${file}: ${target} (${relative('.', resolved)} is not in the package)`);
        if (anchor !== undefined && !anchors(content).has(anchor)) broken.push(`${file}: ${target} (no such heading)`);
      }
    }
    expect(count).toBeGreaterThan(30);
    expect(broken).toEqual([]);
  });

  test('no references to files that are not part of the project (PRODUCT.md lives outside it)', () => {
    // The compatibility record cites the product's properties by number, as its audit trail does.
    expect(files.filter((file) => file !== 'docs/mongodb-compatibility.md' && texts.get(file)!.includes('PRODUCT.md'))).toEqual([]);
  });

  // The figures live in the performance and evidence guide.
  const evidence = texts.get('docs/evidence.md')!;

  test('the benchmark figures are those of bench/results/latest.json, all from one run', () => {
    const missing = readmeFigures(readLatestResults()).filter((line) => !evidence.includes(line));
    expect(missing).toEqual([]);
  });

  test('benchmark 1b\'s figures are those of bench/results/latest-identical.json', () => {
    const figures = identicalFigures(readLatestIdenticalResults());
    expect(figures.length).toBeGreaterThanOrEqual(5);
    expect(figures.filter((line) => !evidence.includes(line))).toEqual([]);
  });

  test('the lockNext figures (benchmark 8) are those of its latest run', () => {
    const missing = readmeNextFigures(readLatestNextResults()).filter((line) => !evidence.includes(line));
    expect(missing).toEqual([]);
  });

  test('the lockMany figures are those of bench/results/latest-many.json', () => {
    const figures = readmeManyFigures(readLatestManyResults());
    expect(figures.length).toBeGreaterThanOrEqual(4);
    expect(figures.filter((line) => !evidence.includes(line))).toEqual([]);
  });

  test('the diagnostics channels\' cost is that of bench/results/latest-diagnostics.json', () => {
    const figures = diagnosticsFigures(readLatestDiagnosticsResults());
    expect(figures).toHaveLength(2);
    const guide = texts.get('docs/observability.md')!;
    expect(figures.filter((line) => !guide.includes(line))).toEqual([]);
  });

  test('the quick start is two commands, and the story it promises is there, step by step as the demo tells it', () => {
    const quickStart = sectionOf(readme, 'Quick start')!;
    const commands = /```sh\n([\s\S]*?)```/.exec(quickStart)![1]!.trim().split('\n');
    expect(commands.map((line) => line.replace(/\s+#.*$/, ''))).toEqual(['npm ci && npm run demo', 'npm test']);
    expect(quickStart).toContain('"The story"');

    const story = sectionOf(readme, 'The story')!;
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
    expect(allDocs).not.toMatch(/Sessions that end without a logout \(expiry/);
  });
});
