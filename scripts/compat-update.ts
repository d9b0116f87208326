/**
 * `npm run compat:update`: merges the command shapes of the last recorded Jest run
 * (.test-output/lock-commands.last-run.json, written by the global teardown) into
 * docs/lock-commands.json.
 *
 *  - Shapes already listed keep their id and anchor.
 *  - New shapes get an id derived from the shape and the anchor "#undocumented", which exists in
 *    no record: __tests__/package/compatibility-record.test.ts fails until each one is documented
 *    in docs/mongodb-compatibility.md and its anchor points at that section.
 *  - Listed shapes the last run did not send are kept (a partial run sends fewer), unless
 *    `--prune` is given: use it only after a full run.
 */
import { createHash } from 'node:crypto';
import { existsSync, writeFileSync } from 'node:fs';
import { relative } from 'node:path';
import { LAST_RUN_FILE, LIST_FILE, ROOT, UNDOCUMENTED_ANCHOR, readLastRun, readList, shapeKey, type ListedCommand } from '../test-backend/lock-commands';

function newId(shape: unknown, taken: Set<string>): string {
  const name = Object.keys(shape as Record<string, unknown>)[0] ?? 'command';
  const hash = createHash('sha256').update(shapeKey(shape)).digest('hex');
  let length = 8;
  while (taken.has(`${name}-${hash.slice(0, length)}`)) length++;
  return `${name}-${hash.slice(0, length)}`;
}

function main(): void {
  const prune = process.argv.includes('--prune');
  if (!existsSync(LAST_RUN_FILE)) {
    console.error(`No recorded run at ${relative(ROOT, LAST_RUN_FILE)}: run the tests first (npx jest).`);
    process.exit(1);
  }
  const run = readLastRun();
  if (prune && run.partial) {
    console.error('The last recorded run was partial (a subset of the tests): --prune needs a full run (npx jest).');
    process.exit(1);
  }
  const recorded = run.shapes;
  const list = readList();
  const recordedKeys = new Set(recorded.map(shapeKey));
  const byKey = new Map(list.commands.map((entry) => [shapeKey(entry.shape), entry]));
  const taken = new Set(list.commands.map((entry) => entry.id));

  const kept: ListedCommand[] = [];
  const dropped: ListedCommand[] = [];
  for (const entry of list.commands) {
    if (prune && !recordedKeys.has(shapeKey(entry.shape))) dropped.push(entry);
    else kept.push(entry);
  }
  const added: ListedCommand[] = [];
  for (const shape of recorded) {
    if (byKey.has(shapeKey(shape))) continue;
    const id = newId(shape, taken);
    taken.add(id);
    added.push({ id, anchor: UNDOCUMENTED_ANCHOR, shape });
  }
  list.commands = [...kept, ...added];
  writeFileSync(LIST_FILE, `${JSON.stringify(list, null, 2)}\n`);

  console.log(`${relative(ROOT, LIST_FILE)}: ${list.commands.length} shapes (${added.length} added, ${dropped.length} pruned) from the ${run.partial ? 'partial' : 'full'} run of ${run.recordedAt}.`);
  for (const entry of added) console.log(`  added ${entry.id} (anchor ${UNDOCUMENTED_ANCHOR}: document it in docs/mongodb-compatibility.md)`);
  for (const entry of dropped) console.log(`  pruned ${entry.id}`);
}

main();
