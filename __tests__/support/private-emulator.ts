/**
 * A private emulator in a process of its own (support/private-server.ts starts it): like the run's
 * shared one, it serves from a process other than the test's, so a test that stands its own process
 * still (a "process pause") stalls its clients, not the server. Arguments: the topology. Prints the
 * URI once listening; stops when its parent closes stdin (the test environment's teardown, or the
 * parent's death), so no server outlives the Jest worker that started it.
 */
import { startEmulator } from '../../test-backend/emulator';

async function main(): Promise<void> {
  const topology = process.argv[2] === 'standalone' ? 'standalone' : 'replset';
  // The ttl monitor wakes every second, as on the run's shared emulator (test-backend/backend.ts).
  const emulator = await startEmulator({ port: 0, topology, setParameters: { ttlMonitorSleepSecs: 1 } });
  process.stdout.write(`${emulator.uri}\n`);
  const stop = () => void emulator.stop().finally(() => process.exit(0));
  process.stdin.on('end', stop).on('error', stop).resume();
  process.on('SIGTERM', stop);
}

main().catch((error: unknown) => {
  process.stderr.write(`private emulator failed: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`);
  process.exit(1);
});
