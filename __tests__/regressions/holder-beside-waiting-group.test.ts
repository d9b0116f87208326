/**
 * A holder keeps everything a holder can do while a group waits for its document (issue 17 item 2;
 * PRODUCT.md properties 5, 12 and 13). A design that reserves the document a waiting group waits
 * for (fair3 brief design 3: "every other acquisition of that document ... is refused as if it were
 * held") must not count the holder's own operations as "other acquisitions": its renewals (explicit
 * and automatic), its guarded saves, its `lock` again under the same owner (renewed under a new token,
 * docs/api.md), and the continuation of its acquisition in a later request (`resume` with its ticket).
 * Otherwise a holder LOSES its lock because someone started waiting for it.
 *
 * H holds d1 with `acquireLock` (ttl 1.5 s, autoExtend) for a 6 s job; G asks for [d0, d1, d2] with
 * `wait` (d1 is the document it waits for, reserved in such a design). After G has waited 1 s, H
 * saves, extends, resumes by ticket and locks again; its handle's signal never aborts (no renewal
 * failed); then H lets go and G is served.
 */
import { connect, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { groupProblems, timed } from '../support/group-waiting';
import { workItemModel, type WorkItemModel } from '../support/work-item';

jest.setTimeout(120_000);
const db = testDatabase('holder_beside_group');
let hConn: MonitoredConnection;
let gConn: MonitoredConnection;
let H: WorkItemModel;
let G: WorkItemModel;

beforeAll(async () => {
  [hConn, gConn] = [await connect(db.name), await connect(db.name)];
  H = await workItemModel(hConn.connection, { ttl: 1_500, ownerStorage: 'plain' }, 'HolderBesideItem');
  G = await workItemModel(gConn.connection, { ttl: 1_500, ownerStorage: 'plain' }, 'HolderBesideItem');
});

afterAll(async () => {
  await db.drop(hConn.connection);
  await Promise.all([hConn.close(), gConn.close()]);
});

test('the holder of the document a group waits for renews, saves, resumes and locks again without losing it', async () => {
  const ids = (await H.insertMany([{ title: 'd0' }, { title: 'd1' }, { title: 'd2' }])).map((d) => d._id).sort((x, y) => x.toHexString().localeCompare(y.toHexString()));
  const handle = await H.acquireLock(ids[1]!, 'H', { ttl: 1_500 });
  const group = timed(G.lockMany(ids, 'G', { wait: 30_000, ttl: 5_000 }));
  await sleep(1_000);
  const steps: Record<string, string> = {};
  const step = async (name: string, fn: () => Promise<unknown>) => {
    try {
      await fn();
      steps[name] = 'ok';
    } catch (error) {
      steps[name] = `${(error as Error).constructor.name}: ${(error as Error).message}`;
    }
  };
  handle.document.edits += 1;
  await step('save', () => handle.document.save());
  await step('extend', () => handle.extend(1_500));
  await step('resume', async () => {
    const resumed = await H.lock(ids[1]!, 'H', { resume: handle.document.heldLock()!.ticket });
    resumed.edits += 1;
    await resumed.save();
  });
  await sleep(3_000); // autoExtend renews meanwhile (ttl 1.5 s)
  await step('autoExtend', async () => {
    if (handle.signal.aborted) throw handle.signal.reason as Error;
  });
  await step('lock again', async () => {
    const again = await H.lock(ids[1]!, 'H', { ttl: 1_500 });
    await again.unlock();
  });
  await handle.release().catch(() => undefined);
  const g = await group;
  const problems = g.ok ? await groupProblems(G, g.value, 'G') : [String(g.error)];
  if (g.ok) await G.unlockMany(g.value);
  expect(steps).toEqual({ save: 'ok', extend: 'ok', resume: 'ok', autoExtend: 'ok', 'lock again': 'ok' });
  expect(problems).toEqual([]);
});
