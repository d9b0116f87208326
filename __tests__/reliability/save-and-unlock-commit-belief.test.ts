/**
 * PRODUCT.md property 13 ("no client believes it holds a lock longer than the server grants it")
 * and property 1 as the holders see it, for `saveAndUnlock()` on a replica set: the write guard
 * releases the lock inside its own transaction, with the save (write-guard.ts check: "the release
 * is the check"), so the release takes effect when the server applies the commit, and from then on
 * another owner can take the lock.
 *
 * The instance kept counting on its lock until saveAndUnlock's reply was processed
 * (src/plugin.ts saveAndUnlockDocument: `releaseLease` after `saveWithContext` returns): while the
 * commit's reply is on its way back (a slow network path, a loaded event loop), the instance's
 * `heldLock().msLeft()`, and for a member of a group the group handle's `msLeft()`, say the lock
 * is held for most of its ttl while another owner already holds it: two holders believe at once.
 * A separate release ends the holder's belief when it is SENT (model finding F2, CHANGELOG); the
 * release carried by the commit did not.
 *
 * The commit's reply is held back here after the server applied it (ClientSession's
 * commitTransaction resolves late, as on a slow path back); the second owner takes the lock
 * meanwhile, on another connection.
 * Replica sets only (the guard's own transactions).
 */
import { mongo, type Types } from 'mongoose';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { usesPrivateServer } from '../support/private-server';
import { replicaSetOnly } from '../support/topology';
import { workItemModel, type WorkItemModel } from '../support/work-item';

// Two tests make the commit fail (failCommand on commitTransaction).
usesPrivateServer();

const db = testDatabase('save_unlock_commit_belief');
let first: MonitoredConnection;
let second: MonitoredConnection;
let A: WorkItemModel;
let B: WorkItemModel;

beforeAll(async () => {
  first = await connect(db.name);
  second = await connect(db.name);
  A = await workItemModel(first.connection, { ttl: 30_000 }, 'CommitBelief');
  B = await workItemModel(second.connection, { ttl: 30_000 }, 'CommitBelief');
});

afterAll(async () => {
  await db.drop(first.connection);
  await Promise.all([first.close(), second.close()]);
});

/** Holds back the reply of the next commitTransaction after the server applied it. */
function holdNextCommitReply(): { applied: Promise<void>; deliver(): void; restore(): void } {
  const proto = mongo.ClientSession.prototype as unknown as { commitTransaction: (...args: unknown[]) => Promise<unknown> };
  const original = proto.commitTransaction;
  let armed = true;
  let applied!: () => void;
  const appliedPromise = new Promise<void>((resolve) => (applied = resolve));
  let deliver!: () => void;
  const delivered = new Promise<void>((resolve) => (deliver = resolve));
  proto.commitTransaction = async function heldBack(this: unknown, ...args: unknown[]) {
    const result = await original.apply(this, args);
    if (armed) {
      armed = false;
      applied();
      await delivered;
    }
    return result;
  };
  return { applied: appliedPromise, deliver, restore: () => (proto.commitTransaction = original) };
}

const txnTest = replicaSetOnly('saveAndUnlock releases inside the guard\'s own transaction on replica sets only');

txnTest("a single lock: once the commit that releases it has applied, the instance no longer counts on it while another owner holds it", async () => {
  const { _id: id } = await A.create({ title: 'one' });
  const alice = await A.lock(id, 'alice');
  const hold = holdNextCommitReply();
  try {
    alice.title = 'saved by alice';
    const saving = alice.saveAndUnlock();
    await hold.applied;
    const bob = await B.lock(id, 'bob');
    const beliefs = { alice: alice.heldLock()?.msLeft() ?? 0, bob: bob.heldLock()!.msLeft() };
    hold.deliver();
    await saving;
    expect(beliefs.bob).toBeGreaterThan(0);
    expect(beliefs.alice).toBe(0);
    await bob.unlock();
  } finally {
    hold.deliver();
    hold.restore();
  }
});

