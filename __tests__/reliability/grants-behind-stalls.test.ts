/**
 * Issue 16, item 3 (PRODUCT.md properties 1 and 13), with the server's fail points: a grant the
 * server answers late, because the command waited behind a stalled transaction or was held by
 * `failCommand`'s blockConnection, is never handed out unless its lease (timed from when the
 * request was sent) is still running; a holder's belief never outlasts the server's grant, and
 * nobody takes the lock over while a holder's signal says it still holds it.
 *
 * The attack's scenario: holder H's `saveAndUnlock()` is stalled 2 s inside its transaction, after
 * the transaction wrote H's lock record (the release); B's lock call, with a ttl shorter than the
 * stall, waits on the server behind that transaction (R17 in docs/mongodb-compatibility.md). On a
 * mongos, or the emulator, the command's `$$NOW` is read once, before the wait, so the grant it
 * finally writes expired before it was written; on mongod each write-conflict retry reads `$$NOW`
 * afresh (R6), and the grant is valid but its reply arrives later than its ttl after it was sent.
 * Either way B must not be handed that grant.
 *
 * The checks are independent of the plugin's bookkeeping: the emulator runs on this machine, so
 * the server's dates and this process's `Date.now()` read the same clock. Each owner's belief is
 * recorded (from when its call resolved to when its signal aborted, or `msLeft()` at that moment)
 * and compared with the server's grants.
 */
