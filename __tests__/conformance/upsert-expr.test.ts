/**
 * mongod refuses `$expr` in the query predicate of an upsert, at parse time, whether or not a
 * document matches: QueryFeatureNotAllowed (224), "$expr is not allowed in the query predicate for
 * an upsert".
 *
 * Sources (MongoDB server, mongodb/mongo):
 *  - src/mongo/db/query/write_ops/parsed_writes_common.h, parseWriteQueryToParsedFindCommand: for an
 *    UpdateRequest with isUpsert(), `allowedMatcherFeatures &= ~MatchExpressionParser::AllowedFeatures::kExpr`
 *    ("$expr is not allowed in the query for an upsert, since it is not clear what the equality
 *    extraction behavior for $expr should be"); SERVER-59704. Only kExpr is cleared.
 *  - src/mongo/db/query/write_ops/parsed_update_base.cpp, parseQueryToCQ: a QueryFeatureNotAllowed
 *    from the parser is rewritten to the message asserted below.
 *  - The match-expression parser hands the same allowed-feature set to the children of $and, $or and
 *    $nor, so the refusal holds at any depth of those.
 *  - The update command reports a statement's error in `writeErrors` with index, code and errmsg
 *    while the command stays ok: 1 (manual, "update" command, Output: writeErrors); findAndModify
 *    has a single statement and fails as a command (manual, "findAndModify", Output).
 */
import type { Db, Document, MongoClient } from 'mongodb';
import { expectServerError, openClient, uniqueDbName, type Loose } from './support/server';

const dbName = uniqueDbName('conf_upsert_expr');
let client: MongoClient;
let db: Db;

const CODE = 224;
const CODE_NAME = 'QueryFeatureNotAllowed';
const MESSAGE = '$expr is not allowed in the query predicate for an upsert';

beforeAll(async () => {
  client = await openClient();
  db = client.db(dbName);
});

afterAll(async () => {
  await db.dropDatabase();
  await client.close();
});

const EXPR = { $expr: { $eq: ['$tag', 'e'] } };

/** Filters that carry $expr at the top level or inside $and / $or / $nor (nested too). */
const EXPR_FILTERS: Array<[string, Document]> = [
  ['top level', { ...EXPR }],
  ['next to an _id equality', { _id: 'k', ...EXPR }],
  ['inside $and', { $and: [{ _id: 'k' }, EXPR] }],
  ['inside $or', { _id: 'k', $or: [{ owner: 'x' }, EXPR] }],
  ['inside $nor', { $nor: [EXPR] }],
  ['inside $or inside $and', { $and: [{ $or: [{ a: 1 }, EXPR] }] }],
];

