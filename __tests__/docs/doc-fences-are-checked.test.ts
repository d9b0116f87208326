/**
 * The docs test (readme.test.ts, support/readme-blocks.ts) type-checks every ```ts block and fails
 * on code hidden in a fence it does not check. A ```ts fence with an info string after the
 * language (```ts title="app.ts", ```ts twoslash: CommonMark's info string, GitHub renders it as
 * TypeScript) must therefore be checked, or refused, never skipped: extractBlocks matches only
 * /^```(ts|typescript)\s*$/, and the unchecked-fence rule reads the first word (`ts`) and calls it
 * checked, so such a block (for example `const x: number = "a"`) passes the whole docs test.
 * (The README is also outside the unchecked-fence rule: a ```js block there is never compiled.)
 */
import { extractBlocks } from './support/readme-blocks';

test('a ts fence with an info string after the language is extracted (type-checked), not skipped', () => {
  const markdown = ['# Guide', '', '```ts title="app.ts"', 'const x: number = "not a number";', '```', ''].join('\n');
  let outcome: string;
  try {
    outcome = `extracted ${extractBlocks(markdown, 'docs/guide.md').length}`;
  } catch {
    outcome = 'refused';
  }
  expect(['extracted 1', 'refused']).toContain(outcome);
});
