/**
 * Between a single-document waiter (`lock` with `wait`) and a waiting group that both wait for one
 * document, the OLDER waiter gets it first (group-reservation.ts: each carries `since`, the server
 * time of its call's first refusal, and the oldest keeps the document's reservation).
 *
 * d is held by H. Waiter A starts, 1.2 s later waiter B starts (both refused; both reserve d once
 * refused for 250 ms, A's renewals every second), then H releases d: A must be granted first (B
 * cannot be granted while A holds d; each holds it 300 ms). Both orders of single and group. A
 * third case makes the younger waiter reserve first: the group waits for e (held by H2) before d
 * in its canonical order, so the single waiter reserves d first; once e is released the group
 * moves on to d and, being older, takes d's reservation over (observed in the record) before H
 * releases d.
 *
 * Before single waiters reserved, a single waiter started first was still served after the
 * younger group (the group reserved d, the single waiter never did).
 */
import type { Types } from 'mongoose';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

jest.setTimeout(120_000);
const db = testDatabase('oldest_first');
const conns: MonitoredConnection[] = [];
const models: WorkItemModel[] = [];

beforeAll(async () => {
  for (let i = 0; i < 3; i++) {
    const c = await connect(db.name);
    conns.push(c);
    models.push(await workItemModel(c.connection, { ttl: 30_000, ownerStorage: 'plain' }, 'OldestFirstItem'));
  }
});

afterAll(async () => {
  await db.drop(conns[0]!.connection);
  await Promise.all(conns.map((c) => c.close()));
});

type Kind = 'single' | 'group';

/** Starts a waiter of `kind` for d (a group also asks for `other`); on its grant it notes its name, holds 300 ms and releases. */
function waiter(kind: Kind, model: WorkItemModel, d: Types.ObjectId, other: Types.ObjectId, order: string[]): Promise<void> {
  const name = `${kind}`;
  if (kind === 'single') {
    return model.lock(d, name, { wait: 60_000 }).then(async (doc) => {
      order.push(name);
      await sleep(300);
      await doc.unlock();
    });
  }
  return model.lockMany([other, d], name, { wait: 60_000 }).then(async (docs) => {
    order.push(name);
    await sleep(300);
    await model.unlockMany(docs);
  });
}

const reservation = async (model: WorkItemModel, id: Types.ObjectId) => {
  const record = await model.lockModel().collection.findOne({ _id: id });
  return { since: record?.reservedSince instanceof Date ? record.reservedSince.getTime() : undefined, live: record?.reservedUntil instanceof Date && record.reservedUntil.getTime() > Date.now() };
};

test.each<[Kind, Kind]>([
  ['group', 'single'],
  ['single', 'group'],
])('the older waiter (%s, started 1.2 s before a %s) gets the document first', async (first, second) => {
  const [d, e1, e2] = (await models[0]!.insertMany([{ title: 'd' }, { title: 'e1' }, { title: 'e2' }])).map((x) => x._id);
  const h = await models[0]!.lock(d!, 'holder');
  const order: string[] = [];
  const older = waiter(first, models[1]!, d!, e1!, order);
  await sleep(1_200);
  const younger = waiter(second, models[2]!, d!, e2!, order);
  await sleep(1_800);
  await h.unlock();
  await Promise.all([older, younger]);
  console.log(`older ${first}, younger ${second}: served in the order ${order.join(', ')}`);
  expect(order).toEqual([first, second]);
});

test('an older group that reaches d after a younger single waiter reserved it takes the reservation over and is served first', async () => {
  // e before d in the group's canonical order (ObjectIds of one insertMany ascend).
  const [e, d] = (await models[0]!.insertMany([{ title: 'e' }, { title: 'd' }])).map((x) => x._id);
  const hd = await models[0]!.lock(d!, 'holder');
  const he = await models[0]!.lock(e!, 'holder-of-e');
  const order: string[] = [];
  const group = waiter('group', models[1]!, d!, e!, order);
  await sleep(1_200);
  const single = waiter('single', models[2]!, d!, e!, order);
  // The single waiter reserves d (the group waits for e and reserves e).
  const deadline = Date.now() + 20_000;
  let first = await reservation(models[0]!, d!);
  while (first.since === undefined || !first.live) {
    if (Date.now() > deadline) throw new Error(`the single waiter did not reserve d within 20 s: ${JSON.stringify(first)}`);
    await sleep(50);
    first = await reservation(models[0]!, d!);
  }
  await he.unlock();
  // The group takes e, waits for d and, older, takes d's reservation over.
  let now = await reservation(models[0]!, d!);
  while (!(now.since !== undefined && now.since < first.since!)) {
    if (Date.now() > deadline) throw new Error(`d's reservation was not taken over by the older group within 20 s: ${JSON.stringify({ first, now })}`);
    await sleep(50);
    now = await reservation(models[0]!, d!);
  }
  await hd.unlock();
  await Promise.all([group, single]);
  console.log(`takeover: d reserved since ${new Date(first.since!).toISOString()} by the single waiter, then since ${new Date(now.since!).toISOString()} by the group; served in the order ${order.join(', ')}`);
  expect(order).toEqual(['group', 'single']);
});
