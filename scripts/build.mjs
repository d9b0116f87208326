// Builds dist/cjs and dist/esm from src/ with tsc, so the package works with require() and import.
import { execFileSync } from 'node:child_process';
import { rmSync, writeFileSync } from 'node:fs';

const tsc = (args) => execFileSync(process.execPath, ['node_modules/typescript/bin/tsc', ...args], { stdio: 'inherit' });

rmSync('dist', { recursive: true, force: true });
tsc(['-p', 'tsconfig.build.json', '--outDir', 'dist/cjs', '--module', 'commonjs', '--moduleResolution', 'node10']);
tsc(['-p', 'tsconfig.build.json', '--outDir', 'dist/esm', '--module', 'es2022', '--moduleResolution', 'bundler']);
// Node decides module format by the nearest package.json; mark each half explicitly.
writeFileSync('dist/cjs/package.json', JSON.stringify({ type: 'commonjs' }) + '\n');
writeFileSync('dist/esm/package.json', JSON.stringify({ type: 'module' }) + '\n');
