/** Re-renders bench/results/latest.svg from bench/results/latest.json (after a chart change). */
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import type { BenchResults } from './run';
import { renderSvg } from './svg';

const dir = join(__dirname, 'results');
const results = JSON.parse(readFileSync(join(dir, 'latest.json'), 'utf8')) as BenchResults;
writeFileSync(join(dir, 'latest.svg'), renderSvg(results));
console.log(`wrote ${join('bench', 'results', 'latest.svg')} from latest.json (${results.when})`);
