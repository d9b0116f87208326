/**
 * Cost (issue 17 fairness work, attack-fair4 brief): making waiting fairer (shorter prefix leases
 * renewed to the full ttl; single-document waiters that reserve, the oldest keeping the
 * reservation) must not cost the calls that never wait, nor the uncontended calls that could wait.
 * Each case below records every command the call sends (name and collection, in order), with the
 * list main sent on 2026-11-26 (a483dfc): a new command (a reserve, a clear, a renewal) on these
 * paths is a cost every caller pays, and fails here.
 *
 * Covered: tryLock, lock without and with `wait` (free document), withLock, lockMany / lockAll
 * without and with `wait` (free documents), and each one's release. A `wait` call that was refused
 * only briefly (< 250 ms, before any reservation) is pinned too: it must not reserve.
 */
import { performance } from 'node:perf_hooks';
import type { Types } from 'mongoose';
import { lockAll, unlockAll } from '../../src';
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const db = testDatabase('uncontended_cost');
let conn: MonitoredConnection;
let other: MonitoredConnection;
let Item: WorkItemModel;
let Invoice: WorkItemModel;
let OtherItem: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  other = await connect(db.name);
  Item = await workItemModel(conn.connection, { ttl: 10_000 }, 'CostItem');
  Invoice = await workItemModel(conn.connection, { ttl: 10_000 }, 'CostInvoice');
  OtherItem = await workItemModel(other.connection, { ttl: 10_000 }, 'CostItem');
});

afterAll(async () => {
  await db.drop(conn.connection);
  await Promise.all([conn.close(), other.close()]);
});

const IGNORED = new Set(['hello', 'isMaster', 'ismaster', 'ping', 'endSessions', 'saslStart', 'saslContinue', 'buildInfo', 'getParameter', 'killCursors', 'getMore', 'aggregate']);

/**
 * `name collection` of every command `fn` sends on `conn`, in order. Change-stream traffic
 * (aggregate with $changeStream, its getMores and killCursors) is left out: whether a stream is
 * open depends on other tests' waits, not on the call measured.
 */
async function commandsOf(fn: () => Promise<unknown>): Promise<string[]> {
  const seen: string[] = [];
  const listener = (event: { commandName: string; command: Record<string, unknown> }) => {
    if (IGNORED.has(event.commandName)) return;
    seen.push(`${event.commandName} ${String(event.command[event.commandName])}`);
  };
  const client = conn.connection.getClient();
  client.on('commandStarted', listener);
  try {
    await fn();
  } finally {
    client.off('commandStarted', listener);
  }
  return seen;
}

async function fresh(model: WorkItemModel = Item, n = 1): Promise<Types.ObjectId[]> {
  return (await model.insertMany(Array.from({ length: n }, (_, i) => ({ title: `c${i}` })))).map((d) => d._id);
}

const ITEMS = 'costitems';
const LOCKS = 'costitems.locks';
const INVOICES = 'costinvoices';
const INVOICE_LOCKS = 'costinvoices.locks';

beforeAll(async () => {
  // Warm up: indexes checked, change streams opened where they exist, so later calls send only their own commands.
  const [id] = await fresh();
  await (await Item.lock(id!, 'warm', { wait: 1_000 })).unlock();
  await Item.unlockMany(await Item.lockMany(await fresh(Item, 2), 'warm', { wait: 1_000 }));
  const [inv] = await fresh(Invoice);
  await unlockAll(await lockAll([[Item, (await fresh())[0]!], [Invoice, inv!]], 'warm', { wait: 1_000 }));
});

test('tryLock of a free document, and its unlock: the commands main sends', async () => {
  const [id] = await fresh();
  let doc: Awaited<ReturnType<typeof Item.tryLock>> = null;
  expect(await commandsOf(async () => (doc = await Item.tryLock(id!, 'try')))).toEqual([`findAndModify ${LOCKS}`, `find ${ITEMS}`]);
  expect(await commandsOf(() => doc!.unlock())).toEqual([`update ${LOCKS}`]);
});

test('tryLock of a held document (refused): the commands main sends', async () => {
  const [id] = await fresh();
  const held = await OtherItem.lock(id!, 'holder');
  expect(await commandsOf(async () => expect(await Item.tryLock(id!, 'try')).toBeNull())).toEqual([`findAndModify ${LOCKS}`]);
  await held.unlock();
});

test('lock without wait, free and held: the commands main sends', async () => {
  const [id] = await fresh();
  let doc: Awaited<ReturnType<typeof Item.lock>> | undefined;
  expect(await commandsOf(async () => (doc = await Item.lock(id!, 'plain')))).toEqual([`findAndModify ${LOCKS}`, `find ${ITEMS}`]);
  expect(await commandsOf(() => Item.lock(id!, 'other').catch(() => undefined))).toEqual([`findAndModify ${LOCKS}`]);
  await doc!.unlock();
});

