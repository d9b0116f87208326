/**
 * The grant's own clearing (branch reservecost: a reserving single waiter's acquisition removes the
 * reservation in the same command when `reservedBy` is its key) never removes someone else's
 * reservation (attack-5 brief: "an older waiter took it over meanwhile").
 *
 * The scene, ROUNDS times: H holds d; O (older: refused first) and Y (younger) wait for d. The
 * server holds O's first reserve (`update`, failCommand blockConnection, 3 s), so Y reserves d
 * first and its later attempts carry the clearing stage; O's reserve then lands and takes the
 * reservation over (older). H lets go. Asserted: O is served first (Y's attempts, refused by O's
 * reservation, removed nothing), and once both are done no reservation is left on d.
 * Both topologies.
 */
import { blockCommands, failPointOff } from '../plugin/guard/support';
import { sleep } from '../support/db';
import { retryUntil } from '../support/group-waiting';
import { usesPrivateServer } from '../support/private-server';
import { waiterCast } from '../support/waiter-cast';

usesPrivateServer();
jest.setTimeout(180_000);
const ROUNDS = 4;
const cast = waiterCast('grant_spares_older', 'SparesOlderItem', 30_000);

test('a younger waiter that reserved first and lost the reservation to an older one: the older is served first, nothing left', async () => {
  const [d, warm] = (await cast.H.insertMany([{ title: 'spares' }, { title: 'warm-up' }])).map((x) => x._id);
  const locks = cast.H.lockModel().collection;
  // Warm-up (each connection's first lock call also sets the lock collection up): so O's first
  // refusal does come before Y's, and O is the older waiter.
  for (const model of [cast.H, cast.O, cast.Y]) await (await model.lock(warm!, 'warm')).unlock();
  const firsts: string[] = [];
  const leftovers: unknown[] = [];
  for (let i = 0; i < ROUNDS; i++) {
    const held = await cast.H.lock(d!, 'H');
    await blockCommands(cast.admin.connection, { appName: cast.oApp, namespace: `${cast.dbName}.${locks.collectionName}`, commands: ['update'], blockTimeMS: 3_000, times: 1 });
    const order: string[] = [];
    const o = cast.O.lock(d!, 'O', { wait: 30_000 }).then((doc) => (order.push('O'), doc));
    await sleep(100);
    const y = cast.Y.lock(d!, 'Y', { wait: 30_000 }).then((doc) => (order.push('Y'), doc));
    // Y reserves (O's reserve is held by the server), then O's reserve lands and takes it over.
    const reservedBy = async () => (await locks.findOne({ _id: d }))?.reservedBy;
    const yReserved = await retryUntil(async () => (await reservedBy()) ?? null, 5_000, 20);
    const before = yReserved.value;
    const taken = await retryUntil(async () => ((await reservedBy()) !== before ? true : null), 8_000, 20);
    const after = taken.value ? await reservedBy() : before;
    await held.unlock();
    const first = await Promise.race([o, y]);
    await first.unlock();
    const second = await (order[0] === 'O' ? y : o);
    await second.unlock();
    await failPointOff(cast.admin.connection);
    await sleep(300);
    const record = await locks.findOne({ _id: d });
    const live = record?.reservedUntil instanceof Date && record.reservedUntil.getTime() > Date.now();
    if (live) leftovers.push(record);
    expect(typeof before).toBe('string'); // Y had reserved
    expect(after).not.toBe(before); // O took it over
    firsts.push(`${order[0]} (reserved by ${before === after ? 'the same' : 'another'} key after O's reserve landed)`);
  }
  console.log(`older takeover, served first per round: ${firsts.join(' / ')}`);
  expect(firsts.filter((f) => !f.startsWith('O'))).toEqual([]);
  expect(leftovers).toEqual([]);
});
