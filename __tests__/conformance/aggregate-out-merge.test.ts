/**
 * The aggregation write stages `$out` and `$merge` (emulator: test-backend/emulator/aggregate-write.ts).
 *
 * Sources (MongoDB server, mongodb/mongo, and its 5.0-era copies where the index holds no 7.0 file):
 *  - src/mongo/db/pipeline/document_source_out.{h,cpp}: LiteParsed::parse / parseNsFromElem (16990
 *    "$out only supports a string or object argument, but found <type>"), LiteParsed::
 *    supportsReadConcern (InvalidOptions "$out cannot be used with a 'linearizable' read concern
 *    level"), create (263 "$out cannot be used in a transaction", 17385 "Can't $out to special
 *    collection: <coll>", 31321 "Can't $out to internal database: <db>"), initialize / finalize
 *    (a temporary collection with the target's options and indexes, renamed over the target with
 *    dropTarget: the target keeps its indexes, a failure leaves it untouched).
 *  - src/mongo/db/pipeline/document_source_merge.{h,cpp}: the merge-strategy descriptors (replace:
 *    replacement update; merge: `$set`; keepExisting: `$setOnInsert`; fail: insert; pipeline:
 *    pipeline update with `let`, `$$new`, inserting the supplied document), 51181, 263, 31319,
 *    31320, 51199, 31465, 13113 MergeStageNoMatchingDocument ("$merge could not find a matching
 *    document in the target collection for at least one document in the source collection"),
 *    the ImmutableField context; ensureFieldsUniqueOrResolveDocumentKey (51183 "Cannot find index
 *    to verify that join fields will be unique").
 *  - jstests/aggregation/sources/merge/mode_fail_insert.js: the DuplicateKey contexts "$merge with
 *    whenMatched: fail found an existing document with the same values for the 'on' fields" and
 *    "$merge failed due to a DuplicateKey error".
 *  - src/mongo/db/pipeline/pipeline.cpp, validateCommon: 40601 "<stage> can only be the final stage
 *    in the pipeline".
 *  - CRUD spec tests aggregate-out.json, aggregate-merge.json, aggregate-merge-errorResponse.json
 *    (code 11000 with keyPattern / keyValue), aggregate-out-readConcern.json.
 *  - Validation: jstests/core/doc_validation/bypass_doc_validation.js ("aggregation command with a
 *    $out stage": the output collection's validator applies, 121 with an errInfo object per
 *    jstests/libs/doc_validation_utils.js assertDocumentValidationFailure, nothing written; bypass
 *    writes) and jstests/aggregation/sources/merge/bypass_doc_validation.js (every mode fails with
 *    121 without the flag and writes nothing; a non-boolean flag 5 is taken as true); the flag is a
 *    safeBool in src/mongo/db/pipeline/aggregate_command.idl (src/mongo/db/basic_types.idl: bool or
 *    number, BSONElement::trueValue). The temporary collection of $out has the target's options
 *    (document_source_out.cpp initialize: create with _originalOutOptions), so validationAction
 *    warn lets documents through and validationLevel moderate still checks inserts (manual,
 *    "Specify Validation Level for Existing Documents"); the rename keeps them on the target.
 *  - Views: jstests/core/views/views_aggregation.js testAggStagesWritingToViews (166); the errmsg
 *    "Namespace <ns> is a view, not a collection" is AutoGetCollection's with views forbidden
 *    (db_raii.cpp), met by $out's initialize (getCollectionOptionsLocally, before any input is
 *    read, so even an empty output fails) and by $merge's first batch write (write_ops_exec.cpp;
 *    document_source_writer.h doGetNext flushes nothing for an empty output, and
 *    DocumentSourceMerge has no initialize, so an empty $merge into a view succeeds).
 *  - Batches: document_source_writer.h doGetNext (batches bounded by BSONObjMaxUserSize and
 *    write_ops::kMaxWriteBatchSize); the emulator refuses an error in an output that may span
 *    more than one batch.
 */
