/**
 * The backend picker of `npm run demo` and of Jest's global setup (test-backend/backend.ts) on a
 * machine without a mongod (issue 18, item 6): it must not spend seconds on a download nobody
 * asked for, must say in one line what it runs on and why, and must still use a real mongod
 * that is present or cached, and still download one when asked (CI: MONGO_BACKEND=mongod).
 *
 * Each case runs the picker in a child process whose machine is a temporary directory: PATH
 * holds only `sh`, HOME and the working directory are empty, mongodb-memory-server's download
 * directory is empty or seeded, and its download mirror is a local server that records every
 * request (and answers 404): no network, and a download attempt cannot go unnoticed.
 */
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { tempDir } from '../../test-backend/backend';

const CHILD = join(__dirname, 'support', 'pick-backend.ts');
const TSX = pathToFileURL(require.resolve('tsx')).href;

interface Picked {
  kind?: string;
  description?: string;
  error?: string;
  notes: string[];
}

let mirror: Server;
let mirrorUrl: string;
let requests: string[] = [];

beforeAll(async () => {
  mirror = createServer((req, res) => {
    requests.push(req.url ?? '');
    res.writeHead(404).end();
  });
  await new Promise<void>((resolve) => mirror.listen(0, '127.0.0.1', resolve));
  mirrorUrl = `http://127.0.0.1:${(mirror.address() as AddressInfo).port}`;
});
afterAll(() => new Promise<void>((resolve) => mirror.close(() => resolve())));
beforeEach(() => {
  requests = [];
});

/** Runs the picker on a machine that is `dir`, with `extra` on top of the bare environment. */
async function pick(dir: string, extra: Record<string, string> = {}): Promise<Picked> {
  const bin = join(dir, 'bin');
  mkdirSync(bin, { recursive: true });
  try {
    symlinkSync('/bin/sh', join(bin, 'sh'));
  } catch {
    // already linked by an earlier pick in the same directory
  }
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of Object.keys(env)) {
    if (name.startsWith('MONGOMS_') || name.startsWith('MONGO_') || name.startsWith('MPL_') || name === 'MONGODB_URI' || name === 'INIT_CWD') delete env[name];
  }
  Object.assign(env, {
    PATH: bin,
    HOME: dir,
    MONGOMS_DOWNLOAD_DIR: join(dir, 'cache'),
    MONGOMS_DOWNLOAD_MIRROR: mirrorUrl,
    MONGOMS_USE_HTTP: '1',
    MONGOMS_MAX_RETRIES: '1',
    ...extra,
  });
  // Asynchronously: the mirror answers from this process's event loop.
  const { stdout, stderr } = await new Promise<{ stdout: string; stderr: string }>((resolve) => {
    execFile(process.execPath, ['--import', TSX, CHILD], { cwd: dir, env, encoding: 'utf8', timeout: 120_000 }, (_error, out, err) => resolve({ stdout: out, stderr: err }));
  });
  const line = stdout.trim().split('\n').pop() ?? '';
  if (!line.startsWith('{')) throw new Error(`the picker printed no result: ${stdout}${stderr}`);
  return JSON.parse(line) as Picked;
}

/** The name mongodb-memory-server gives a cached mongod on this machine (default version). */
async function cachedBinaryName(): Promise<string> {
  const { DryMongoBinary } = await import('mongodb-memory-server');
  return DryMongoBinary.getBinaryName(await DryMongoBinary.generateOptions());
}

test('with no mongod on PATH or in the cache, it picks the emulator without trying a download, and says why in one line', async () => {
  const dir = tempDir('mpl-offline-');
  try {
    const picked = await pick(dir.path);
    expect(picked.kind).toBe('emulator');
    expect(requests).toEqual([]);
    expect(picked.notes).toHaveLength(1);
    expect(picked.notes[0]).not.toContain('\n');
    expect(picked.notes[0]).toMatch(/no mongod on PATH or in mongodb-memory-server's cache.*MONGOMS_RUNTIME_DOWNLOAD=1/);
  } finally {
    dir.remove();
  }
}, 150_000);

test('asked to download (MONGOMS_RUNTIME_DOWNLOAD=1), it tries, and reports the failure in full on one line', async () => {
  const dir = tempDir('mpl-offline-');
  try {
    const picked = await pick(dir.path, { MONGOMS_RUNTIME_DOWNLOAD: '1' });
    expect(picked.kind).toBe('emulator');
    expect(requests.length).toBeGreaterThan(0);
    expect(requests[0]).toMatch(/mongodb-.*\.tgz$/);
    expect(picked.notes).toHaveLength(1);
    // mongodb-memory-server's message is "Download failed for url ..., Details:\n<why>": the why is kept.
    expect(picked.notes[0]).toMatch(/Details: Status Code isn't 200! \(it is 404\)/);
    expect(picked.notes[0]).not.toContain('\n');
  } finally {
    dir.remove();
  }
}, 150_000);

test('MONGO_BACKEND=mongod (CI) still downloads, and fails with the download error instead of falling back', async () => {
  const dir = tempDir('mpl-offline-');
  try {
    const picked = await pick(dir.path, { MONGO_BACKEND: 'mongod' });
    expect(picked.kind).toBeUndefined();
    expect(requests.length).toBeGreaterThan(0);
    expect(picked.error).toMatch(/Status Code isn't 200! \(it is 404\)/);
  } finally {
    dir.remove();
  }
}, 150_000);

test('a mongod in mongodb-memory-server\'s cache is used at once, without a download', async () => {
  const dir = tempDir('mpl-offline-');
  try {
    // A stand-in for a cached mongod: the size and checksum file mongodb-memory-server requires
    // of a cached binary, and a script that fails to start, so the note names what was tried.
    const cache = join(dir.path, 'cache');
    mkdirSync(cache, { recursive: true });
    const binary = join(cache, await cachedBinaryName());
    const script = `#!/bin/sh\necho "fake mongod" >&2\nexit 3\n#${'x'.repeat(1024 * 1024)}\n`;
    writeFileSync(binary, script, { mode: 0o755 });
    writeFileSync(`${binary}.md5`, `${createHash('md5').update(script).digest('hex')}  ${binary}\n`);
    const picked = await pick(dir.path);
    expect(requests).toEqual([]);
    expect(picked.kind).toBe('emulator');
    expect(picked.notes).toHaveLength(1);
    expect(picked.notes[0]).toContain(binary);
    expect(picked.notes[0]).not.toContain('\n');
  } finally {
    dir.remove();
  }
}, 150_000);

test('a mongod on PATH is preferred', async () => {
  const dir = tempDir('mpl-offline-');
  try {
    mkdirSync(join(dir.path, 'bin'), { recursive: true });
    const onPath = join(dir.path, 'bin', 'mongod');
    writeFileSync(onPath, '#!/bin/sh\necho "fake mongod" >&2\nexit 3\n', { mode: 0o755 });
    const picked = await pick(dir.path);
    expect(requests).toEqual([]);
    expect(picked.kind).toBe('emulator');
    expect(picked.notes).toHaveLength(1);
    expect(picked.notes[0]).toContain(onPath);
  } finally {
    dir.remove();
  }
}, 150_000);