test('lock with wait of a free document: the same commands as without wait', async () => {
  const [id] = await fresh();
  let doc: Awaited<ReturnType<typeof Item.lock>> | undefined;
  expect(await commandsOf(async () => (doc = await Item.lock(id!, 'waiter', { wait: 5_000 })))).toEqual([`findAndModify ${LOCKS}`, `find ${ITEMS}`]);
  await doc!.unlock();
});

test('withLock with wait of a free document: the lock commands, the work, the release', async () => {
  const [id] = await fresh();
  expect(await commandsOf(() => Item.withLock(id!, 'with', async () => undefined, { wait: 5_000 }))).toEqual([`findAndModify ${LOCKS}`, `find ${ITEMS}`, `update ${LOCKS}`]);
});

test('lock with wait refused briefly (held 100 ms, well under the 250 ms before ordered waiting): retries, no reservation command', async () => {
  const [id] = await fresh();
  const held = await OtherItem.lock(id!, 'holder');
  let doc: Awaited<ReturnType<typeof Item.lock>> | undefined;
  const started = performance.now();
  const sent = commandsOf(async () => (doc = await Item.lock(id!, 'brief', { wait: 5_000 })));
  await sleep(100);
  await held.unlock();
  const commands = await sent;
  const ms = performance.now() - started;
  console.log(`brief single wait: ${Math.round(ms)} ms, ${commands.join(', ')}`);
  // Only a call served well before 250 ms proves anything here (a loaded machine may take longer).
  if (ms > 200) return;
  // Each attempt is one findAndModify; the last is followed by the load. Nothing else (no update:
  // a reservation is for waiters refused for longer).
  expect(commands.at(-1)).toBe(`find ${ITEMS}`);
  expect(commands.slice(0, -1).every((c) => c === `findAndModify ${LOCKS}`)).toBe(true);
  expect(commands.length).toBeGreaterThanOrEqual(3);
  await doc!.unlock();
});

test('lockMany of free documents, without and with wait: one update, one find of the grants, one load; unlockMany one update', async () => {
  for (const wait of [undefined, 5_000]) {
    const ids = await fresh(Item, 3);
    let docs: Awaited<ReturnType<typeof Item.lockMany>> = [];
    expect(await commandsOf(async () => (docs = await Item.lockMany(ids, 'many', wait === undefined ? {} : { wait })))).toEqual([`update ${LOCKS}`, `find ${LOCKS}`, `find ${ITEMS}`]);
    expect(await commandsOf(() => Item.unlockMany(docs))).toEqual([`update ${LOCKS}`]);
  }
});

test('lockAll of free documents over two lock collections, with wait: one update and one grants find per collection, one load per model', async () => {
  const [a] = await fresh();
  const [b] = await fresh(Invoice);
  let docs: object[] = [];
  const commands = await commandsOf(async () => (docs = await lockAll([[Item, a!], [Invoice, b!]], 'all', { wait: 5_000 })));
  expect([...commands].sort()).toEqual([`find ${INVOICES}`, `find ${INVOICE_LOCKS}`, `find ${ITEMS}`, `find ${LOCKS}`, `update ${INVOICE_LOCKS}`, `update ${LOCKS}`].sort());
  await unlockAll(docs as never);
});

test('lockMany with wait, refused once then free within 100 ms (before ordered waiting): no reservation, no renewal; ends with the round\'s three commands', async () => {
  const ids = await fresh(Item, 2);
  const held = await OtherItem.lock(ids[1]!, 'holder');
  let docs: Awaited<ReturnType<typeof Item.lockMany>> = [];
  const started = performance.now();
  const sent = commandsOf(async () => (docs = await Item.lockMany(ids, 'brief-group', { wait: 5_000 })));
  await sleep(100);
  await held.unlock();
  const commands = await sent;
  const ms = performance.now() - started;
  console.log(`brief group wait: ${Math.round(ms)} ms, ${commands.join(', ')}`);
  if (ms > 200) {
    await Item.unlockMany(docs);
    return;
  }
  // The refused round: update, find of the grants, release by token (update), blockers (find);
  // then checks (find) and, once free, the granted round: update, find, load.
  expect(commands.slice(-3)).toEqual([`update ${LOCKS}`, `find ${LOCKS}`, `find ${ITEMS}`]);
  // Updates: the refused round's take and its release, the granted round's take: 3, no reservation.
  expect(commands.filter((c) => c === `update ${LOCKS}`).length).toBe(3);
  await Item.unlockMany(docs);
});