import type { Db, Document, MongoClient } from 'mongodb';
import { deploymentFacts, describeIf, expectServerError, openClient, uniqueDbName } from './support/server';

const dbName = uniqueDbName('conf_out_merge');
let client: MongoClient;
let db: Db;

beforeAll(async () => {
  client = await openClient();
  db = client.db(dbName);
});

afterAll(async () => {
  await db.dropDatabase();
  await client.close();
});

async function seed(name: string, docs: Array<Record<string, unknown>>): Promise<void> {
  await db.collection(name).drop().catch(() => undefined);
  if (docs.length) await db.collection(name).insertMany(docs);
}

async function contents(name: string): Promise<unknown[]> {
  return db.collection(name).find({}).sort({ _id: 1 }).toArray();
}

describe('$out', () => {
  test('writes the pipeline output, replaces the target, keeps its indexes, answers an empty cursor', async () => {
    await seed('src', [{ _id: 1, x: 11 }, { _id: 2, x: 22 }, { _id: 3, x: 33 }]);
    await seed('out1', [{ _id: 9, old: true }]);
    await db.collection('out1').createIndex({ x: 1 }, { name: 'x_1' });
    const reply = await db.command({ aggregate: 'src', pipeline: [{ $match: { _id: { $gt: 1 } } }, { $out: 'out1' }], cursor: {} });
    expect(reply.cursor.firstBatch).toEqual([]);
    expect(String(reply.cursor.id)).toBe('0');
    expect(await contents('out1')).toEqual([{ _id: 2, x: 22 }, { _id: 3, x: 33 }]);
    const names = (await db.collection('out1').indexes()).map((i) => i.name).sort();
    expect(names).toEqual(['_id_', 'x_1']);
  });

  test('{db, coll} form and batchSize 0', async () => {
    await seed('src2', [{ _id: 1 }]);
    const reply = await db.command({ aggregate: 'src2', pipeline: [{ $out: { db: dbName, coll: 'out2' } }], cursor: { batchSize: 0 } });
    expect(reply.cursor.firstBatch).toEqual([]);
    expect(await contents('out2')).toEqual([{ _id: 1 }]);
  });

  test('a duplicate _id fails with 11000 and leaves the target untouched', async () => {
    await seed('src3', [{ _id: 1, k: 1 }, { _id: 2, k: 2 }]);
    await seed('out3', [{ _id: 'keep' }]);
    const err = await expectServerError(db.command({ aggregate: 'src3', pipeline: [{ $project: { _id: '$k', k: 1 } }, { $set: { _id: 1 } }, { $out: 'out3' }], cursor: {} }), 11000);
    expect(err.message).toMatch(/^E11000 duplicate key error collection: [^ ]+\.tmp\.agg_out\.[0-9a-f-]+ index: _id_ dup key: \{ _id: 1 \}$/);
    expect(await contents('out3')).toEqual([{ _id: 'keep' }]);
  });

  test('a unique index of the target is enforced on the new contents', async () => {
    await seed('src4', [{ _id: 1, u: 5 }, { _id: 2, u: 5 }]);
    await seed('out4', [{ _id: 'keep', u: 1 }]);
    await db.collection('out4').createIndex({ u: 1 }, { unique: true });
    await expectServerError(db.command({ aggregate: 'src4', pipeline: [{ $out: 'out4' }], cursor: {} }), 11000);
    expect(await contents('out4')).toEqual([{ _id: 'keep', u: 1 }]);
  });

  test('refusals: not last (40601), special collection (17385), internal database (31321), bad argument (16990), linearizable (72)', async () => {
    await seed('src5', [{ _id: 1 }]);
    const e1 = await expectServerError(db.command({ aggregate: 'src5', pipeline: [{ $out: 'o' }, { $match: {} }], cursor: {} }), 40601);
    expect(e1.message).toBe('$out can only be the final stage in the pipeline');
    const e2 = await expectServerError(db.command({ aggregate: 'src5', pipeline: [{ $out: 'system.foo' }], cursor: {} }), 17385);
    expect(e2.message).toBe("Can't $out to special collection: system.foo");
    const e3 = await expectServerError(db.command({ aggregate: 'src5', pipeline: [{ $out: { db: 'admin', coll: 'x' } }], cursor: {} }), 31321);
    expect(e3.message).toBe("Can't $out to internal database: admin");
    const e4 = await expectServerError(db.command({ aggregate: 'src5', pipeline: [{ $out: true }], cursor: {} }), 16990);
    expect(e4.message).toBe('$out only supports a string or object argument, but found bool');
    const e5 = await expectServerError(db.command({ aggregate: 'src5', pipeline: [{ $out: 'o' }], cursor: {}, readConcern: { level: 'linearizable' } }), 72);
    expect(e5.message).toBe("$out cannot be used with a 'linearizable' read concern level");
    expect(await db.listCollections({ name: 'o' }).toArray()).toEqual([]);
  });
});

