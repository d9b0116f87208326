/** Stops the backend started by jest-global-setup. */
export default async function globalTeardown(): Promise<void> {
  const backend = globalThis.__MPL_TEST_BACKEND__;
  globalThis.__MPL_TEST_BACKEND__ = undefined;
  if (backend) await backend.stop();
}
