/** Shared by the emulator's own tests: the server error a command was expected to fail with. */
import { MongoServerError } from 'mongodb';

export async function serverError(p: Promise<unknown>): Promise<MongoServerError> {
  const e = await p.then(
    () => undefined,
    (err: unknown) => err,
  );
  expect(e).toBeInstanceOf(MongoServerError);
  return e as MongoServerError;
}