describe('$merge', () => {
  test('default (merge / insert) merges matched documents field by field and inserts the rest', async () => {
    await seed('ms1', [{ _id: 1, a: 'new' }, { _id: 2, a: 'ins' }]);
    await seed('mt1', [{ _id: 1, a: 'old', b: 'kept' }]);
    const reply = await db.command({ aggregate: 'ms1', pipeline: [{ $merge: { into: 'mt1' } }], cursor: {} });
    expect(reply.cursor.firstBatch).toEqual([]);
    expect(await contents('mt1')).toEqual([{ _id: 1, a: 'new', b: 'kept' }, { _id: 2, a: 'ins' }]);
  });

  test('replace, keepExisting, discard, and creating a missing target', async () => {
    await seed('ms2', [{ _id: 1, a: 'new' }, { _id: 2, a: 'x' }]);
    await seed('mt2', [{ _id: 1, a: 'old', b: 'gone' }]);
    await db.command({ aggregate: 'ms2', pipeline: [{ $merge: { into: 'mt2', whenMatched: 'replace', whenNotMatched: 'discard' } }], cursor: {} });
    expect(await contents('mt2')).toEqual([{ _id: 1, a: 'new' }]);
    await seed('mt3', [{ _id: 1, a: 'old' }]);
    await db.command({ aggregate: 'ms2', pipeline: [{ $merge: { into: 'mt3', whenMatched: 'keepExisting' } }], cursor: {} });
    expect(await contents('mt3')).toEqual([{ _id: 1, a: 'old' }, { _id: 2, a: 'x' }]);
    await db.command({ aggregate: 'ms2', pipeline: [{ $merge: 'mt_new' }], cursor: {} });
    expect(await contents('mt_new')).toEqual([{ _id: 1, a: 'new' }, { _id: 2, a: 'x' }]);
  });

  test('whenMatched pipeline with let and $$new; whenNotMatched insert inserts the source document', async () => {
    await seed('ms4', [{ _id: 1, n: 5 }, { _id: 2, n: 7 }]);
    await seed('mt4', [{ _id: 1, total: 10 }]);
    await db.command({
      aggregate: 'ms4',
      pipeline: [{ $merge: { into: 'mt4', let: { add: '$n' }, whenMatched: [{ $set: { total: { $add: ['$total', '$$add'] }, seen: '$$new.n' } }] } }],
      cursor: {},
    });
    expect(await contents('mt4')).toEqual([{ _id: 1, total: 15, seen: 5 }, { _id: 2, n: 7 }]);
  });

  test('whenMatched fail: DuplicateKey 11000 with keyPattern, keyValue and the on-fields context', async () => {
    await seed('ms5', [{ _id: 2, x: 1 }]);
    await seed('mt5', [{ _id: 1, x: 1 }, { _id: 2, x: 1 }]);
    const err = await expectServerError(db.command({ aggregate: 'ms5', pipeline: [{ $merge: { into: 'mt5', whenMatched: 'fail' } }], cursor: {} }), 11000);
    expect(err.errorResponse.keyPattern).toEqual({ _id: 1 });
    expect(err.errorResponse.keyValue).toEqual({ _id: 2 });
    expect(err.message).toBe(
      `$merge with whenMatched: fail found an existing document with the same values for the 'on' fields :: caused by :: E11000 duplicate key error collection: ${dbName}.mt5 index: _id_ dup key: { _id: 2 }`,
    );
  });

  test('whenNotMatched fail: matched documents are written, then 13113', async () => {
    await seed('ms6', [{ _id: 1, a: 'new' }, { _id: 2, a: 'none' }]);
    await seed('mt6', [{ _id: 1, a: 'old' }]);
    const err = await expectServerError(db.command({ aggregate: 'ms6', pipeline: [{ $merge: { into: 'mt6', whenNotMatched: 'fail' } }], cursor: {} }), 13113);
    expect(err.codeName).toBe('MergeStageNoMatchingDocument');
    expect(await contents('mt6')).toEqual([{ _id: 1, a: 'new' }]);
  });

  test('on other fields needs a unique index on exactly them (51183); with one, _id changes are ImmutableField with context', async () => {
    await seed('ms7', [{ _id: 10, k: 'a', v: 1 }]);
    await seed('mt7', [{ _id: 1, k: 'a', v: 0 }]);
    const e1 = await expectServerError(db.command({ aggregate: 'ms7', pipeline: [{ $merge: { into: 'mt7', on: 'k' } }], cursor: {} }), 51183);
    expect(e1.message).toBe('Cannot find index to verify that join fields will be unique');
    await db.collection('mt7').createIndex({ k: 1 }, { unique: true });
    const e2 = await expectServerError(db.command({ aggregate: 'ms7', pipeline: [{ $merge: { into: 'mt7', on: 'k' } }], cursor: {} }), 66);
    expect(e2.message).toMatch(/^\$merge failed to update the matching document, did you attempt to modify the _id or the shard key\? :: caused by :: /);
    await db.command({ aggregate: 'ms7', pipeline: [{ $project: { _id: 0 } }, { $merge: { into: 'mt7', on: 'k' } }], cursor: {} });
    expect(await contents('mt7')).toEqual([{ _id: 1, k: 'a', v: 1 }]);
  });

  test('refusals: unsupported mode pair (51181), let without a pipeline (51199), special collection (31319), internal database (31320)', async () => {
    await seed('ms8', [{ _id: 1 }]);
    const run = (spec: unknown) => db.command({ aggregate: 'ms8', pipeline: [{ $merge: spec }], cursor: {} });
    const e1 = await expectServerError(run({ into: 'x', whenMatched: 'fail', whenNotMatched: 'discard' }), 51181);
    expect(e1.message).toBe("Combination of $merge modes 'whenMatched: fail' and 'whenNotMatched: discard' is not supported");
    const e2 = await expectServerError(run({ into: 'x', let: { a: 1 } }), 51199);
    expect(e2.message).toBe("Cannot use 'let' variables with 'whenMatched: merge' mode");
    const e3 = await expectServerError(run({ into: 'system.x' }), 31319);
    expect(e3.message).toBe('Cannot $merge to special collection: system.x');
    const e4 = await expectServerError(run({ into: { db: 'config', coll: 'x' } }), 31320);
    expect(e4.message).toBe('Cannot $merge to internal database: config');
  });
});

