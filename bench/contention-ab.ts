/**
 * Contended waiting, two builds of the plugin side by side in one run (ordered waiting, issue 17
 * item 2): `npx tsx bench/contention-ab.ts <dir of build A> <dir of build B>`, e.g. a worktree of
 * main and this one. Rounds alternate A, B, A, B on one backend (startBackend: a real mongod if
 * there is one, else the emulator as a replica set), so the machine's load hits both alike.
 *  - single: 8 callers on their own connections loop `lock(id, { wait })`, 2 ms, `unlock()` on one
 *    document: p50 / p99 of the lock call, locks per second;
 *  - groups: 6 callers loop `lockMany(2-4 of 6 documents, random order, { wait })`, 2 ms,
 *    `unlockMany`: p50 / p99 of the lockMany call, groups per second.
 * BENCH_ROUNDS (default 3) rounds per build, BENCH_ROUND_MS (default 6000) each.
 */
import mongoose, { Schema, type Connection } from 'mongoose';
import { startBackend } from '../test-backend/backend';

type Plugin = { lockPlugin: (schema: Schema, options?: object) => void };
interface Item {
  n: number;
}
interface Locked {
  unlock(): Promise<void>;
}
interface ItemModel extends mongoose.Model<Item> {
  lock(id: unknown, owner: string, options?: object): Promise<Locked>;
  lockMany(ids: unknown[], owner: string, options?: object): Promise<unknown[]>;
  unlockMany(docs: unknown[]): Promise<void>;
  lockModel(): mongoose.Model<unknown>;
}

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const ROUND_MS = Number(process.env.BENCH_ROUND_MS ?? 6_000);
const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));
const pct = (xs: number[], p: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? Math.round(s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))] * 10) / 10 : NaN;
};

async function models(uri: string, dbName: string, plugin: Plugin, name: string, count: number): Promise<{ models: ItemModel[]; conns: Connection[] }> {
  const conns: Connection[] = [];
  const out: ItemModel[] = [];
  for (let i = 0; i < count; i++) {
    const conn = mongoose.createConnection(uri, { dbName, maxPoolSize: 5 });
    await conn.asPromise();
    const schema = new Schema<Item>({ n: Number });
    schema.plugin(plugin.lockPlugin, { ttl: 30_000 });
    const model = conn.model<Item>(name, schema) as unknown as ItemModel;
    await model.init();
    await model.lockModel().init();
    conns.push(conn);
    out.push(model);
  }
  return { models: out, conns };
}

async function single(ms: ItemModel[], id: unknown): Promise<{ lat: number[]; n: number }> {
  const lat: number[] = [];
  const end = performance.now() + ROUND_MS;
  await Promise.all(
    ms.map(async (M, w) => {
      while (performance.now() < end) {
        const t = performance.now();
        const doc = await M.lock(id, `w${w}`, { wait: 30_000 });
        lat.push(performance.now() - t);
        await sleep(2);
        await doc.unlock();
      }
    }),
  );
  return { lat, n: lat.length };
}

async function groups(ms: ItemModel[], ids: unknown[]): Promise<{ lat: number[]; n: number }> {
  const lat: number[] = [];
  const end = performance.now() + ROUND_MS;
  await Promise.all(
    ms.map(async (M, w) => {
      while (performance.now() < end) {
        const pick = [...ids].sort(() => Math.random() - 0.5).slice(0, 2 + Math.floor(Math.random() * 3));
        const t = performance.now();
        const docs = await M.lockMany(pick, `g${w}`, { wait: 60_000 });
        lat.push(performance.now() - t);
        await sleep(2);
        await M.unlockMany(docs);
      }
    }),
  );
  return { lat, n: lat.length };
}

async function main(): Promise<void> {
  const [dirA, dirB] = process.argv.slice(2);
  const backend = await startBackend([]);
  console.log(`[contention-ab] backend: ${backend.description}`);
  const dbName = `mpl_ab_${Date.now().toString(36)}`;
  const builds = await Promise.all(
    [dirA, dirB].map(async (dir, b) => {
      const plugin = (await import(`${dir}/src/index.ts`)) as Plugin;
      const s = await models(backend.uri, dbName, plugin, `AbSingle${b}`, 8);
      const g = await models(backend.uri, dbName, plugin, `AbGroup${b}`, 6);
      const [one] = (await s.models[0].insertMany([{ n: 0 }])).map((d) => d._id);
      const six = (await g.models[0].insertMany(Array.from({ length: 6 }, (_, n) => ({ n })))).map((d) => d._id);
      return { dir, s, g, one, six, single: [] as number[], singleN: 0, group: [] as number[], groupN: 0 };
    }),
  );
  for (let r = 0; r < ROUNDS; r++) {
    for (const b of builds) {
      const s = await single(b.s.models, b.one);
      b.single.push(...s.lat);
      b.singleN += s.n;
      const g = await groups(b.g.models, b.six);
      b.group.push(...g.lat);
      b.groupN += g.n;
    }
  }
  const secs = (ROUNDS * ROUND_MS) / 1000;
  for (const b of builds) {
    console.log(
      `${b.dir}: single lock(wait) p50 ${pct(b.single, 50)} ms p99 ${pct(b.single, 99)} ms ${Math.round(b.singleN / secs)}/s | lockMany(wait) p50 ${pct(b.group, 50)} ms p99 ${pct(b.group, 99)} ms ${Math.round(b.groupN / secs)}/s`,
    );
  }
  for (const b of builds) await Promise.all([...b.s.conns, ...b.g.conns].map((c) => c.close()));
  await backend.stop?.();
  process.exit(0);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
