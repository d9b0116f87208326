/**
 * Model.lockNext / acquireNext / withNext (issue 17 item 1, PRODUCT.md property 14): the next free
 * document matching a filter, in sort order, locked and loaded; null only when none is free; the
 * filter cast as Model.find casts it; distinct documents for concurrent callers of one process;
 * the commands each claim sends.
 */
import { Schema, Types, type mongo } from 'mongoose';
import { LockNotHeldError, LockedError, lockPlugin, type LockableModel } from '../../src';
import { connect, sleep, testDatabase, waitUntil, type MonitoredConnection } from '../support/db';
import { jobModel, type JobModel } from '../support/job';
import { onReplicaSet } from '../support/topology';

const db = testDatabase('locknext');

// Renewal and concurrency tests take seconds on a loaded machine.
jest.setTimeout(120_000);
let conn: MonitoredConnection;
let Job: JobModel;
/** Every command document the connection sends, for checking shapes and read concerns. */
const sent: mongo.Document[] = [];

beforeAll(async () => {
  conn = await connect(db.name);
  conn.connection.getClient().on('commandStarted', (event) => sent.push(event.command));
  Job = await jobModel(conn.connection, { ttl: 30_000 });
});

afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

/** A fresh queue: its own model (own collection), so tests never see each other's documents. */
async function queue(jobs: { priority?: number; status?: string; payload?: string; createdAt?: Date }[], options = { ttl: 30_000 }): Promise<JobModel> {
  const model = await jobModel(conn.connection, options);
  if (jobs.length > 0) await model.insertMany(jobs);
  return model;
}

const payloads = (docs: ({ payload: string } | null)[]) => docs.map((d) => d?.payload ?? null);

describe('which document', () => {
  test('the first matching free document in sort order, loaded after the lock and carrying it', async () => {
    const Q = await queue([
      { priority: 1, payload: 'low' },
      { priority: 5, payload: 'high' },
      { priority: 3, payload: 'mid' },
      { priority: 9, payload: 'done already', status: 'done' },
    ]);
    const doc = await Q.lockNext({ status: 'queued' }, 'worker-1', { sort: { priority: -1 } });
    expect(doc!.payload).toBe('high');
    const held = doc!.heldLock();
    expect(held!.owner).toBe('worker-1');
    expect(held!.ttl).toBe(30_000);
    expect(await Q.isLocked(doc!._id)).toBe(true);
    // A single worker without competition claims in exact order.
    expect(payloads([await Q.lockNext({ status: 'queued' }, 'worker-1', { sort: { priority: -1 } })])).toEqual(['mid']);
    expect(payloads([await Q.lockNext({ status: 'queued' }, 'worker-1', { sort: { priority: -1 } })])).toEqual(['low']);
    expect(await Q.lockNext({ status: 'queued' }, 'worker-1', { sort: { priority: -1 } })).toBeNull();
  });

  test('ascending sort on two fields', async () => {
    const t = Date.now();
    const Q = await queue([
      { priority: 2, createdAt: new Date(t + 2), payload: 'b' },
      { priority: 2, createdAt: new Date(t + 1), payload: 'a' },
      { priority: 7, createdAt: new Date(t), payload: 'c' },
    ]);
    const order = [];
    for (let i = 0; i < 3; i++) order.push((await Q.lockNext({}, 'w', { sort: { priority: 1, createdAt: 1 } }))!.payload);
    expect(order).toEqual(['a', 'b', 'c']);
  });

  test('documents locked by others are skipped; an expired lock is free at once', async () => {
    const Q = await queue([{ priority: 3, payload: 'held' }, { priority: 2, payload: 'expired' }, { priority: 1, payload: 'free' }]);
    const [held, expired] = await Promise.all([Q.findOne({ payload: 'held' }), Q.findOne({ payload: 'expired' })]);
    await Q.lock(held!._id, 'someone-else');
    // A lock left by a worker that crashed: long enough to arrive with a lease on a loaded machine
    // (a 50 ms one was refused on arrival at load 16), then waited out.
    await Q.lock(expired!._id, 'crashed-worker', { ttl: 500 });
    expect(await waitUntil(async () => !(await Q.isLocked(expired!._id)), 10_000)).toBe(true);
    expect(payloads([await Q.lockNext({}, 'w', { sort: { priority: -1 } })])).toEqual(['expired']);
    expect(payloads([await Q.lockNext({}, 'w', { sort: { priority: -1 } })])).toEqual(['free']);
    expect(await Q.lockNext({}, 'w', { sort: { priority: -1 } })).toBeNull();
  });

  test('never returns a document the owner itself already holds (nobody may hold it, not even the caller)', async () => {
    const Q = await queue([{ priority: 2, payload: 'mine' }, { priority: 1, payload: 'other' }]);
    const mine = await Q.findOne({ payload: 'mine' });
    await Q.lock(mine!._id, 'worker');
    expect(payloads([await Q.lockNext({}, 'worker', { sort: { priority: -1 } })])).toEqual(['other']);
    expect(await Q.lockNext({}, 'worker')).toBeNull();
    // The first lock is untouched (not renewed under a new token).
    expect((await Q.lockStatus([mine!._id], { owner: 'worker' }))[0]!.mine).toBe(true);
  });

  test('null when nothing matches, with one command (the candidate read)', async () => {
    const Q = await queue([{ status: 'done', payload: 'x' }]);
    conn.resetCommands();
    expect(await Q.lockNext({ status: 'queued' }, 'w')).toBeNull();
    expect(conn.commands).toEqual(['aggregate']);
  });

  test('an empty filter claims any document; no sort claims in whatever order the plan reads', async () => {
    const Q = await queue([{ payload: 'one' }, { payload: 'two' }]);
    const got = [await Q.lockNext({}, 'w'), await Q.lockNext({}, 'w')];
    expect(payloads(got).sort()).toEqual(['one', 'two']);
    expect(await Q.lockNext({}, 'w')).toBeNull();
  });
});