describe('validators, views and write batches', () => {
  test('$out: the target validator applies to the new contents (121 with errInfo, nothing written); bypass as a number', async () => {
    await seed('vsrc1', [{ _id: 1 }, { _id: 2, a: 1 }]);
    await db.collection('vout1').drop().catch(() => undefined);
    await db.createCollection('vout1', { validator: { a: { $exists: true } } });
    await db.collection<{ _id: string; a: number }>('vout1').insertOne({ _id: 'keep', a: 0 });
    const err = await expectServerError(db.command({ aggregate: 'vsrc1', pipeline: [{ $out: 'vout1' }], cursor: {} }), 121);
    expect(err.message).toBe('Document failed validation');
    expect(err.errInfo).toEqual({ failingDocumentId: 1, details: { operatorName: '$exists', specifiedAs: { a: { $exists: true } }, reason: 'path does not exist' } });
    expect(await contents('vout1')).toEqual([{ _id: 'keep', a: 0 }]);
    await expectServerError(db.command({ aggregate: 'vsrc1', pipeline: [{ $out: 'vout1' }], cursor: {}, bypassDocumentValidation: 0 }), 121);
    await db.command({ aggregate: 'vsrc1', pipeline: [{ $out: 'vout1' }], cursor: {}, bypassDocumentValidation: 1 });
    expect(await contents('vout1')).toEqual([{ _id: 1 }, { _id: 2, a: 1 }]);
    // The target keeps its options through the rename.
    const [info] = await db.listCollections({ name: 'vout1' }).toArray();
    expect((info as Document).options.validator).toEqual({ a: { $exists: true } });
    // A string is not a safeBool: TypeMismatch (the 5.0+ bypass_doc_validation.js; safe-bool.ts).
    await expectServerError(db.command({ aggregate: 'vsrc1', pipeline: [{ $out: 'vout1' }], cursor: {}, bypassDocumentValidation: 'false' }), 14);
  });

  test('$out: validationAction warn writes invalid documents, validationLevel moderate still checks them, off does not', async () => {
    await seed('vsrc2', [{ _id: 1 }]);
    for (const [name, opts, code] of [
      ['vout2w', { validationAction: 'warn' }, 0],
      ['vout2m', { validationLevel: 'moderate' }, 121],
      ['vout2o', { validationLevel: 'off' }, 0],
    ] as const) {
      await db.collection(name).drop().catch(() => undefined);
      await db.createCollection(name, { validator: { a: 1 }, ...opts, changeStreamPreAndPostImages: { enabled: true } });
      const run = db.command({ aggregate: 'vsrc2', pipeline: [{ $out: name }], cursor: {} });
      if (code) {
        await expectServerError(run, code);
        expect(await contents(name)).toEqual([]);
      } else {
        await run;
        expect(await contents(name)).toEqual([{ _id: 1 }]);
        const [info] = await db.listCollections({ name }).toArray();
        expect((info as Document).options).toMatchObject({ validator: { a: 1 }, ...opts, changeStreamPreAndPostImages: { enabled: true } });
      }
    }
  });

  test('$merge: without bypass every mode fails with 121 and writes nothing; a non-boolean bypass (5) is true', async () => {
    await seed('vsrc3', [{ _id: 0, a: 1 }]);
    await db.collection('vmt3').drop().catch(() => undefined);
    await db.createCollection('vmt3', { validator: { a: 2 } });
    for (const pipeline of [
      [{ $merge: 'vmt3' }],
      [{ $addFields: { a: 3 } }, { $merge: { into: 'vmt3', whenMatched: 'replace', whenNotMatched: 'insert' } }],
      [{ $replaceRoot: { newRoot: { _id: 1, a: 4 } } }, { $merge: { into: 'vmt3', whenMatched: 'fail', whenNotMatched: 'insert' } }],
    ]) {
      await expectServerError(db.command({ aggregate: 'vsrc3', pipeline, cursor: {} }), 121);
      await expectServerError(db.command({ aggregate: 'vsrc3', pipeline, cursor: {}, bypassDocumentValidation: false }), 121);
    }
    expect(await contents('vmt3')).toEqual([]);
    await db.command({ aggregate: 'vsrc3', pipeline: [{ $merge: 'vmt3' }], cursor: {}, bypassDocumentValidation: 5 });
    expect(await contents('vmt3')).toEqual([{ _id: 0, a: 1 }]);
  });

  test('into a view: $out fails with 166 even for an empty output; an empty $merge output writes nothing and succeeds', async () => {
    await seed('vsrc4', [{ _id: 1 }]);
    await db.command({ create: 'vview4', viewOn: 'vsrc4', pipeline: [] });
    const e1 = await expectServerError(db.command({ aggregate: 'vsrc4', pipeline: [{ $match: { _id: 0 } }, { $out: 'vview4' }], cursor: {} }), 166);
    expect(e1.message).toBe(`Namespace ${dbName}.vview4 is a view, not a collection`);
    await db.command({ aggregate: 'vsrc4', pipeline: [{ $match: { _id: 0 } }, { $merge: 'vview4' }], cursor: {} });
    const e2 = await expectServerError(db.command({ aggregate: 'vsrc4', pipeline: [{ $merge: 'vview4' }], cursor: {} }), 166);
    expect(e2.message).toBe(`Namespace ${dbName}.vview4 is a view, not a collection`);
    expect((await db.listCollections({ name: 'vview4' }).toArray()).map((i) => i.type)).toEqual(['view']);
  });

  test('$merge: an output that may span several write batches is written, but an error in it is refused (238)', async () => {
    const big = 'x'.repeat(1024 * 1024);
    await seed('vsrc5', Array.from({ length: 10 }, (_, i) => ({ _id: i, big })));
    await seed('vmt5', []);
    await db.command({ aggregate: 'vsrc5', pipeline: [{ $merge: 'vmt5' }], cursor: {} });
    expect(await db.collection('vmt5').countDocuments()).toBe(10);
    await expectServerError(db.command({ aggregate: 'vsrc5', pipeline: [{ $merge: { into: 'vmt5', whenMatched: 'fail' } }], cursor: {} }), 238);
  });
});

