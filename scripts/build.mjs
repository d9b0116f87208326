// Builds dist/cjs from src/ with tsc, plus a thin ESM entry that re-exports it. One copy of the
// code serves require() and import alike, so `instanceof LockError` holds across both.
// `node scripts/build.mjs [outDir]`: outDir defaults to `dist` (the types test builds elsewhere,
// so that it never races another test over the repository's dist/).
import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

const out = process.argv[2] ?? 'dist';
rmSync(out, { recursive: true, force: true });
execFileSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.build.json', '--outDir', join(out, 'cjs')], { stdio: 'inherit' });
writeFileSync(join(out, 'cjs/package.json'), JSON.stringify({ type: 'commonjs' }) + '\n');

mkdirSync(join(out, 'esm'), { recursive: true });
writeFileSync(join(out, 'esm/package.json'), JSON.stringify({ type: 'module' }) + '\n');
writeFileSync(join(out, 'esm/index.js'), "export * from '../cjs/index.js';\n");
writeFileSync(join(out, 'esm/index.d.ts'), "export * from '../cjs/index.js';\n");