describe('the filter is the query Model.find would run', () => {
  test('values are cast to the schema types (a string priority, an ObjectId string)', async () => {
    const Q = await queue([{ priority: 5, payload: 'five' }, { priority: 6, payload: 'six' }]);
    expect(payloads([await Q.lockNext({ priority: '5' }, 'w')])).toEqual(['five']);
    const six = await Q.findOne({ payload: 'six' });
    expect(payloads([await Q.lockNext({ _id: six!._id.toHexString() }, 'w')])).toEqual(['six']);
  });

  test('strictQuery: true drops unknown paths (as Model.find does); "throw" refuses them before any command', async () => {
    const Strict = await jobModel(conn.connection, undefined, undefined, { strictQuery: true });
    await Strict.create({ payload: 'any' });
    expect((await Strict.find({ noSuchPath: 'x' })).length).toBe(1);
    expect(payloads([await Strict.lockNext({ noSuchPath: 'x' }, 'w')])).toEqual(['any']);
    const Throwing = await jobModel(conn.connection, undefined, undefined, { strictQuery: 'throw' });
    conn.resetCommands();
    await expect(Throwing.lockNext({ noSuchPath: 'x' }, 'w')).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', argument: 'filter' });
    expect(conn.commands).toEqual([]);
  });

  test('a discriminator claims only documents of its own kind', async () => {
    const base = new Schema({ payload: String, kind: String }, { discriminatorKey: 'kind' });
    base.plugin(lockPlugin);
    type Item = { payload: string; kind?: string };
    const Base = conn.connection.model<Item, LockableModel<Item>>('NextBase', base);
    const Email = Base.discriminator<Item, LockableModel<Item>>('NextEmail', new Schema({}));
    await Base.init();
    await Base.lockModel().init();
    await Base.create({ payload: 'plain' });
    await Email.create({ payload: 'email' });
    expect(payloads([await Email.lockNext({}, 'w')])).toEqual(['email']);
    expect(await Email.lockNext({}, 'w')).toBeNull();
    expect(payloads([await Base.lockNext({}, 'w')])).toEqual(['plain']);
  });

  test('a filter that cannot be cast is refused before any command', async () => {
    conn.resetCommands();
    await expect(Job.lockNext({ priority: 'not a number' }, 'w')).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', argument: 'filter' });
    await expect(Job.lockNext({ _id: 'not-an-object-id' }, 'w')).rejects.toMatchObject({ code: 'INVALID_ARGUMENT', argument: 'filter' });
    expect(conn.commands).toEqual([]);
  });

  test('the candidate read is an aggregate with the cast filter first, then the sort, the $lookup anti-join on the lock collection, $limit and $project', async () => {
    const Q = await queue([{ priority: 4, payload: 'x' }]);
    sent.length = 0;
    await Q.lockNext({ status: 'queued', priority: { $gte: '1' } }, 'w', { sort: { priority: -1, createdAt: 1 } });
    const read = sent.find((c) => c.aggregate === Q.collection.collectionName)!;
    const pipeline = read.pipeline as mongo.Document[];
    expect(pipeline[0]).toEqual({ $match: { status: 'queued', priority: { $gte: 1 } } });
    expect(pipeline[1]).toEqual({ $sort: { priority: -1, createdAt: 1 } });
    expect(pipeline[2]).toEqual({
      $lookup: {
        from: Q.lockModel().collection.collectionName,
        localField: '_id',
        foreignField: '_id',
        // Held, or reserved by a waiting group (lock-store.ts freeCandidates): not a candidate.
        pipeline: [{ $match: { $expr: { $or: [{ $gt: ['$expiresAt', '$$NOW'] }, { $gt: ['$reservedUntil', '$$NOW'] }] } } }, { $project: { _id: 1 } }],
        as: 'lock',
      },
    });
    expect(pipeline[3]).toEqual({ $match: { lock: { $size: 0 } } });
    expect(Object.keys(pipeline[4])).toEqual(['$limit']);
    expect(pipeline[5]).toEqual({ $project: { _id: 1 } });
    // One batch that reaches the end of the pipeline: no getMore.
    expect((read.cursor as { batchSize: number }).batchSize).toBe((pipeline[4].$limit as number) + 1);
    // A snapshot read on replica sets (R31); a plain read on a standalone (R34).
    if (onReplicaSet()) expect(read.readConcern).toEqual({ level: 'snapshot' });
    else expect(read.readConcern).toBeUndefined();
    // The load: the filter AND the _id, after the acquisition.
    const names = sent.map((c) => Object.keys(c)[0]);
    expect(names.indexOf('findAndModify')).toBeLessThan(names.lastIndexOf('find'));
    const load = sent.filter((c) => c.find === Q.collection.collectionName).pop()!;
    expect(load.filter).toEqual({ $and: [{ status: 'queued', priority: { $gte: 1 } }, { _id: expect.any(Types.ObjectId) }] });
  });
});

