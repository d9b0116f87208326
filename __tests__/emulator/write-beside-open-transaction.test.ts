/**
 * Which writes outside a transaction wait for a running transaction (conformance, both sides).
 *
 * mongod: the write's plan reads the COMMITTED version of each candidate (WiredTiger snapshot
 * isolation: another transaction's uncommitted write is invisible), and its child stage passes on
 * only documents that match the filter. Writing a matched document that a running transaction has
 * written fails in WiredTiger (WT_ROLLBACK, a WriteConflictException); UpdateStage::doWork /
 * DeleteStage::doWork (src/mongo/db/exec/update_stage.cpp, delete_stage.cpp) keep that document
 * and yield (prepareToRetryWSM, NEED_YIELD), and after the yield write_stage_common::
 * ensureStillMatches (src/mongo/db/exec/write_stage_common.cpp) re-fetches it and re-applies the
 * filter. So:
 *  - a document whose committed version does not match is never written: no conflict, no wait,
 *    whatever the transaction wrote to it;
 *  - a non-multi write stops after its first match (UpdateStage::isEOF: `nMatched > 0 &&
 *    !isMulti()`), so a held document after it is not waited for;
 *  - a matched document the transaction wrote makes the write wait until the transaction ends
 *    (jstests/core/txns/write_conflicts_with_non_txns.js; R17 in docs/mongodb-compatibility.md),
 *    and the write then judges the new committed version.
 * The emulator: test-backend/emulator/writes.ts waitForMatchedDocuments; FIDELITY.md "Which writes
 * wait behind a transaction".
 */
import { MongoClient, type ClientSession, type Collection } from 'mongodb';
import { startEmulator, type RunningEmulator } from '../../test-backend/emulator';

interface Item {
  _id: number;
  token?: string | null;
  k?: string;
  x?: number;
}

/** Generous: a write that does not wait answers in milliseconds; the transactions stay open far longer (60 s lifetime). */
const PROMPT_MS = 5_000;
/** How long a waiting write is given to (wrongly) finish while the transaction is still open. */
const HELD_MS = 300;

let emu: RunningEmulator;
let client: MongoClient;
let n = 0;

beforeAll(async () => {
  emu = await startEmulator();
  client = new MongoClient(emu.uri, { serverSelectionTimeoutMS: 5_000 });
  await client.connect();
});

afterAll(async () => {
  await client.close();
  await emu.stop();
});

async function collection(docs: Item[]): Promise<Collection<Item>> {
  const c = client.db('write_beside_txn').collection<Item>(`c${++n}`);
  await c.insertMany(docs);
  return c;
}

type Settled<T> = { settled: true; value: T } | { settled: false };

/** Whether `p` settles within `ms`; a rejection is a failure of the test. */
async function within<T>(p: Promise<T>, ms: number): Promise<Settled<T>> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<Settled<T>>((resolve) => (timer = setTimeout(() => resolve({ settled: false }), ms)));
  try {
    return await Promise.race([p.then((value): Settled<T> => ({ settled: true, value })), late]);
  } finally {
    clearTimeout(timer);
  }
}

/** Runs `body` while another session's transaction holds an uncommitted write made by `write`; ends it with `end`. */
async function besideTransaction(write: (s: ClientSession) => Promise<unknown>, body: () => Promise<void>, end: 'commit' | 'abort' = 'commit'): Promise<void> {
  const session = client.startSession();
  try {
    session.startTransaction();
    await write(session);
    await body();
    if (end === 'commit') await session.commitTransaction();
    else await session.abortTransaction();
  } finally {
    if (session.inTransaction()) await session.abortTransaction().catch(() => undefined);
    await session.endSession();
  }
}

