/**
 * The process's map of leases (src/held-lock.ts, `leases`: one shared lease per acquisition, so
 * every instance of it hears of each command that moved its expiry, PRODUCT.md property 13) must
 * never carry a lease from one deployment into another.
 *
 * Its key is the acquisition's token, the lock collection's NAMESPACE and the `_id`
 * (held-lock.ts, leaseKey; `scope` = LockStore.namespace, `<db>.<collection>.locks`). A namespace
 * is a name within one deployment. A lockAll group gives every member one token (lock-group.ts),
 * and lockAll takes the same database, collection and `_id` on two deployments as two documents
 * (regressions/lock-all-same-names-two-deployments.test.ts): the two members' leases then have one
 * key. Whichever ticket is read last owns the entry, so a resume of the other member's ticket joins
 * the wrong lease: its command moves the expiry on deployment A, while the lease it updates (and
 * shortens) is deployment B's, and the instances of A's acquisition never hear of it. With a
 * resume that shortens A's lock, A's original instance goes on counting on its old lease after A's
 * server freed the lock and another owner took it: two owners believe they hold it.
 *
 * The case whose ticket is read second passes (its lease owns the entry): the control.
 *
 * Needs a second server (a private one of the test backend's kind); skipped, with a printed
 * reason, where none can be started. Runs on a replica set and on a standalone server.
 */
import { Types } from 'mongoose';
import { lockAll } from '../../src';
import { testDatabase, waitUntil } from '../support/db';
import { twoDeployments } from '../support/two-deployments';

jest.setTimeout(90_000);

const db = testDatabase('leasemap_two_deployments');
const deployments = twoDeployments(db, 'LeaseMapItem', { ttl: 30_000, what: 'lease map across two deployments' });

test.each([
  ['read first', true],
  ['read second', false],
])("a resume of one lockAll member (its ticket %s) moves that member's lease, not its namesake's on another deployment; no two owners believe they hold one lock", async (_order, liveFirst) => {
  if (deployments.skipped) return;
  const { Here, There } = deployments;
  const id = new Types.ObjectId();
  await Here.create({ _id: id, title: 'live' });
  await There.create({ _id: id, title: 'archive copy' });
  const [live, copy] = await lockAll(
    [
      [Here, id],
      [There, id],
    ],
    'alice',
    { ttl: 30_000 },
  );
  // A web app keeps both tickets. On perf2 the one read second owns the map's entry: read second,
  // the live ticket's resume finds its own lease (passes); read first, the copy's (fails).
  const readLive = () => live.heldLock()!.ticket;
  const readCopy = () => copy.heldLock()!.ticket;
  const liveTicket = liveFirst ? readLive() : (readCopy(), readLive());
  if (liveFirst) readCopy();

  // A later request continues the live document's lock with a short ttl: the live server now frees it in 1.5 s.
  const resumed = await Here.lock(id, 'alice', { resume: liveTicket, ttl: 1_500 });
  expect(resumed.title).toBe('live');
  const beliefs = { live: live.heldLock()?.msLeft() ?? 0, copy: copy.heldLock()?.msLeft() ?? 0 };

  // Independent check: once the live server has freed it, bob takes it; alice's original instance must not still count on it.
  const bobGotIt = await waitUntil(async () => (await Here.tryLock(id, 'bob')) !== null, 20_000, 100);
  const liveAfterBob = live.heldLock()?.msLeft() ?? 0;
  expect({
    // The live acquisition's instances count on no more than its server now grants ...
    liveAtMost1500: beliefs.live <= 1_500,
    // ... and the copy's lock, which nobody touched, keeps its 30 s.
    copyOver20s: beliefs.copy > 20_000,
    bobGotIt,
    aliceStillCountsOnItAfterBob: liveAfterBob > 0,
  }).toEqual({ liveAtMost1500: true, copyOver20s: true, bobGotIt: true, aliceStillCountsOnItAfterBob: false });
  await Here.forceUnlock(id);
  await copy.unlock();
});