describe('concurrent callers of one process', () => {
  test('20 concurrent calls over 20 free documents get 20 distinct documents, none null, without colliding', async () => {
    const Q = await queue(Array.from({ length: 20 }, (_, i) => ({ priority: i, payload: `job ${i}` })));
    sent.length = 0;
    const got = await Promise.all(Array.from({ length: 20 }, (_, i) => Q.lockNext({ status: 'queued' }, `w${i}`, { sort: { priority: -1 } })));
    expect(got.every((d) => d !== null)).toBe(true);
    expect(new Set(payloads(got)).size).toBe(20);
    // Calls of one process never try the same candidate: one acquisition per claim.
    expect(sent.filter((c) => c.findAndModify === Q.lockModel().collection.collectionName).length).toBe(20);
  });

  test('workers sharing one owner still get distinct documents', async () => {
    const Q = await queue(Array.from({ length: 10 }, (_, i) => ({ priority: i, payload: `job ${i}` })));
    const got = await Promise.all(Array.from({ length: 12 }, () => Q.lockNext({}, 'the-only-owner')));
    const claimed = got.filter((d) => d !== null);
    expect(claimed.length).toBe(10);
    expect(new Set(payloads(claimed)).size).toBe(10);
  });

  test('more callers than documents: the extra ones get null only once every document is held', async () => {
    const Q = await queue(Array.from({ length: 5 }, (_, i) => ({ priority: i, payload: `job ${i}` })));
    const got = await Promise.all(Array.from({ length: 9 }, (_, i) => Q.lockNext({}, `w${i}`)));
    expect(got.filter((d) => d !== null).length).toBe(5);
    const held = await Q.lockStatus((await Q.find()).map((d) => d._id));
    expect(held.every((s) => s !== null)).toBe(true);
  });
});

