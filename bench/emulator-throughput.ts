/**
 * Emulator throughput: 20,000 mixed simple commands (insertOne, findOne by
 * _id, updateOne by _id with $$NOW) at concurrency 16 through one pooled
 * MongoClient, over 100,000 pre-loaded lock-like documents. Prints commands/s.
 */
import { MongoClient } from 'mongodb';
import { startEmulator } from '../test-backend/emulator';

const TOTAL = Number(process.env.BENCH_OPS ?? 20_000);
const CONCURRENCY = 16;
const PRELOAD = Number(process.env.BENCH_PRELOAD ?? 100_000);

async function main(): Promise<void> {
  const emu = await startEmulator();
  const client = new MongoClient(emu.uri, { maxPoolSize: CONCURRENCY });
  await client.connect();
  const coll = client.db('bench').collection<{ _id: string; owner: string; expiresAt: Date; n?: number }>('locks');
  await coll.createIndex({ owner: 1 });
  await coll.createIndex({ expiresAt: 1 }, { expireAfterSeconds: 0 });
  const expiresAt = new Date(Date.now() + 3_600_000);
  for (let i = 0; i < PRELOAD; i += 5_000) {
    await coll.insertMany(Array.from({ length: Math.min(5_000, PRELOAD - i) }, (_, j) => ({ _id: `pre${i + j}`, owner: `o${(i + j) % 1000}`, expiresAt })));
  }
  let next = 0;
  const started = process.hrtime.bigint();
  const worker = async (): Promise<void> => {
    for (;;) {
      const i = next++;
      if (i >= TOTAL) return;
      switch (i % 3) {
        case 0:
          await coll.insertOne({ _id: `k${i}`, owner: 'bench', expiresAt });
          break;
        case 1:
          await coll.findOne({ _id: `pre${i % PRELOAD}` });
          break;
        default:
          await coll.updateOne({ _id: `pre${i % PRELOAD}` }, [{ $set: { touchedAt: '$$NOW' } }]);
      }
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  const secs = Number(process.hrtime.bigint() - started) / 1e9;
  console.log(`emulator throughput: ${TOTAL} commands in ${secs.toFixed(2)} s = ${Math.round(TOTAL / secs)} commands/s (concurrency ${CONCURRENCY}, ${PRELOAD} preloaded docs)`);
  await client.close();
  await emu.stop();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
