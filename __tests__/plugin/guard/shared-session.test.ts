/**
 * Property 10 (writes to documents nobody has locked succeed as they would without the plugin),
 * for writes that carry a session outside a transaction.
 *
 * The guard's own transaction runs on a session of its own, never on the caller's: a session holds
 * one transaction at a time (transactions spec, "startTransaction": "Transaction already in
 * progress"), and an application may start several writes on one session at once (Promise.all),
 * which the driver runs fine without the plugin. Causal consistency is kept by hand: the guard's
 * transaction starts after the caller's operationTime (its first statement carries
 * `readConcern.afterClusterTime`: transactions spec, "Interaction with Causal Consistency"), and
 * the caller's session is advanced to the guard's times afterwards (causal consistency spec,
 * "advanceOperationTime").
 *
 * Found by the attack on the guard: concurrent writes on one session joined each other's guard
 * transaction or failed with "Transaction already in progress".
 */
import { Schema, type mongo } from 'mongoose';
import { replicaSetOnly } from '../../support/topology';
import { connect, testDatabase, type MonitoredConnection } from '../../support/db';
import { workItemModel, type WorkItemModel } from '../../support/work-item';
import { outcome, rawLocks } from './support';

const db = testDatabase('guard_sharedsession');
let conn: MonitoredConnection;
let M: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  M = await workItemModel(conn.connection, { ttl: 30_000 });
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

const needsTransactions = replicaSetOnly('the guard runs its own transactions on replica sets');

needsTransactions('concurrent guarded writes sharing one session (outside a transaction) all succeed', async () => {
  const docs = await M.insertMany(Array.from({ length: 6 }, (_, i) => ({ title: `doc ${i}`, edits: 0 })));
  const session = await conn.connection.startSession();
  try {
    const results = await Promise.all(docs.map((d) => outcome(M.updateOne({ _id: d._id }, { $inc: { edits: 1 } }, { session }).exec())));
    expect(results.filter((r) => !r.ok).map((r) => String((r as { error: unknown }).error))).toEqual([]);
    expect(session.inTransaction()).toBe(false);
  } finally {
    await session.endSession();
  }
  const edits = (await M.find({ _id: { $in: docs.map((d) => d._id) } }).lean()).map((d) => d.edits);
  expect(edits).toEqual([1, 1, 1, 1, 1, 1]);
  expect(await rawLocks(M).countDocuments({})).toBe(0);
}, 30_000);

needsTransactions('control: the same writes on a model without the plugin all succeed', async () => {
  const Plain = conn.connection.model('PlainShared', new Schema({ title: String, edits: Number }));
  const docs = await Plain.insertMany(Array.from({ length: 6 }, (_, i) => ({ title: `doc ${i}`, edits: 0 })));
  const session = await conn.connection.startSession();
  try {
    const results = await Promise.all(docs.map((d) => outcome(Plain.updateOne({ _id: d._id }, { $inc: { edits: 1 } }, { session }).exec())));
    expect(results.filter((r) => !r.ok)).toEqual([]);
  } finally {
    await session.endSession();
  }
}, 30_000);

needsTransactions("the guard's transaction reads after the caller's session, and the caller's session moves past the guarded write", async () => {
  const { _id: id } = await M.create({ title: 'causal', edits: 0 });
  const session = await conn.connection.startSession({ causalConsistency: true });
  const started: { name: string; lsid: unknown; readConcern: unknown }[] = [];
  const listener = (event: mongo.CommandStartedEvent) => {
    const command = event.command as { lsid?: { id?: { toString(encoding: string): string } }; readConcern?: unknown };
    started.push({ name: event.commandName, lsid: command.lsid?.id?.toString('hex'), readConcern: command.readConcern });
  };
  const client = conn.connection.getClient();
  try {
    await M.findById(id).session(session); // gives the caller's session an operationTime
    const before = session.operationTime!;
    expect(before).toBeDefined();
    const callerLsid = (session.id as { id: { toString(encoding: string): string } }).id.toString('hex');
    client.on('commandStarted', listener);
    await M.updateOne({ _id: id }, { $inc: { edits: 1 } }, { session });
    client.off('commandStarted', listener);

    const guarded = started.filter((c) => c.name !== 'endSessions');
    // Nothing of the guard's transaction ran on the caller's session...
    expect(guarded.filter((c) => c.lsid === callerLsid)).toEqual([]);
    // ...and it started at the caller's operationTime.
    const first = guarded.find((c) => c.name === 'findAndModify');
    expect((first?.readConcern as { afterClusterTime?: mongo.Timestamp } | undefined)?.afterClusterTime?.equals(before)).toBe(true);
    // The caller's session now knows the commit: a causally consistent read sees the write.
    expect(session.operationTime!.greaterThan(before)).toBe(true);
    expect((await M.findById(id).session(session).lean())?.edits).toBe(1);
  } finally {
    client.off('commandStarted', listener);
    await session.endSession();
  }
}, 30_000);
