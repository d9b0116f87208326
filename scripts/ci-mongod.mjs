// For .ci/run on a real mongod (MONGO_BACKEND=mongod): finds the mongod binary the tests will use
// the way the harness does (test-backend/backend.ts: MONGOMS_SYSTEM_BINARY, else `mongod` on PATH,
// else mongodb-memory-server's cache or a download of MONGOMS_VERSION for MONGOMS_DISTRO into
// MONGOMS_DOWNLOAD_DIR),
// and prints its version. A build that does not exist for this OS then fails here, with
// mongodb-memory-server's download error, instead of in Jest's global setup.
import { execFileSync } from 'node:child_process';
import { createRequire } from 'node:module';

const require = createRequire(import.meta.url);
const { MongoBinary } = require('mongodb-memory-server');

const env = ['MONGOMS_VERSION', 'MONGOMS_DISTRO', 'MONGOMS_DOWNLOAD_DIR', 'MONGOMS_SYSTEM_BINARY']
  .map((name) => `${name}=${process.env[name] ?? '(unset)'}`)
  .join(' ');
console.log(`== mongod for the tests (${env})`);
function onPath() {
  try {
    return execFileSync('sh', ['-c', 'command -v mongod'], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim() || undefined;
  } catch {
    return undefined;
  }
}

try {
  const path = process.env.MONGOMS_SYSTEM_BINARY || onPath() || (await MongoBinary.getPath());
  const version = execFileSync(path, ['--version'], { encoding: 'utf8' }).split('\n')[0];
  console.log(`mongod: ${path} (${version})`);
} catch (error) {
  console.error(`.ci/run: no mongod for the tests: ${error instanceof Error ? error.message : String(error)}`);
  process.exit(1);
}