import { LockDatabaseError, LockExpiredError, LockExpiredOnArrivalError, type LockTargetId } from '../../src';
import { deploymentFacts, describeIf } from '../conformance/support/server';
import { blockCommands, failPointOff } from '../plugin/guard/support';
import { connect, nextCommandSent, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { usesPrivateServer } from '../support/private-server';
import { replicaSetOnly } from '../support/topology';
import { workItemModel, type WorkItemModel } from '../support/work-item';

// This file configures failCommand: on a server of its own where it can (support/private-server.ts).
usesPrivateServer();

const db = testDatabase('behindstalls');
const APP_H = `mpl-stall-h-${process.pid}`;
const APP_B = `mpl-stall-b-${process.pid}`;
let connH: MonitoredConnection;
let connB: MonitoredConnection;
let connC: MonitoredConnection;
let H: WorkItemModel;
let B: WorkItemModel;
let C: WorkItemModel;

/** B's ttl, and how long the server is held: well past the ttl, whatever the machine's load. */
const TTL = 800;
const STALL_MS = 2_000;

describeIf(deploymentFacts().failPoints, 'needs fail points')('grants answered late by the server', () => {
  beforeAll(async () => {
    connH = await connect(db.name, { appName: APP_H, retryWrites: false });
    connB = await connect(db.name, { appName: APP_B });
    connC = await connect(db.name);
    H = await workItemModel(connH.connection, { ttl: 30_000 }, 'Stalls');
    B = await workItemModel(connB.connection, { ttl: 30_000 }, 'Stalls');
    C = await workItemModel(connC.connection, { ttl: 30_000 }, 'Stalls');
  });

  afterAll(async () => {
    await failPointOff(connC.connection);
    await db.drop(connC.connection);
    await Promise.all([connH.close(), connB.close(), connC.close()]);
  });

  afterEach(async () => {
    await failPointOff(connC.connection);
  });

  const locksNs = () => `${db.name}.${B.lockModel().collection.collectionName}`;
  const itemsNs = () => `${db.name}.${B.collection.collectionName}`;

  /** Resolves once a client sends `name` on collection `collection` (command monitoring). */
  const sending = nextCommandSent;

  /** H locks a document and starts a saveAndUnlock that the server stalls inside its transaction. */
  async function stalledHolder(): Promise<{ id: LockTargetId; saved: Promise<unknown> }> {
    const { _id: id } = await H.create({ title: 'original' });
    const item = await H.lock(id, 'holder-h');
    await blockCommands(connC.connection, { appName: APP_H, namespace: itemsNs(), commands: ['update'], blockTimeMS: STALL_MS });
    const documentWrite = sending(connH, 'update', H.collection.collectionName);
    item.title = 'saved by H';
    const saved = item.saveAndUnlock().then(
      () => 'saved',
      (error: unknown) => error,
    );
    // The transaction has written H's lock record (the release) and its document write is held.
    await documentWrite;
    return { id, saved };
  }

  /** C takes the lock as soon as the server lets it; returns when C's grant began (server clock). */
  async function takeOver(id: LockTargetId): Promise<number> {
    let taken: Awaited<ReturnType<WorkItemModel['tryLock']>> = null;
    for (let waited = 0; taken === null && waited < 15_000; waited += 20) {
      taken = await C.tryLock(id, 'owner-c');
      if (taken === null) await sleep(20);
    }
    expect(taken).not.toBeNull();
    const acquiredAt = taken!.heldLock()!.acquiredAt.getTime();
    await taken!.unlock();
    return acquiredAt;
  }

  /** A holder may believe it holds the lock for `msLeft` from now: never past the server's expiry. */
  function expectBeliefWithinGrant(msLeft: number, expiresAt: Date): void {
    const now = Date.now();
    expect(expiresAt.getTime()).toBeGreaterThan(now);
    expect(now + msLeft).toBeLessThanOrEqual(expiresAt.getTime() + 1);
  }

  replicaSetOnly('the stalled holder needs a transaction')(
    "behind a stalled transaction: B's handle is handed out only with a live lease, and C takes over only after B's signal aborted",
    async () => {
      const { id, saved } = await stalledHolder();
      const handle = await B.acquireLock(id, 'owner-b', { wait: 15_000, ttl: TTL, autoExtend: false });
      expectBeliefWithinGrant(handle.msLeft(), handle.expiresAt);
      let believedUntil = handle.signal.aborted ? Date.now() : Infinity;
      handle.signal.addEventListener('abort', () => (believedUntil = Date.now()));
      const takenAt = await takeOver(id);
      expect(handle.signal.aborted).toBe(true);
      expect(handle.signal.reason).toBeInstanceOf(LockExpiredError);
      expect(believedUntil).toBeLessThanOrEqual(takenAt);
      expect(await saved).toBe('saved');
    },
    60_000,
  );

  replicaSetOnly('the stalled holder needs a transaction')('behind a stalled transaction: lock() without wait resolves only with a live lease', async () => {
    const { id, saved } = await stalledHolder();
    const doc = await B.lock(id, 'owner-b', { ttl: TTL });
    const held = doc.heldLock()!;
    expectBeliefWithinGrant(held.msLeft(), held.expiresAt);
    expect(await saved).toBe('saved');
    await doc.unlock();
  }, 60_000);

  test('an acquisition held by the server past its ttl: the late (still valid) grant is released by its token, and a fresh one handed out', async () => {
    const { _id: id } = await B.create({ title: 'blocked acquire' });
    await blockCommands(connC.connection, { appName: APP_B, namespace: locksNs(), commands: ['findAndModify'], blockTimeMS: STALL_MS });
    connB.resetCommands();
    const doc = await B.lock(id, 'owner-b', { ttl: TTL });
    const held = doc.heldLock()!;
    expectBeliefWithinGrant(held.msLeft(), held.expiresAt);
    // The late grant, its release, the fresh grant, the load.
    expect(connB.commands.filter((name) => name === 'findAndModify' || name === 'update')).toEqual(['findAndModify', 'update', 'findAndModify']);
    await doc.unlock();
  }, 60_000);

  test('a resume held by the server past its ttl is asked again and handed out with a live lease', async () => {
    const { _id: id } = await B.create({ title: 'blocked resume' });
    const first = await B.lock(id, 'owner-b', { ttl: 60_000 });
    const { ticket, token } = first.heldLock()!;
    await blockCommands(connC.connection, { appName: APP_B, namespace: locksNs(), commands: ['findAndModify'], blockTimeMS: STALL_MS });
    const resumed = await B.lock(id, 'owner-b', { resume: ticket, ttl: TTL });
    const held = resumed.heldLock()!;
    expect(held.token).toBe(token);
    expectBeliefWithinGrant(held.msLeft(), held.expiresAt);
    await resumed.unlock();
  }, 60_000);

  test('resumes held by the server past their ttl every time: the lock expires meanwhile, nothing is handed out and nothing stays locked', async () => {
    const { _id: id } = await B.create({ title: 'blocked resumes' });
    const first = await B.lock(id, 'owner-b', { ttl: 60_000 });
    await blockCommands(connC.connection, { appName: APP_B, namespace: locksNs(), commands: ['findAndModify'], blockTimeMS: STALL_MS, times: 3 });
    const error = await B.lock(id, 'owner-b', { resume: first.heldLock()!.ticket, ttl: TTL }).catch((e: unknown) => e);
    // The first resume arrived too late to count on; asked again (held as long), the server finds
    // that the ttl it set ran out meanwhile.
    expect(error).toBeInstanceOf(LockExpiredError);
    expect(await C.isLocked(id)).toBe(false);
  }, 60_000);

  test('an extension held by the server past its ttl: rejected, and the lock released although the server still granted it', async () => {
    const { _id: id } = await B.create({ title: 'blocked extend' });
    const doc = await B.lock(id, 'owner-b', { ttl: 60_000 });
    await blockCommands(connC.connection, { appName: APP_B, namespace: locksNs(), commands: ['findAndModify'], blockTimeMS: STALL_MS });
    const error = await doc.extendLock(TTL).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockExpiredOnArrivalError);
    expect(doc.heldLock()).toBeNull();
    expect(await C.isLocked(id)).toBe(false);
  }, 60_000);

  test('a failed extension never lengthens what the holder counts on (it may have shortened the lock on the server)', async () => {
    const { _id: id } = await B.create({ title: 'failed extend' });
    const doc = await B.lock(id, 'owner-b', { ttl: 60_000 });
    const before = doc.heldLock()!.msLeft();
    await connC.connection.getClient().db('admin').command({
      configureFailPoint: 'failCommand',
      mode: { times: 1 },
      data: { failCommands: ['findAndModify'], appName: APP_B, namespace: locksNs(), errorCode: 96 }, // OperationFailed: not retried
    });
    const error = await doc.extendLock(5_000).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(LockDatabaseError);
    const after = doc.heldLock()!.msLeft();
    expect(after).toBeLessThanOrEqual(before);
    expect(after).toBeLessThanOrEqual(5_000);
    await doc.unlock();
  }, 60_000);
});
