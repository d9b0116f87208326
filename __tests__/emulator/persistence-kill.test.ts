/**
 * Durability of the emulator's journal: a write acknowledged to the client
 * survives SIGKILL of the emulator process right after the reply (no clean
 * shutdown, no compaction), and unique indexes come back enforced.
 * Runs the CLI as a user would, in its own process, on a temporary --dbpath.
 */
import { spawn, type ChildProcess } from 'child_process';
import { mkdtempSync, rmSync } from 'fs';
import { tmpdir } from 'os';
import * as path from 'path';
import * as readline from 'readline';
import { MongoClient, MongoServerError } from 'mongodb';

const CLI = path.join(__dirname, '..', '..', 'test-backend', 'emulator', 'cli.ts');
const children = new Set<ChildProcess>();
let dbpath: string;

function startCli(dir: string): Promise<{ child: ChildProcess; uri: string }> {
  const child = spawn(process.execPath, ['--import', 'tsx', CLI, '--port', '0', '--dbpath', dir], { stdio: ['ignore', 'pipe', 'pipe'] });
  children.add(child);
  child.once('exit', () => children.delete(child));
  return new Promise((resolve, reject) => {
    let stderr = '';
    child.stderr!.on('data', (b: Buffer) => (stderr += b.toString()));
    const timer = setTimeout(() => reject(new Error(`emulator CLI gave no URI within 20 s: ${stderr}`)), 20_000);
    readline.createInterface({ input: child.stdout! }).on('line', (line) => {
      const m = /mongodb:\/\/\S+/.exec(line);
      if (m) {
        clearTimeout(timer);
        resolve({ child, uri: m[0] });
      }
    });
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      reject(new Error(`emulator CLI exited early (${code ?? signal}): ${stderr}`));
    });
  });
}

function killHard(child: ChildProcess): Promise<void> {
  return new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode !== null) return resolve();
    child.once('exit', () => resolve());
    child.kill('SIGKILL');
  });
}

beforeAll(() => {
  dbpath = mkdtempSync(path.join(tmpdir(), 'emu-kill-'));
});

afterAll(async () => {
  await Promise.all([...children].map(killHard));
  rmSync(dbpath, { recursive: true, force: true });
});

test('acknowledged writes and unique indexes survive SIGKILL right after the reply', async () => {
  const first = await startCli(dbpath);
  let client = new MongoClient(first.uri, { serverSelectionTimeoutMS: 10_000 });
  await client.connect();
  let coll = client.db('durable').collection<{ _id: number; email?: string; n?: number }>('things');
  await coll.createIndex({ email: 1 }, { unique: true, name: 'email_unique' });
  await coll.insertMany([
    { _id: 1, email: 'a@x.io' },
    { _id: 2, email: 'b@x.io' },
  ]);
  await coll.updateOne({ _id: 2 }, { $inc: { n: 5 } });
  await coll.deleteOne({ _id: 1 });
  // The last acknowledged write; the process is killed the moment its reply arrives.
  await coll.insertOne({ _id: 3, email: 'c@x.io' });
  await killHard(first.child);
  await client.close(true).catch(() => undefined);

  const second = await startCli(dbpath);
  client = new MongoClient(second.uri, { serverSelectionTimeoutMS: 10_000 });
  try {
    await client.connect();
    coll = client.db('durable').collection('things');
    expect(await coll.find().sort({ _id: 1 }).toArray()).toEqual([
      { _id: 2, email: 'b@x.io', n: 5 },
      { _id: 3, email: 'c@x.io' },
    ]);
    const indexes = await coll.listIndexes().toArray();
    expect(indexes.find((i) => i.name === 'email_unique')).toMatchObject({ key: { email: 1 }, unique: true });
    const dup = await coll.insertOne({ _id: 4, email: 'c@x.io' }).then(
      () => undefined,
      (e: unknown) => e,
    );
    expect(dup).toBeInstanceOf(MongoServerError);
    expect((dup as MongoServerError).code).toBe(11000);
    expect((dup as MongoServerError).keyValue).toEqual({ email: 'c@x.io' });
  } finally {
    await client.close();
    await killHard(second.child);
  }
}, 60_000);
