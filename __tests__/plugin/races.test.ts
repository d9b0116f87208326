/**
 * Mutual exclusion under real races (PRODUCT.md property 1): many clients on several
 * connections, randomized start offsets, and independent checks (a non-atomic counter and an
 * overlap detector that no lock code touches) that would catch two holders at once.
 */
import type { Types } from 'mongoose';
import { LockedError } from '../../src';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const CONNECTIONS = 5;
const CONTENDERS = 50;
const ROUNDS = 30;

const db = testDatabase('races');
let conns: MonitoredConnection[];
let models: WorkItemModel[];

beforeAll(async () => {
  conns = await Promise.all(Array.from({ length: CONNECTIONS }, () => connect(db.name)));
  // The same model on five connections: five independent connection pools.
  models = [];
  for (const c of conns) models.push(await workItemModel(c.connection, { ttl: 10_000 }, 'RaceItem'));
});

afterAll(async () => {
  await db.drop(conns[0].connection);
  await Promise.all(conns.map((c) => c.close()));
});

const jitter = () => sleep(Math.floor(Math.random() * 3));

async function race(id: Types.ObjectId, round: number) {
  const outcomes = await Promise.allSettled(
    Array.from({ length: CONTENDERS }, async (_, i) => {
      await jitter();
      return models[i % CONNECTIONS].lock(id, `round${round}-owner${i}`);
    }),
  );
  const winners = outcomes.filter((o) => o.status === 'fulfilled');
  const losers = outcomes.filter((o): o is PromiseRejectedResult => o.status === 'rejected');
  for (const loser of losers) expect(loser.reason).toBeInstanceOf(LockedError);
  return winners.map((w) => (w as PromiseFulfilledResult<Awaited<ReturnType<WorkItemModel['lock']>>>).value);
}

test(`${CONTENDERS} concurrent lock calls over ${CONNECTIONS} connections yield exactly one holder, ${ROUNDS} rounds`, async () => {
  const WorkItem = models[0];
  const holdersPerRound: number[] = [];
  for (let round = 0; round < ROUNDS; round++) {
    const { _id: id } = await WorkItem.create({ title: `round ${round}` });
    if (round % 2 === 1) {
      // Odd rounds race for an expired lock instead of a free one: the takeover path.
      // (A ttl the emulator can answer within on a loaded machine: a grant that arrives after its
      // ttl is never handed out.)
      await WorkItem.lock(id, 'crashed-holder', { ttl: 300 });
      await sleep(350);
    }
    const winners = await race(id, round);
    holdersPerRound.push(winners.length);
    if (winners.length === 1) {
      expect(await WorkItem.isLocked(id)).toBe(true);
      // The stored record belongs to the winner: the winner can release it, nobody else could.
      await winners[0].unlock();
    }
  }
  expect(holdersPerRound).toEqual(Array(ROUNDS).fill(1));
}, 120_000);

test('critical sections never overlap: a non-atomic counter loses no increment', async () => {
  const WORKERS = 20;
  const SECTIONS_PER_WORKER = 8;
  const DOCS = 3;
  const WorkItem = models[0];
  const raw = conns[0].connection.getClient().db(db.name);
  const counters = raw.collection<{ _id: number; value: number }>('race_counters');
  const inside = raw.collection<{ _id: number; count: number }>('race_overlap');
  const ids: Types.ObjectId[] = [];
  for (let d = 0; d < DOCS; d++) {
    ids.push((await WorkItem.create({ title: `contended ${d}` }))._id);
    await counters.insertOne({ _id: d, value: 0 });
    await inside.insertOne({ _id: d, count: 0 });
  }
  let overlaps = 0;
  let sections = 0;

  await Promise.all(
    Array.from({ length: WORKERS }, async (_, w) => {
      const model = models[w % CONNECTIONS];
      for (let done = 0; done < SECTIONS_PER_WORKER; ) {
        const d = Math.floor(Math.random() * DOCS);
        let item;
        try {
          item = await model.lock(ids[d], `worker-${w}`);
        } catch (error) {
          if (!(error instanceof LockedError)) throw error;
          await sleep(1 + Math.floor(Math.random() * 4));
          continue;
        }
        const entered = await inside.findOneAndUpdate({ _id: d }, { $inc: { count: 1 } }, { returnDocument: 'after' });
        if (entered!.count !== 1) overlaps++;
        const current = await counters.findOne({ _id: d });
        await jitter();
        await counters.updateOne({ _id: d }, { $set: { value: current!.value + 1 } });
        await inside.updateOne({ _id: d }, { $inc: { count: -1 } });
        sections++;
        done++;
        await item.unlock();
      }
    }),
  );

  const total = (await counters.find().toArray()).reduce((sum, c) => sum + c.value, 0);
  expect(overlaps).toBe(0);
  expect(sections).toBe(WORKERS * SECTIONS_PER_WORKER);
  expect(total).toBe(sections);
}, 120_000);
