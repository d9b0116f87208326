/**
 * README and guide snippets as code: every ```ts block of README.md and of each guide under docs/
 * (DOC_FILES) is extracted, wrapped into a module, type-checked against the sources (as if
 * imported from 'mongoose-pessimistic-lock'), and the blocks marked `<!-- doc-test: run -->` on
 * the line before the fence are executed against the test backend. Blocks marked
 * `<!-- doc-test: browser -->` are page scripts: type-checked on their own with the DOM's types
 * (see typeCheckBrowser), not run here.
 *
 * A block is wrapped like this, so snippets can use the README's free names (`req`, `app`, `id`,
 * `WorkItem`, ...; see readme-context.ts), declare their own (an inner scope may shadow them),
 * use top-level `await`, and import anywhere (imports are hoisted):
 *
 *   import type { ReadmeContext } from './support/readme-context';
 *   <the block's imports>
 *   export async function run(__context: ReadmeContext): Promise<void> {
 *     const { WorkItem, id, ... } = __context;
 *     {
 *       <the block's other lines, at their README line numbers>
 *     }
 *   }
 */
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, relative } from 'node:path';
import * as ts from 'typescript';
import { CONTEXT_NAMES } from './readme-context';

export const ROOT = join(__dirname, '..', '..', '..');
const DOCS_DIR = join(ROOT, '__tests__', 'docs');

export interface ReadmeBlock {
  /** The Markdown file, relative to the project root (README.md, docs/web-apps.md, ...). */
  file: string;
  /** 1-based index among the file's TypeScript blocks. */
  index: number;
  /** Line in `file` of the first code line. */
  line: number;
  code: string;
  run: boolean;
  /** Marked `<!-- doc-test: run, replica set -->`: it needs transactions, so a standalone server skips it. */
  replicaSetOnly: boolean;
  /** A page script (`<!-- doc-test: browser -->`): type-checked with the DOM's types, not run in Node. */
  browser: boolean;
  /** The generated module's path (virtual: never written to disk). */
  fileName: string;
  source: string;
  /** Generated line (0-based) of the first code line. */
  bodyOffset: number;
}

// A ```ts fence, with or without an info string after the language (```ts title="app.ts":
// CommonMark's info string; GitHub renders it as TypeScript): every one is checked.
const FENCE_OPEN = /^```(ts|typescript)(\s.*)?$/;
const RUN_MARK = /^<!--\s*doc-test:\s*run(,\s*replica set)?\s*-->$/;
const REPLICA_SET_MARK = /^<!--\s*doc-test:\s*run,\s*replica set\s*-->$/;
const BROWSER_MARK = /^<!--\s*doc-test:\s*browser\s*-->$/;

export function readReadme(): string {
  return readFileSync(join(ROOT, 'README.md'), 'utf8');
}

/** The guides under docs/ (every Markdown file there), relative to the root, sorted. */
export function guideFiles(): string[] {
  return readdirSync(join(ROOT, 'docs'))
    .filter((name) => name.endsWith('.md'))
    .sort()
    .map((name) => `docs/${name}`);
}

/** Every Markdown file whose code blocks are checked: the README, CONTRIBUTING.md and the guides. */
export function docFiles(): string[] {
  return ['README.md', 'CONTRIBUTING.md', ...guideFiles()];
}

export function readDoc(file: string): string {
  return readFileSync(join(ROOT, file), 'utf8');
}

/** The blocks of every file of docFiles(). */
export function extractAllBlocks(): ReadmeBlock[] {
  return docFiles().flatMap((file) => extractBlocks(readFileSync(join(ROOT, file), 'utf8'), file));
}

export function extractBlocks(markdown: string, file = 'README.md'): ReadmeBlock[] {
  const lines = markdown.split('\n');
  const blocks: ReadmeBlock[] = [];
  for (let i = 0; i < lines.length; i++) {
    if (!FENCE_OPEN.test(lines[i]!)) continue;
    let end = i + 1;
    while (end < lines.length && lines[end] !== '```') end++;
    if (end >= lines.length) throw new Error(`${file}:${i + 1}: a \`\`\`ts block is never closed`);
    let before = i - 1;
    while (before >= 0 && lines[before]!.trim() === '') before--;
    const mark = before >= 0 ? lines[before]!.trim() : '';
    const index = blocks.length + 1;
    blocks.push({ ...wrap(file, index, i + 2, lines.slice(i + 1, end), RUN_MARK.test(mark), BROWSER_MARK.test(mark)), replicaSetOnly: REPLICA_SET_MARK.test(mark) });
    i = end;
  }
  return blocks;
}