describe('a write outside a transaction does not wait for a document whose committed version does not match', () => {
  test('update (multi), updateOne, findOneAndUpdate, deleteOne, deleteMany skip it while the transaction is open', async () => {
    // The plugin's release by token: `_id: { $in }` plus the token, one document held by a transaction.
    const c = await collection([{ _id: 1, token: 'U' }, { _id: 2, token: 'T' }, { _id: 3, token: 'T' }]);
    await besideTransaction(
      // The transaction even writes the token the outside filter asks for: invisible until it commits.
      (s) => c.updateOne({ _id: 1 }, { $set: { token: 'T' } }, { session: s }),
      async () => {
        const many = await within(c.updateMany({ _id: { $in: [1, 2] }, token: 'T' }, { $set: { token: null } }), PROMPT_MS);
        const one = await within(c.updateOne({ _id: 1, token: 'T' }, { $set: { x: 1 } }), PROMPT_MS);
        const fam = await within(c.findOneAndUpdate({ _id: 1, token: 'T' }, { $set: { x: 2 } }), PROMPT_MS);
        const del = await within(c.deleteOne({ _id: 1, token: 'T' }), PROMPT_MS);
        const delMany = await within(c.deleteMany({ _id: { $in: [1, 3] }, token: 'T' }), PROMPT_MS);
        expect({
          many: many.settled && { matched: many.value.matchedCount, modified: many.value.modifiedCount },
          one: one.settled && one.value.matchedCount,
          fam: fam.settled && fam.value,
          del: del.settled && del.value.deletedCount,
          delMany: delMany.settled && delMany.value.deletedCount,
        }).toEqual({ many: { matched: 1, modified: 1 }, one: 0, fam: null, del: 0, delMany: 1 });
      },
    );
    // The transaction's write stands; the outside writes touched only the matching committed versions.
    expect(await c.find().sort({ _id: 1 }).toArray()).toEqual([{ _id: 1, token: 'T' }, { _id: 2, token: null }]);
  });

  test('a non-multi write takes its first committed match and does not wait for a held match after it', async () => {
    const c = await collection([{ _id: 1, k: 'a' }, { _id: 2, k: 'a' }]);
    await besideTransaction(
      (s) => c.updateOne({ _id: 2 }, { $set: { x: 9 } }, { session: s }),
      async () => {
        // No index on k: a collection scan in insertion (RecordId) order, so _id 1 comes first.
        const one = await within(c.updateOne({ k: 'a' }, { $set: { x: 1 } }), PROMPT_MS);
        const del = await within(c.deleteOne({ k: 'a' }), PROMPT_MS);
        expect({ one: one.settled && one.value.modifiedCount, del: del.settled && del.value.deletedCount }).toEqual({ one: 1, del: 1 });
      },
    );
    expect(await c.find().toArray()).toEqual([{ _id: 2, k: 'a', x: 9 }]);
  });
});

describe('a write outside a transaction waits for a document whose committed version matches, then judges the new version', () => {
  test.each(['updateOne', 'updateMany', 'findOneAndUpdate', 'deleteOne'] as const)('%s: waits while the transaction is open; after its commit the document no longer matches', async (op) => {
    const c = await collection([{ _id: 1, token: 'U' }, { _id: 2, token: 'other' }]);
    let outside: Promise<number> | undefined;
    await besideTransaction(
      (s) => c.updateOne({ _id: 1 }, { $set: { token: 'V' } }, { session: s }),
      async () => {
        const filter = { _id: { $in: [1, 2] }, token: 'U' };
        outside =
          op === 'updateOne' ? c.updateOne(filter, { $set: { x: 1 } }).then((r) => r.matchedCount)
          : op === 'updateMany' ? c.updateMany(filter, { $set: { x: 1 } }).then((r) => r.matchedCount)
          : op === 'findOneAndUpdate' ? c.findOneAndUpdate(filter, { $set: { x: 1 } }).then((r) => (r ? 1 : 0))
          : c.deleteOne(filter).then((r) => r.deletedCount);
        const early = await within(outside, HELD_MS);
        expect(early).toEqual({ settled: false });
      },
    );
    // Had it not waited it would have written the committed version (token 'U'): 1, not 0.
    expect(await within(outside!, PROMPT_MS)).toEqual({ settled: true, value: 0 });
    expect(await c.find().sort({ _id: 1 }).toArray()).toEqual([{ _id: 1, token: 'V' }, { _id: 2, token: 'other' }]);
  });

  test('after an abort the waiting write runs on the unchanged committed version', async () => {
    const c = await collection([{ _id: 1, token: 'U' }]);
    let outside: Promise<number> | undefined;
    await besideTransaction(
      (s) => c.updateOne({ _id: 1 }, { $set: { token: 'V' } }, { session: s }),
      async () => {
        outside = c.updateOne({ _id: 1, token: 'U' }, { $set: { x: 1 } }).then((r) => r.modifiedCount);
        expect(await within(outside, HELD_MS)).toEqual({ settled: false });
      },
      'abort',
    );
    expect(await within(outside!, PROMPT_MS)).toEqual({ settled: true, value: 1 });
    expect(await c.find().toArray()).toEqual([{ _id: 1, token: 'U', x: 1 }]);
  });

  test('an upsert of an _id the transaction inserted waits, then updates the committed document', async () => {
    const c = await collection([{ _id: 0 }]);
    let outside: Promise<{ matched: number; upserted: number }> | undefined;
    await besideTransaction(
      (s) => c.insertOne({ _id: 5, token: 'V' }, { session: s }),
      async () => {
        outside = c.updateOne({ _id: 5 }, { $set: { x: 1 } }, { upsert: true }).then((r) => ({ matched: r.matchedCount, upserted: r.upsertedCount }));
        expect(await within(outside, HELD_MS)).toEqual({ settled: false });
      },
    );
    expect(await within(outside!, PROMPT_MS)).toEqual({ settled: true, value: { matched: 1, upserted: 0 } });
    expect(await c.findOne({ _id: 5 })).toEqual({ _id: 5, token: 'V', x: 1 });
  });
});
