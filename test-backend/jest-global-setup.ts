/** Starts the test backend once for the whole Jest run and hands its URI to the workers. */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startBackend, type Backend } from './backend';
import { DIR_ENV } from './lock-commands';

declare global {
  var __MPL_TEST_BACKEND__: Backend | undefined;
}

export default async function globalSetup(): Promise<void> {
  // Every process of the run (Jest workers, the workers they spawn) records the shapes of the
  // commands it sends to lock collections here; the global teardown checks them.
  process.env[DIR_ENV] = mkdtempSync(join(tmpdir(), 'mpl-lock-commands-'));
  const notes: string[] = [];
  const backend = await startBackend(notes);
  globalThis.__MPL_TEST_BACKEND__ = backend;
  process.env.MONGODB_URI = backend.uri;
  process.env.MPL_TEST_BACKEND = backend.kind;
  const why = notes.length ? ` (${notes.join('; ')})` : '';
  process.stdout.write(`\n[mongoose-pessimistic-lock] tests run against ${backend.description}${why}\n`);
}