describe('update command with upsert: true', () => {
  test.each(EXPR_FILTERS)('$expr %s: a per-statement write error 224, nothing written', async (_label, q) => {
    const coll = `upd_${_label.replace(/\W+/g, '_')}`;
    const reply = await db.command({ update: coll, updates: [{ q, u: { $set: { v: 1 } }, upsert: true }] });
    // A statement error leaves the command itself ok: 1 (manual, update command, Output).
    expect(reply.ok).toBe(1);
    expect(reply.n).toBe(0);
    expect(reply.nModified).toBe(0);
    expect(reply.upserted).toBeUndefined();
    expect(reply.writeErrors).toEqual([{ index: 0, code: CODE, codeName: CODE_NAME, errmsg: MESSAGE }]);
    expect(await db.collection(coll).countDocuments()).toBe(0);
  });

  test('it is a parse-time refusal: the same filter is refused even when a document matches', async () => {
    const coll = db.collection<Loose>('upd_matching');
    await coll.insertOne({ _id: 'k', tag: 'e', v: 0 });
    const reply = await db.command({ update: 'upd_matching', updates: [{ q: { _id: 'k', ...EXPR }, u: { $set: { v: 1 } }, upsert: true }] });
    expect(reply.writeErrors).toEqual([{ index: 0, code: CODE, codeName: CODE_NAME, errmsg: MESSAGE }]);
    expect(await coll.findOne({ _id: 'k' })).toEqual({ _id: 'k', tag: 'e', v: 0 });
  });

  test('without upsert the same $expr filter is accepted', async () => {
    const coll = db.collection<Loose>('upd_no_upsert');
    await coll.insertOne({ _id: 'k', tag: 'e', v: 0 });
    const result = await coll.updateOne({ _id: 'k', ...EXPR }, { $set: { v: 1 } });
    expect(result).toMatchObject({ matchedCount: 1, modifiedCount: 1, upsertedCount: 0 });
  });

  test('ordered: the failing statement stops the batch; unordered: the others run', async () => {
    const ordered = await db.command({
      update: 'upd_ordered',
      updates: [
        { q: { _id: 1 }, u: { $set: { v: 1 } }, upsert: true },
        { q: { _id: 2, ...EXPR }, u: { $set: { v: 2 } }, upsert: true },
        { q: { _id: 3 }, u: { $set: { v: 3 } }, upsert: true },
      ],
    });
    expect(ordered.n).toBe(1);
    expect(ordered.upserted).toEqual([{ index: 0, _id: 1 }]);
    expect(ordered.writeErrors).toEqual([{ index: 1, code: CODE, codeName: CODE_NAME, errmsg: MESSAGE }]);
    expect(await db.collection('upd_ordered').find().toArray()).toEqual([{ _id: 1, v: 1 }]);

    const unordered = await db.command({
      update: 'upd_unordered',
      ordered: false,
      updates: [
        { q: { _id: 1 }, u: { $set: { v: 1 } }, upsert: true },
        { q: { _id: 2, ...EXPR }, u: { $set: { v: 2 } }, upsert: true },
        { q: { _id: 3 }, u: { $set: { v: 3 } }, upsert: true },
      ],
    });
    expect(unordered.n).toBe(2);
    expect(unordered.upserted).toEqual([{ index: 0, _id: 1 }, { index: 2, _id: 3 }]);
    expect(unordered.writeErrors).toEqual([{ index: 1, code: CODE, codeName: CODE_NAME, errmsg: MESSAGE }]);
  });

  test('the driver surfaces it from updateOne as a MongoServerError 224', async () => {
    const error = await expectServerError(db.collection<Loose>('upd_driver').updateOne({ _id: 'k', ...EXPR }, { $set: { v: 1 } }, { upsert: true }), CODE);
    expect(error.codeName).toBe(CODE_NAME);
    expect(error.message).toBe(MESSAGE);
  });
});

describe('findAndModify with upsert: true', () => {
  test.each(EXPR_FILTERS)('$expr %s: a command error 224, nothing written', async (_label, query) => {
    const coll = `fam_${_label.replace(/\W+/g, '_')}`;
    const error = await expectServerError(db.command({ findAndModify: coll, query, update: { $set: { v: 1 } }, upsert: true, new: true }), CODE);
    expect(error.codeName).toBe(CODE_NAME);
    expect(error.message).toBe(MESSAGE);
    expect(error.errorResponse.ok).toBe(0);
    expect(await db.collection(coll).countDocuments()).toBe(0);
  });

  test('without upsert the same filter is accepted', async () => {
    const coll = db.collection<Loose>('fam_no_upsert');
    await coll.insertOne({ _id: 'k', tag: 'e' });
    expect(await coll.findOneAndUpdate({ _id: 'k', ...EXPR }, { $set: { v: 1 } }, { returnDocument: 'after' })).toEqual({ _id: 'k', tag: 'e', v: 1 });
  });

  // mongoose-pessimistic-lock 0.1.0 acquired a lock with exactly this command (src/lock-store.ts,
  // LockStore.acquire, before the fix): every acquisition fails on mongod, whether the lock record
  // exists or not, and whatever the owner.
  test("replaying 0.1.0's acquire command fails with 224, on a missing record and on an expired one", async () => {
    const locks = db.collection<Loose>('old_acquire');
    const acquire = (): Promise<unknown> =>
      locks.findOneAndUpdate(
        { _id: 'doc-1', $or: [{ owner: 'x' }, { $expr: { $lte: ['$expiresAt', '$$NOW'] } }] } as Document,
        [{ $set: { owner: 'x', token: 't', acquiredAt: '$$NOW', expiresAt: { $add: ['$$NOW', 30_000] } } }],
        { upsert: true, returnDocument: 'after', projection: { token: 1, acquiredAt: 1, expiresAt: 1 } },
      );
    const onMissing = await expectServerError(acquire(), CODE);
    expect(onMissing.message).toBe(MESSAGE);
    expect(await locks.countDocuments()).toBe(0);

    await locks.insertOne({ _id: 'doc-1', owner: 'y', expiresAt: new Date(Date.now() - 60_000) });
    const onExpired = await expectServerError(acquire(), CODE);
    expect(onExpired.message).toBe(MESSAGE);
    expect(await locks.findOne({ _id: 'doc-1' })).toMatchObject({ owner: 'y' });
  });
});
