/**
 * Emulator capacity without the driver: how many simple commands per second the emulator
 * serves when the client costs next to nothing. A minimal wire client sends pre-encoded OP_MSG
 * commands (find by _id on a collection of 100,000 documents, and ping) over a few pipelined
 * sockets to the emulator running as its own process (the CLI).
 *
 * This separates the emulator's cost from the official driver's: `npm run bench:emulator`
 * measures both together through one pooled MongoClient, and there the driver's own CPU time
 * per command is the larger share on this machine.
 *
 * Usage: npx tsx bench/emulator-capacity.ts   (env BENCH_OPS, default 40000)
 */
import { spawn } from 'node:child_process';
import * as net from 'node:net';
import * as path from 'node:path';
import * as readline from 'node:readline';
import { BSON } from 'bson';
import { MongoClient } from 'mongodb';

const TOTAL = Number(process.env.BENCH_OPS ?? 40_000);
const SOCKETS = 4;
const IN_FLIGHT_PER_SOCKET = 16;
const PRELOAD = 100_000;
const OP_MSG = 2013;

function opMsg(requestId: number, command: BSON.Document): Buffer {
  const body = BSON.serialize(command);
  const header = Buffer.alloc(21);
  header.writeInt32LE(21 + body.length, 0);
  header.writeInt32LE(requestId, 4);
  header.writeInt32LE(0, 8);
  header.writeInt32LE(OP_MSG, 12);
  header.writeUInt32LE(0, 16);
  header.writeUInt8(0, 20);
  return Buffer.concat([header, body]);
}

async function startCli(): Promise<{ uri: string; port: number; stop(): Promise<void> }> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(__dirname, '..', 'test-backend', 'emulator', 'cli.ts'), '--port', '0'], {
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const uri = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('emulator did not start within 30 s')), 30_000);
    readline.createInterface({ input: child.stdout! }).on('line', (line) => {
      const match = /mongodb:\/\/\S+/.exec(line);
      if (match) {
        clearTimeout(timer);
        resolve(match[0]);
      }
    });
  });
  const port = Number(/:(\d+)\//.exec(uri)![1]);
  return {
    uri,
    port,
    stop: () =>
      new Promise<void>((resolve) => {
        child.once('exit', () => resolve());
        child.kill('SIGTERM');
      }),
  };
}

/** Sends `total` commands made by `make`, keeping a fixed number in flight per socket. */
async function drive(port: number, total: number, make: (i: number) => BSON.Document): Promise<number> {
  let sent = 0;
  let received = 0;
  let failed = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: SOCKETS }, () =>
      new Promise<void>((resolve, reject) => {
        const socket = net.connect(port, '127.0.0.1');
        socket.setNoDelay(true);
        let pending = Buffer.alloc(0);
        let inFlight = 0;
        const send = () => {
          while (inFlight < IN_FLIGHT_PER_SOCKET && sent < total) {
            sent++;
            inFlight++;
            socket.write(opMsg(sent, make(sent)));
          }
          if (inFlight === 0 && sent >= total) {
            socket.end();
            resolve();
          }
        };
        socket.on('connect', send);
        socket.on('error', reject);
        socket.on('data', (chunk) => {
          pending = pending.length ? Buffer.concat([pending, chunk]) : chunk;
          while (pending.length >= 4 && pending.length >= pending.readInt32LE(0)) {
            const length = pending.readInt32LE(0);
            const reply = BSON.deserialize(pending.subarray(21, length));
            if (reply.ok !== 1) failed++;
            pending = pending.subarray(length);
            inFlight--;
            received++;
          }
          send();
        });
      }),
    ),
  );
  const seconds = (performance.now() - started) / 1000;
  if (failed > 0) throw new Error(`${failed} of ${received} commands failed`);
  return received / seconds;
}

async function pingThroughDriver(client: MongoClient, total: number): Promise<number> {
  const db = client.db('admin');
  let issued = 0;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: 64 }, async () => {
      while (issued < total) {
        issued++;
        await db.command({ ping: 1 });
      }
    }),
  );
  return total / ((performance.now() - started) / 1000);
}

async function main(): Promise<void> {
  const server = await startCli();
  try {
    const client = await MongoClient.connect(server.uri);
    const locks = client.db('capacity').collection<{ _id: number; owner: string }>('locks');
    for (let i = 0; i < PRELOAD; i += 10_000) {
      await locks.insertMany(Array.from({ length: 10_000 }, (_, j) => ({ _id: i + j, owner: `o${(i + j) % 97}` })));
    }
    // The ceiling one pooled MongoClient reaches here on the cheapest command there is.
    const driverPing = await pingThroughDriver(client, TOTAL);
    await client.close();
    const ping = await drive(server.port, TOTAL, () => ({ ping: 1, $db: 'admin' }));
    const find = await drive(server.port, TOTAL, (i) => ({ find: 'locks', filter: { _id: (i * 7919) % PRELOAD }, limit: 1, singleBatch: true, $db: 'capacity' }));
    console.log(`emulator capacity (own process, raw wire client, ${SOCKETS} sockets x ${IN_FLIGHT_PER_SOCKET} in flight, ${TOTAL} commands each):`);
    console.log(`  ping:            ${Math.round(ping)} commands/s`);
    console.log(`  find by _id:     ${Math.round(find)} commands/s (collection of ${PRELOAD} documents)`);
    console.log(`for comparison, ping through one pooled MongoClient (concurrency 64): ${Math.round(driverPing)} commands/s — the driver's own ceiling here`);
  } finally {
    await server.stop();
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
