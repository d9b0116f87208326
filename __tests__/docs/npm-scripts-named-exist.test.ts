/**
 * Every `npm run <script>` the README, CONTRIBUTING.md and the guides tell a reader to run is a
 * script of package.json (the docs test checks links, blocks and figures, not the commands).
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = join(__dirname, '..', '..');

test('every npm run <script> named in the documentation exists in package.json', () => {
  const { scripts } = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
  const files = ['README.md', 'CONTRIBUTING.md', ...readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md')).map((f) => `docs/${f}`)];
  const missing = files.flatMap((file) =>
    [...readFileSync(join(ROOT, file), 'utf8').matchAll(/npm run ([A-Za-z0-9:_-]+)/g)].map((m) => m[1]!).filter((name) => !(name in scripts)).map((name) => `${file}: npm run ${name}`),
  );
  expect([...new Set(missing)]).toEqual([]);
});