describe('commands per claim', () => {
  test('one worker: read + acquire + load for the first claim, then acquire + load while its candidates last', async () => {
    const Q = await queue(Array.from({ length: 6 }, (_, i) => ({ priority: i, payload: `job ${i}` })));
    conn.resetCommands();
    await Q.lockNext({}, 'w', { sort: { priority: -1 } });
    expect(conn.commands).toEqual(['aggregate', 'findAndModify', 'find']);
    conn.resetCommands();
    await Q.lockNext({}, 'w', { sort: { priority: -1 } });
    expect(conn.commands).toEqual(['findAndModify', 'find']);
  });
});

describe('what the returned document can do', () => {
  test('saveAndUnlock writes under the lock and releases it; another owner cannot write it meanwhile', async () => {
    const Q = await queue([{ payload: 'work' }]);
    const job = await Q.lockNext({ status: 'queued' }, 'worker');
    await expect(Q.updateOne({ _id: job!._id }, { $set: { payload: 'intruder' } }).setOptions({ lockOwner: 'other' })).rejects.toBeInstanceOf(LockedError);
    job!.status = 'done';
    await job!.saveAndUnlock();
    const stored = await Q.findById(job!._id);
    expect(stored!.status).toBe('done');
    expect(stored!.payload).toBe('work');
    expect(await Q.isLocked(job!._id)).toBe(false);
    expect(await Q.lockNext({ status: 'queued' }, 'worker')).toBeNull();
  });

  test('acquireNext: a handle that renews and releases; null when nothing is free', async () => {
    const Q = await queue([{ payload: 'h' }], { ttl: 5_000 });
    const handle = await Q.acquireNext({}, 'worker');
    expect(handle!.document.payload).toBe('h');
    // Renewed when a third of the ttl is left: wait for the expiry to move (bounded).
    const first = handle!.expiresAt.getTime();
    for (let i = 0; i < 150 && handle!.expiresAt.getTime() === first; i++) await sleep(100);
    expect(handle!.expiresAt.getTime()).toBeGreaterThan(first);
    expect(await Q.isLocked(handle!.document._id)).toBe(true);
    expect(handle!.signal.aborted).toBe(false);
    await handle!.release();
    expect(await Q.isLocked(handle!.document._id)).toBe(false);
    await Q.lock(handle!.document._id, 'someone');
    expect(await Q.acquireNext({}, 'worker')).toBeNull();
  });

  test('withNext runs fn while holding the lock and releases it; resolves null without calling fn when nothing is free', async () => {
    const Q = await queue([{ payload: 'with' }]);
    const result = await Q.withNext({}, 'worker', async (job, signal) => {
      expect(signal.aborted).toBe(false);
      expect(await Q.isLocked(job._id)).toBe(true);
      return `did ${job.payload}`;
    });
    expect(result).toBe('did with');
    const [doc] = await Q.find();
    expect(await Q.isLocked(doc._id)).toBe(false);
    await Q.lock(doc._id, 'someone');
    const fn = jest.fn();
    expect(await Q.withNext({}, 'worker', fn)).toBeNull();
    expect(fn).not.toHaveBeenCalled();
  });

  test('withNext: an error thrown by fn reaches the caller unchanged and the lock is released', async () => {
    const Q = await queue([{ payload: 'boom' }]);
    const failure = new Error('job failed');
    await expect(Q.withNext({}, 'worker', () => Promise.reject(failure))).rejects.toBe(failure);
    const [doc] = await Q.find();
    expect(await Q.isLocked(doc._id)).toBe(false);
  });

  test('unlock after lockNext; a second unlock is reported', async () => {
    const Q = await queue([{ payload: 'u' }]);
    const job = await Q.lockNext({}, 'worker');
    await job!.unlock();
    await expect(job!.unlock()).rejects.toBeInstanceOf(LockNotHeldError);
    // Free again for the next worker.
    expect(payloads([await Q.lockNext({}, 'worker-2')])).toEqual(['u']);
  });

  test('Model.lock by another owner is refused while lockNext holds the document', async () => {
    const Q = await queue([{ payload: 'x' }]);
    const job = await Q.lockNext({}, 'worker');
    await expect(Q.lock(job!._id, 'someone')).rejects.toBeInstanceOf(LockedError);
  });
});