describeIf(deploymentFacts().setName !== undefined, 'transactions need a replica set')('in a transaction', () => {
  test.each([
    ['$out', { $out: 'tx_out' }],
    ['$merge', { $merge: { into: 'tx_out' } }],
  ])('%s: 263 OperationNotSupportedInTransaction', async (name, stage) => {
    await seed('tx_src', [{ _id: 1 }]);
    const session = client.startSession();
    try {
      session.startTransaction();
      const err = await expectServerError(db.collection('tx_src').aggregate([stage], { session }).toArray(), 263);
      expect(err.message).toBe(`${name} cannot be used in a transaction`);
    } finally {
      await session.abortTransaction().catch(() => undefined);
      await session.endSession();
    }
  });
});

// mongod's $out writes a temporary collection and renames it over the target
// (DocumentSourceOut::initialize / finalize, document_source_out.cpp), so the oplog holds inserts
// into `<db>.tmp.agg_out.<UUID>` and a renameCollection. Which of those a change stream reports
// was not sourced; the emulator's own events (drop, create, inserts on the target) are not them,
// so a stream that reaches them refuses loudly, also one opened afterwards from an earlier time.
describeIf(deploymentFacts().setName !== undefined, 'change streams need a replica set')('$out and change streams', () => {
  test('a stream resumed from before an $out refuses its events (NotImplemented) instead of reporting the emulator\'s', async () => {
    const src = db.collection<{ _id: number }>('out_cs_src');
    await src.insertMany([{ _id: 1 }, { _id: 2 }]);
    const hello = await db.command({ ping: 1 });
    const before = hello.operationTime as import('mongodb').Timestamp;
    await src.aggregate([{ $out: 'out_cs_target' }]).toArray();
    const stream = db.collection('out_cs_target').watch([], { startAtOperationTime: before });
    try {
      await expectServerError(stream.tryNext(), 238);
    } finally {
      await stream.close();
    }
    // The $out itself happened.
    expect(await db.collection('out_cs_target').countDocuments()).toBe(2);
  });
});
