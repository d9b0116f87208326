// Builds dist/cjs from src/ with tsc, plus a thin ESM entry that re-exports it. One copy of the
// code serves require() and import alike, so `instanceof LockError` holds across both.
import { execFileSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';

rmSync('dist', { recursive: true, force: true });
execFileSync(process.execPath, ['node_modules/typescript/bin/tsc', '-p', 'tsconfig.build.json', '--outDir', 'dist/cjs'], { stdio: 'inherit' });
writeFileSync('dist/cjs/package.json', JSON.stringify({ type: 'commonjs' }) + '\n');

mkdirSync('dist/esm', { recursive: true });
writeFileSync('dist/esm/package.json', JSON.stringify({ type: 'module' }) + '\n');
writeFileSync('dist/esm/index.js', "export * from '../cjs/index.js';\n");
writeFileSync('dist/esm/index.d.ts', "export * from '../cjs/index.js';\n");
