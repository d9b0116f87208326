/**
 * PRODUCT.md property 14: `lockNext` "answers 'none' only if at some instant during the call no
 * matching free document existed", and docs/limits.md (fair3): "Reservations are no locks". A
 * document that nobody holds, only reserved by a waiting group (here a group whose process was
 * killed while it waited, so the reservation stays until it lapses, up to 3 s), is free: `lockNext`
 * with no `wait` must claim it, not answer null.
 *
 * The child process asks for [j, k] with `wait` while H holds j, so it waits for j (reserving it,
 * in a design that reserves), and is killed after 2 s. H then lets go of j; at once a worker calls
 * `lockNext({ _id: j })` without waiting.
 */
import type { Types } from 'mongoose';
import { sleep, testDatabase } from '../support/db';
import type { WorkItemModel } from '../support/work-item';
import { kill, startWaiter, waiterTestModel } from '../reliability/support/waiter';

jest.setTimeout(120_000);
const db = testDatabase('next_free_reserved');
const MODEL = 'NextReservedItem';
const fixture = waiterTestModel(db, MODEL, { ttl: 30_000, ownerStorage: 'plain' });
let X: WorkItemModel;
beforeAll(() => ({ model: X } = fixture));

test('lockNext without wait claims the one matching document, free though a killed group waiter had reserved it', async () => {
  const [j, k] = (await X.insertMany([{ title: 'j' }, { title: 'k' }])).map((d) => d._id).sort((a: Types.ObjectId, b: Types.ObjectId) => a.toHexString().localeCompare(b.toHexString()));
  const hold = await X.lock(j!, 'H');
  const child = await startWaiter(db.name, { modelName: MODEL, ids: [j!, k!], ttl: 30_000, owner: 'G', ownerStorage: 'plain' });
  await sleep(2_000);
  await kill(child);
  await hold.unlock();
  const claimed = await X.lockNext({ _id: j }, 'W');
  const record = await X.lockModel().collection.findOne({ _id: j! });
  console.log(`lockNext right after the release: ${claimed ? 'claimed j' : 'null'}; j's record ${JSON.stringify({ owner: record?.owner, expiresAt: record?.expiresAt, reservedUntil: (record as { reservedUntil?: unknown } | null)?.reservedUntil })}`);
  if (claimed) await claimed.unlock();
  expect(claimed?._id).toEqual(j);
});
