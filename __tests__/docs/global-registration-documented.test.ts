/**
 * What the README restructure (issue 18, item 1) must keep for users: what the old README told
 * them about registering the plugin globally (`git show 8f67b40:README.md`, "Usage"): a schema
 * that applies the plugin itself keeps its own options, embedded schemas are not guarded on their
 * own, and Mongoose's `deduplicate` / `tags` (`pluginTags`) work as usual (docs/api.md,
 * "Registering it for every model").
 *
 * (The same attack found that the README's relative links 404 on the npm page until package.json
 * names a GitHub `repository`, which only the maintainers can supply: recorded in CONTRIBUTING.md,
 * "The published package", rather than pinned by a test that must fail until then.)
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = join(__dirname, '..', '..');
const read = (file: string): string => readFileSync(join(ROOT, file), 'utf8');

test('the documentation still says how a global registration treats own options, embedded schemas, deduplicate and tags', () => {
  const docs = ['README.md', ...readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md') && f !== 'mongodb-compatibility.md').map((f) => `docs/${f}`)]
    .map(read)
    .join('\n');
  expect({
    deduplicate: docs.includes('deduplicate'),
    tags: docs.includes('pluginTags'),
    ownOptions: /own\s+options/.test(docs),
    embedded: /embedded\s+schemas\s+are\s+not\s+guarded\s+on\s+their\s+own/i.test(docs),
  }).toEqual({ deduplicate: true, tags: true, ownOptions: true, embedded: true });
});
