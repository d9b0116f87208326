/**
 * README "Document methods", `doc.saveAndUnlock()`: "Saves under the lock, then releases it. If
 * the save fails ... the lock stays held". The release goes with the write Mongoose's save itself
 * sends, and with no other: a `pre('save')` or `post('save')` hook that writes the same document
 * (an audit trail: `this.constructor.updateOne({ _id: this._id }, { $push: ... })`) runs inside
 * the save, so its write carries the document's lock, but it is a plain holder write (verified,
 * never releasing). Writes after the release (a `post('save')` hook's) are checked as any write
 * without a document's lock. The same holds for `save()`, for hooks writing other documents, and
 * inside the caller's transaction.
 *
 * Found by the attack on the guard: the pre-save hook's write released the lock (committed in its
 * own transaction); Mongoose's real save then arrived, was refused (LockNotHeldError,
 * 'released'), and its change was lost with the lock free.
 */
import { Schema, type ClientSession, type Types } from 'mongoose';
import { lockPlugin, type LockableModel, type LockMethods } from '../../../src';
import { replicaSetOnly } from '../../support/topology';
import { connect, testDatabase, type MonitoredConnection } from '../../support/db';
import { outcome } from './support';

interface Audited {
  title: string;
  history: string[];
}
type AuditedModel = LockableModel<Audited>;

/** What the hooks write: nothing, the saved document (before or after the save), or another document. */
type HookMode = 'none' | 'pre-same' | 'post-same' | 'pre-other';

const db = testDatabase('guard_savehook');
let conn: MonitoredConnection;
let hookMode: HookMode = 'none';
let otherId: Types.ObjectId | undefined;

beforeAll(async () => {
  conn = await connect(db.name);
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

function auditedSchema(transactions: 'auto' | 'never'): Schema<Audited, AuditedModel, LockMethods> {
  const schema = new Schema<Audited, AuditedModel, LockMethods>({ title: String, history: [String] });
  const audit = async (doc: InstanceType<AuditedModel>, entry: string): Promise<void> => {
    const model = doc.constructor as AuditedModel;
    const target = hookMode === 'pre-other' ? otherId : doc._id;
    await model.updateOne({ _id: target }, { $push: { history: entry } }, { session: doc.$session() ?? undefined });
  };
  schema.pre('save', async function preAudit() {
    if ((hookMode === 'pre-same' || hookMode === 'pre-other')) await audit(this, 'pre');
  });
  schema.post('save', async function postAudit(doc) {
    if (hookMode === 'post-same') await audit(doc, 'post');
  });
  schema.plugin(lockPlugin, { ttl: 60_000, transactions });
  return schema;
}

describe.each([["transactions: 'auto'", 'auto'], ["transactions: 'never'", 'never']] as const)('%s', (_label, transactions) => {
  let M: AuditedModel;

  beforeAll(async () => {
    M = conn.connection.model<Audited, AuditedModel>(`Audited_${transactions}`, auditedSchema(transactions));
    await M.init();
    await M.lockModel().init();
  });

  afterEach(() => {
    hookMode = 'none';
    otherId = undefined;
  });

  /** A locked, edited document; the hooks write as `mode` says from its next save on (not at its creation). */
  async function lockedEdit(mode: HookMode): Promise<{ id: Types.ObjectId; doc: InstanceType<AuditedModel> }> {
    const { _id: id } = await M.create({ title: 'original', history: [] });
    hookMode = mode;
    const doc = await M.lock(id, 'alice');
    doc.title = 'edited';
    return { id, doc };
  }

  test.each(['pre-same', 'post-same'] as const)('saveAndUnlock() with a %s hook: the save and the hook land, the lock is released', async (mode) => {
    const { id, doc } = await lockedEdit(mode);
    const result = await outcome(doc.saveAndUnlock());
    expect(result).toEqual({ ok: true, value: undefined });
    expect(await M.findById(id).lean()).toMatchObject({ title: 'edited', history: [mode === 'pre-same' ? 'pre' : 'post'] });
    expect(await M.isLocked(id)).toBe(false);
    expect(doc.heldLock()).toBeNull();
  });

  test('saveAndUnlock() with a pre-save hook writing another document: both land, the lock is released', async () => {
    ({ _id: otherId } = await M.create({ title: 'other', history: [] }));
    const { id, doc } = await lockedEdit('pre-other');
    await doc.saveAndUnlock();
    expect(await M.findById(id).lean()).toMatchObject({ title: 'edited', history: [] });
    expect(await M.findById(otherId).lean()).toMatchObject({ title: 'other', history: ['pre'] });
    expect(await M.isLocked(id)).toBe(false);
  });

  test.each(['pre-same', 'post-same'] as const)('save() with a %s hook keeps the lock; a later saveAndUnlock() releases it', async (mode) => {
    const { id, doc } = await lockedEdit(mode);
    await doc.save();
    expect(await M.findById(id).lean()).toMatchObject({ title: 'edited', history: [mode === 'pre-same' ? 'pre' : 'post'] });
    expect(await M.isLocked(id)).toBe(true);
    expect(doc.heldLock()).not.toBeNull();
    doc.title = 'edited twice';
    await doc.saveAndUnlock();
    expect(await M.findById(id).lean()).toMatchObject({ title: 'edited twice' });
    expect((await M.findById(id).lean())?.history).toHaveLength(2);
    expect(await M.isLocked(id)).toBe(false);
  });

  test('a saveAndUnlock() whose save fails (the document is gone) leaves the lock held, the hook\'s write notwithstanding', async () => {
    const { id, doc } = await lockedEdit('pre-same');
    await M.deleteOne({ _id: id }, { skipLockCheck: true });
    const result = await outcome(doc.saveAndUnlock());
    expect(result.ok).toBe(false);
    expect((result as { error: Error }).error.name).toBe('DocumentNotFoundError');
    expect(await M.isLocked(id)).toBe(true);
    expect(doc.heldLock()).not.toBeNull();
    await doc.unlock();
  });

  describe('in the caller\'s transaction (the hook writes with the document\'s session)', () => {
    async function inTransaction(body: (session: ClientSession) => Promise<void>, commit: boolean): Promise<void> {
      const session = await conn.connection.startSession();
      try {
        session.startTransaction();
        await body(session);
        if (commit) await session.commitTransaction();
        else await session.abortTransaction();
      } finally {
        await session.endSession();
      }
    }

    replicaSetOnly('transactions need a replica set').each(['pre-same', 'post-same'] as const)('%s hook, committed: the save and the hook land, the lock is released', async (mode) => {
      const { id, doc } = await lockedEdit(mode);
      await inTransaction((session) => doc.saveAndUnlock({ session }), true);
      expect(await M.findById(id).lean()).toMatchObject({ title: 'edited', history: [mode === 'pre-same' ? 'pre' : 'post'] });
      expect(await M.isLocked(id)).toBe(false);
      expect(doc.heldLock()).toBeNull();
    });

    replicaSetOnly('transactions need a replica set')('pre-same hook, aborted: nothing lands, the lock is still held', async () => {
      const { id, doc } = await lockedEdit('pre-same');
      await inTransaction((session) => doc.saveAndUnlock({ session }), false);
      expect(await M.findById(id).lean()).toMatchObject({ title: 'original', history: [] });
      expect(await M.isLocked(id)).toBe(true);
      expect(doc.heldLock()).not.toBeNull();
      doc.$session(null);
      await doc.unlock();
    });
  });
});