/** Hoists import declarations (possibly multi-line) and wraps the rest, keeping line positions. */
function wrap(file: string, index: number, line: number, codeLines: string[], run: boolean, browser: boolean): Omit<ReadmeBlock, 'replicaSetOnly'> {
  const fileName = join(DOCS_DIR, `${file.replace(/\.md$/, '').replace(/[^A-Za-z0-9]+/g, '-').toLowerCase()}-block-${index}.ts`);
  if (browser) {
    // A page script is a script of its own: no imports, no Node context; wrapped only to keep it a module.
    const header = ['export {};'];
    return { file, index, line, code: codeLines.join('\n'), run: false, browser, fileName, source: [...header, ...codeLines, ''].join('\n'), bodyOffset: header.length };
  }
  const imports: string[] = [];
  const body: string[] = [];
  let inImport = false;
  for (const codeLine of codeLines) {
    if (inImport || /^import\s/.test(codeLine)) {
      imports.push(codeLine);
      body.push('');
      inImport = !/;\s*(\/\/.*)?$/.test(codeLine);
      continue;
    }
    body.push(codeLine);
  }
  const header = [
    "import type { ReadmeContext } from './support/readme-context';",
    ...imports,
    'export async function run(__context: ReadmeContext): Promise<void> {',
    `  const { ${CONTEXT_NAMES.join(', ')} } = __context;`,
    '  {',
  ];
  const source = [...header, ...body, '  }', '}', ''].join('\n');
  return { file, index, line, code: codeLines.join('\n'), run, browser, fileName, source, bodyOffset: header.length };
}

/** Type-checks the Node blocks in one program; returns the diagnostics as `<file>:<line>: <message>`. */
export function typeCheck(blocks: ReadmeBlock[]): string[] {
  return check(
    blocks.filter((block) => !block.browser),
    {},
  );
}

/** Type-checks the page scripts (`<!-- doc-test: browser -->`) with the DOM's types and no Node types. */
export function typeCheckBrowser(blocks: ReadmeBlock[]): string[] {
  return check(
    blocks.filter((block) => block.browser),
    { lib: ['lib.es2022.d.ts', 'lib.dom.d.ts', 'lib.dom.iterable.d.ts'], types: [] },
  );
}

function check(blocks: ReadmeBlock[], overrides: ts.CompilerOptions): string[] {
  const configFile = ts.readConfigFile(join(ROOT, 'tsconfig.json'), ts.sys.readFile);
  const parsed = ts.parseJsonConfigFileContent(configFile.config, ts.sys, ROOT);
  const options: ts.CompilerOptions = {
    ...parsed.options,
    noEmit: true,
    // Snippets show one call and leave the rest out; unused names are not mistakes there.
    noUnusedLocals: false,
    noUnusedParameters: false,
    baseUrl: ROOT,
    paths: { 'mongoose-pessimistic-lock': ['src/index.ts'] },
    ...overrides,
  };
  const virtual = new Map(blocks.map((block) => [block.fileName, block]));
  const host = ts.createCompilerHost(options, true);
  const getSourceFile = host.getSourceFile.bind(host);
  host.getSourceFile = (fileName, languageVersion, onError, shouldCreate) => {
    const block = virtual.get(fileName);
    return block ? ts.createSourceFile(fileName, block.source, languageVersion, true) : getSourceFile(fileName, languageVersion, onError, shouldCreate);
  };
  const fileExists = host.fileExists.bind(host);
  host.fileExists = (fileName) => virtual.has(fileName) || fileExists(fileName);
  const readFile = host.readFile.bind(host);
  host.readFile = (fileName) => virtual.get(fileName)?.source ?? readFile(fileName);

  const program = ts.createProgram([...virtual.keys()], options, host);
  const diagnostics = ts.getPreEmitDiagnostics(program).filter((d) => d.file && virtual.has(d.file.fileName));
  return diagnostics.map((d) => {
    const block = virtual.get(d.file!.fileName)!;
    const { line } = d.file!.getLineAndCharacterOfPosition(d.start ?? 0);
    const where = line >= block.bodyOffset ? `${block.file}:${block.line + line - block.bodyOffset}` : `${block.file} block ${block.index} (imports, from line ${block.line})`;
    return `${where}: ${ts.flattenDiagnosticMessageText(d.messageText, '\n')}`;
  });
}

/** Compiles a block to CommonJS and returns its `run` function, with `resolve` as its `require`. */
export function compileBlock(block: ReadmeBlock, resolve: (name: string) => unknown): (context: unknown) => Promise<void> {
  const { outputText } = ts.transpileModule(block.source, {
    fileName: block.fileName,
    compilerOptions: { module: ts.ModuleKind.CommonJS, target: ts.ScriptTarget.ES2022, esModuleInterop: true, lib: ['lib.es2022.d.ts', 'lib.esnext.disposable.d.ts'] },
  });
  const module = { exports: {} as { run?: (context: unknown) => Promise<void> } };
  // Compiling the README's own code is the point.
  new Function('exports', 'require', 'module', '__filename', '__dirname', outputText)(module.exports, resolve, module, block.fileName, dirname(block.fileName));
  if (typeof module.exports.run !== 'function') throw new Error(`${block.file} block ${block.index}: no run()`);
  return module.exports.run;
}

export function describeBlock(block: ReadmeBlock): string {
  const first = block.code.split('\n').find((l) => l.trim() !== '' && !l.startsWith('import')) ?? '';
  return `${block.file}:${block.line} ${first.trim().slice(0, 60)}`;
}

export const readmePath = (file: string): string => relative(ROOT, file);
