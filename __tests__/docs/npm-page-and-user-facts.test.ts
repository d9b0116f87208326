/**
 * What the README restructure (issue 18, item 1) must keep for users:
 *  - its links work on the npm page. npmjs.com renders README.md only; it serves no other file of
 *    the tarball, and rewrites a relative link to the repository only when package.json names a
 *    GitHub `repository` (npm/marky-markdown #306, #432: "relative links ... are not being turned
 *    into github absolute references" without it). Shipping docs/*.md in `files` does not make
 *    `[guide](docs/web-apps.md)` resolve on npmjs.com;
 *  - what the old README told users about registering the plugin globally
 *    (`git show 8f67b40:README.md`, "Usage"): a schema that applies the plugin itself keeps its own
 *    options, embedded schemas are not guarded on their own, and Mongoose's `deduplicate` / `tags`
 *    (`pluginTags`) work as usual.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

const ROOT = join(__dirname, '..', '..');
const read = (file: string): string => readFileSync(join(ROOT, file), 'utf8');
const withoutCode = (markdown: string): string => markdown.replace(/^```[\s\S]*?^```$/gm, '');

test("the README's relative links resolve on the npm page: package.json names the GitHub repository npm rewrites them to", () => {
  const readme = withoutCode(read('README.md'));
  const relative = [...readme.matchAll(/\]\(([^)\s]+)\)/g)].map((m) => m[1]!).filter((target) => !/^(https?:|mailto:|#)/.test(target));
  expect(relative.length).toBeGreaterThan(0);
  const pkg = JSON.parse(read('package.json')) as { repository?: string | { url?: string } };
  const url = typeof pkg.repository === 'string' ? pkg.repository : pkg.repository?.url;
  expect({ relativeLinks: relative.length, repository: url ?? null }).toEqual({ relativeLinks: relative.length, repository: expect.stringMatching(/github\.com[/:][^/]+\/[^/]+/) });
});

test('the documentation still says how a global registration treats own options, embedded schemas, deduplicate and tags', () => {
  const docs = ['README.md', ...readdirSync(join(ROOT, 'docs')).filter((f) => f.endsWith('.md') && f !== 'mongodb-compatibility.md').map((f) => `docs/${f}`)]
    .map(read)
    .join('\n');
  expect({
    deduplicate: docs.includes('deduplicate'),
    tags: docs.includes('pluginTags'),
    ownOptions: /own options/.test(docs),
    embedded: /embedded schemas?/i.test(docs),
  }).toEqual({ deduplicate: true, tags: true, ownOptions: true, embedded: true });
});