txnTest("a member of a group: neither the member nor the group handle counts on it once the commit applied and another owner took it", async () => {
  const docs = await A.create([{ title: 'm1' }, { title: 'm2' }]);
  const ids: Types.ObjectId[] = docs.map((d) => d._id);
  const handle = await A.acquireLocks(ids, 'carol', { autoExtend: false });
  const [member] = handle.documents;
  const hold = holdNextCommitReply();
  try {
    member.title = 'saved by carol';
    const saving = member.saveAndUnlock();
    await hold.applied;
    const dave = await B.lock(ids[0], 'dave');
    const beliefs = { member: member.heldLock()?.msLeft() ?? 0, dave: dave.heldLock()!.msLeft(), group: handle.msLeft(), lost: handle.signal.aborted };
    hold.deliver();
    await saving;
    expect(beliefs.dave).toBeGreaterThan(0);
    expect(beliefs.member).toBe(0);
    // The member left the group (its holder released it): the group counts on the other one.
    expect(beliefs.lost).toBe(false);
    expect(beliefs.group).toBeGreaterThan(0);
    expect(handle.signal.aborted).toBe(false);
    await dave.unlock();
  } finally {
    hold.deliver();
    hold.restore();
    await handle.release().catch(() => undefined);
  }
});

txnTest('a saveAndUnlock whose save matches nothing (the transaction is aborted, the lock stays held): the instance still counts on it', async () => {
  const { _id: id } = await A.create({ title: 'gone soon' });
  const erin = await A.lock(id, 'erin');
  // Deleted behind the plugin's back: the save matches nothing, the guard aborts its transaction,
  // release included (write-guard.ts afterHolderWrite, NothingWritten).
  await second.connection.getClient().db(db.name).collection(A.collection.collectionName).deleteOne({ _id: id });
  erin.title = 'lost';
  const error = await erin.saveAndUnlock().then(() => undefined, (e: unknown) => e);
  expect(error).toBeDefined();
  expect(erin.heldLock()!.msLeft()).toBeGreaterThan(0);
  expect(await A.isLocked(id)).toBe(true);
  await erin.unlock();
});

/** Fails the next `times` commitTransaction commands of this test's connections with `data`. */
async function failCommits(times: number, data: Record<string, unknown>): Promise<void> {
  await second.connection.getClient().db('admin').command({ configureFailPoint: 'failCommand', mode: { times }, data: { failCommands: ['commitTransaction'], ...data } });
}

txnTest('a commit refused as a transient error (the transaction did not apply) is retried: the save and the release commit together', async () => {
  const { _id: id } = await A.create({ title: 'retried' });
  const frank = await A.lock(id, 'frank');
  await failCommits(1, { errorCode: 112, errorLabels: ['TransientTransactionError'] });
  try {
    frank.title = 'saved after a retried commit';
    await frank.saveAndUnlock();
  } finally {
    await second.connection.getClient().db('admin').command({ configureFailPoint: 'failCommand', mode: 'off' });
  }
  expect(frank.heldLock()).toBeNull();
  expect(await A.isLocked(id)).toBe(false);
  expect((await A.findById(id))!.title).toBe('saved after a retried commit');
});

txnTest('a commit that applied but whose outcome stays unknown to the guard: the instance counts on nothing', async () => {
  const { _id: id } = await A.create({ title: 'unknown' });
  const gina = await A.lock(id, 'gina');
  // Every commit applies on the server, and its answer is lost as a MaxTimeMSExpired would be: the
  // driver labels it UnknownTransactionCommitResult, and the guard does not retry that one
  // (transaction.ts commit). The release has applied; the guard cannot know it.
  const proto = mongo.ClientSession.prototype as unknown as { commitTransaction: (...args: unknown[]) => Promise<unknown> };
  const original = proto.commitTransaction;
  proto.commitTransaction = async function answerLost(this: unknown, ...args: unknown[]) {
    await original.apply(this, args);
    throw new mongo.MongoServerError({ message: 'operation exceeded time limit', errmsg: 'operation exceeded time limit', code: 50, codeName: 'MaxTimeMSExpired', errorLabels: ['UnknownTransactionCommitResult'] });
  };
  let error: unknown;
  try {
    gina.title = 'saved, answer lost';
    error = await gina.saveAndUnlock().then(() => undefined, (e: unknown) => e);
  } finally {
    proto.commitTransaction = original;
  }
  expect(error).toBeDefined();
  expect(await A.isLocked(id)).toBe(false);
  expect(gina.heldLock()?.msLeft() ?? 0).toBe(0);
});
