/**
 * `npm run emulator -- --port 27999 [--dbpath DIR] [--setParameter ttlMonitorSleepSecs=1] [--replSet rs0 | --standalone]`
 * `--topology replset|standalone` is the long form: replset (the default) answers as the primary of a
 * one-node replica set, standalone as a mongod started without --replSet.
 * Prints one line with the mongodb:// URI once listening; exits 0 on SIGTERM/SIGINT after flushing.
 */
import { startEmulator, type EmulatorOptions } from './index';

function parseArgs(argv: string[]): EmulatorOptions {
  const opts: EmulatorOptions = { setParameters: {} };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    const next = (): string => {
      const v = argv[++i];
      if (v === undefined) throw new Error(`missing value after ${a}`);
      return v;
    };
    if (a === '--port') opts.port = Number(next());
    else if (a === '--host' || a === '--bind_ip') opts.host = next();
    else if (a === '--dbpath') opts.dbpath = next();
    else if (a === '--replSet') opts.replSetName = next();
    else if (a === '--standalone') opts.topology = 'standalone';
    else if (a === '--topology') {
      const t = next();
      if (t !== 'replset' && t !== 'standalone') throw new Error(`--topology must be replset or standalone (got ${t})`);
      opts.topology = t;
    }
    else if (a === '--setParameter') {
      const [k, v] = next().split('=');
      if (k !== 'ttlMonitorSleepSecs' && k !== 'transactionLifetimeLimitSeconds') throw new Error(`unsupported --setParameter ${k}`);
      opts.setParameters![k] = Number(v);
    } else throw new Error(`unknown option ${a}`);
  }
  if (opts.topology === 'standalone' && opts.replSetName !== undefined) throw new Error('--replSet and --standalone exclude each other');
  return opts;
}

async function main(): Promise<void> {
  let opts: EmulatorOptions;
  try {
    opts = parseArgs(process.argv.slice(2));
  } catch (e) {
    process.stderr.write(`${(e as Error).message}\n`);
    process.exit(2);
  }
  const verbose = !!process.env.EMULATOR_VERBOSE;
  const emu = await startEmulator({ ...opts, port: opts.port ?? 27017, log: verbose ? (l) => process.stderr.write(`${l}\n`) : undefined });
  process.stdout.write(`mongodb emulator ready (${emu.topology}): ${emu.uri}\n`);
  let stopping = false;
  const shutdown = (): void => {
    if (stopping) return;
    stopping = true;
    emu.stop().then(
      () => process.exit(0),
      (e) => {
        process.stderr.write(`shutdown failed: ${(e as Error).message}\n`);
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', shutdown);
  process.on('SIGINT', shutdown);
}

void main();
