/**
 * Child process for offline-backend.test.ts: picks a backend the way the demo and Jest's global
 * setup do (test-backend/backend.ts startBackend), prints what it picked as one JSON line, stops it.
 */
import { startBackend } from '../../../test-backend/backend';

async function main(): Promise<void> {
  const notes: string[] = [];
  const started = Date.now();
  try {
    const backend = await startBackend(notes);
    const picked = { kind: backend.kind, description: backend.description, notes, ms: Date.now() - started };
    await backend.stop();
    process.stdout.write(`${JSON.stringify(picked)}\n`);
  } catch (error) {
    process.stdout.write(`${JSON.stringify({ error: (error as Error).message, notes, ms: Date.now() - started })}\n`);
  }
}

// Exit at once: a download the picker gave up on must not keep the process alive.
void main().finally(() => process.stdout.write('', () => process.exit(0)));
