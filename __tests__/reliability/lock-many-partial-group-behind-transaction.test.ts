/**
 * PRODUCT.md property 15 ("locking several documents takes all of them or none") and the README
 * (Several documents: "a waiting caller never holds some documents while it waits for others";
 * Limits: "During a round, for the few milliseconds of its commands, others may see some of the
 * group's documents locked").
 *
 * A round is one `update` of one statement per document, run one after the other (R23, R24). When
 * one statement's lock record has an uncommitted write by a transaction of another process (the
 * write guard's claim inside a caller transaction: LockStore.claimForWrite), mongod makes that
 * statement wait until the transaction ends (R17: a non-transactional write retries the write
 * conflict inside the server). The statements before it are already applied: the round holds those
 * locks, for the whole length of someone else's transaction (up to 60 s,
 * transactionLifetimeLimitSeconds), not for "a few milliseconds", and a `lockMany` WITHOUT `wait`
 * hangs for that long. Others are refused documents that nobody will ever be handed (all or nothing).
 *
 * The other process's transaction is played here by a raw driver transaction writing the claim
 * record exactly as the guard does (an upsert of `{ _id, claim }` in the lock collection), so this
 * process's registry of open caller transactions (guard/open-transactions.ts) does not know it,
 * as it would not for another process. Replica sets only (transactions).
 */
import { ObjectId, type MongoClient } from 'mongodb';
import { openClient } from '../conformance/support/server';
import { connect, testDatabase, waitUntil, type MonitoredConnection } from '../support/db';
import { replicaSetOnly } from '../support/topology';
import { workItemModel } from '../support/work-item';

jest.setTimeout(120_000);
/** How long lockMany may take to answer while the other transaction is open (it needs milliseconds). */
const WAIT_MS = 15_000;
const db = testDatabase('group_behind_txn');
let a: MonitoredConnection;
let b: MonitoredConnection;
/** The other process: a plain driver client (its commands are not the plugin's, so not recorded). */
let other: MongoClient;

beforeAll(async () => {
  [a, b, other] = await Promise.all([connect(db.name), connect(db.name), openClient()]);
});
afterAll(async () => {
  await db.drop(a.connection);
  await Promise.all([a.close(), b.close(), other.close()]);
});

replicaSetOnly('transactions need a replica set')('a round stuck behind another process\'s transaction on one document holds none of the others', async () => {
  const Items = await workItemModel(a.connection, { ttl: 60_000 }, 'BehindTxn');
  const Bystander = await workItemModel(b.connection, { ttl: 60_000 }, 'BehindTxn');
  const [free, busy] = await Items.insertMany([{ title: 'E: free' }, { title: 'D: written by a transaction' }]);
  const locks = other.db(db.name).collection(Items.lockModel().collection.collectionName);

  const session = other.startSession();
  try {
    session.startTransaction();
    // Another process's guarded write inside its transaction claims D's lock record.
    // The driver's own ObjectId: under Mongoose 8 the model's ids come from Mongoose's bundled bson.
    await locks.updateOne({ _id: new ObjectId(busy._id.toHexString()) }, { $set: { claim: 'other-process', lastWriteAt: new Date() }, $setOnInsert: { expiresAt: new Date(0), fence: 0 } }, { upsert: true, session });

    // Whether lockMany answered before this test sends the transaction's abort (set before the
    // abort is sent: the server may run a stuck round as soon as the abort lands).
    let abortSent = false;
    let answered: 'before the abort' | 'after the abort' | undefined;
    const settle = () => {
      answered = abortSent ? 'after the abort' : 'before the abort';
    };
    const group = Items.lockMany([free._id, busy._id], 'group').then(settle, settle);
    // The transaction stays open until lockMany answers, or for at most WAIT_MS (a round stuck
    // behind it would wait up to its 60 s lifetime): no fixed pause, and no timing assertion.
    await waitUntil(() => answered !== undefined, WAIT_MS);
    // E is in nobody's hands: nobody holds D's lock yet, and the group does not have D.
    const bystander = await Bystander.tryLock(free._id, 'bystander');
    const bystanderGotIt = bystander !== null;
    if (bystander) await bystander.unlock();
    abortSent = true;
    await session.abortTransaction();
    await group;
    expect({ bystanderGotIt, answered }).toEqual({ bystanderGotIt: true, answered: 'before the abort' });
  } finally {
    if (session.inTransaction()) await session.abortTransaction().catch(() => undefined);
    await session.endSession();
  }
});
