/**
 * Stops the backend started by jest-global-setup, then checks the commands the tests sent to
 * lock collections against docs/lock-commands.json: a shape sent but not listed fails the run
 * (Jest exits non-zero when the global teardown throws). Shapes listed but not sent are fine,
 * so a partial run (one test file) passes.
 */
import { rmSync } from 'node:fs';
import type { Config } from '@jest/types';
import { DIR_ENV, collectRecordedShapes, readList, unlistedMessage, unlistedShapes, writeLastRun } from './lock-commands';

export default async function globalTeardown(globalConfig: Config.GlobalConfig): Promise<void> {
  const backend = globalThis.__MPL_TEST_BACKEND__;
  globalThis.__MPL_TEST_BACKEND__ = undefined;
  try {
    if (backend) await backend.stop();
  } finally {
    checkLockCommands(isPartialRun(globalConfig));
  }
}

/** Whether this run selected a subset of the tests (then `compat:update --prune` must not trust it). */
function isPartialRun(config: Config.GlobalConfig): boolean {
  return Boolean(config.testPathPattern || config.testNamePattern || config.onlyChanged || config.findRelatedTests || config.onlyFailures || config.lastCommit || config.changedSince);
}

function checkLockCommands(partial: boolean): void {
  const dir = process.env[DIR_ENV];
  if (!dir) return;
  delete process.env[DIR_ENV];
  const recorded = collectRecordedShapes(dir);
  rmSync(dir, { recursive: true, force: true });
  writeLastRun(recorded, partial);
  const unlisted = unlistedShapes(recorded, readList());
  if (unlisted.length > 0) throw new Error(unlistedMessage(unlisted));
}
