/** Starts the test backend once for the whole Jest run and hands its URI to the workers. */
import { startBackend, type Backend } from './backend';

declare global {
  var __MPL_TEST_BACKEND__: Backend | undefined;
}

export default async function globalSetup(): Promise<void> {
  const notes: string[] = [];
  const backend = await startBackend(notes);
  globalThis.__MPL_TEST_BACKEND__ = backend;
  process.env.MONGODB_URI = backend.uri;
  process.env.MPL_TEST_BACKEND = backend.kind;
  const why = notes.length ? ` (${notes.join('; ')})` : '';
  process.stdout.write(`\n[mongoose-pessimistic-lock] tests run against ${backend.description}${why}\n`);
}
