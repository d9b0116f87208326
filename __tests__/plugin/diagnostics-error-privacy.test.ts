/**
 * No diagnostics message carries an owner, an owner key or a token, including through the error a
 * traced call publishes (`LockTraceContext.error`) and what is reachable from it (`cause`, the
 * driver's write errors and the operations they name), as a subscriber that logs it would see it
 * (util.inspect with depth, JSON.stringify).
 *
 * A lock collection whose validator refuses the lock record is a database fault the plugin hands
 * on as LockDatabaseError with the driver's error as `cause`. For a group acquisition (lockMany,
 * one `update` of many statements sent through bulkWrite) the driver's MongoBulkWriteError keeps,
 * for each write error, the statement that failed (mongodb/lib/bulk/common.js mergeBatchResults:
 * `op: batch.operations[index]`), that is the lock record's pipeline with the owner key and the
 * token as literals. mongod validates pipeline-update upserts against the collection's validator
 * (DocumentValidationFailure 121; src/mongo/db/update/update_driver.cpp / collection validation).
 */
import * as dc from 'node:diagnostics_channel';
import { inspect } from 'node:util';
import { createHash } from 'node:crypto';
import { mongo, type Types } from 'mongoose';
import { LockDatabaseError, type LockTraceContext } from '../../src';
import { connect, testDatabase, type MonitoredConnection } from '../support/db';
import { testUri } from '../../test-backend/test-env';
import { workItemModel, type WorkItemModel } from '../support/work-item';

const KINDS = ['lock', 'lockNext', 'lockMany', 'unlock', 'releaseAllFor', 'write'] as const;

const db = testDatabase('diagerrprivacy');
let conn: MonitoredConnection;
let WorkItem: WorkItemModel;

beforeAll(async () => {
  conn = await connect(db.name);
  WorkItem = await workItemModel(conn.connection, { ttl: 30_000 });
});
afterAll(async () => {
  await db.drop(conn.connection);
  await conn.close();
});

function recordErrors(): { texts: string[]; stop(): void } {
  const texts: string[] = [];
  const undo: (() => void)[] = [];
  for (const kind of KINDS) {
    const channel = dc.tracingChannel<object, LockTraceContext>(`mongoose-pessimistic-lock:${kind}`);
    const noop = (): void => undefined;
    const subscribers = {
      start: noop,
      end: noop,
      asyncStart: noop,
      asyncEnd: noop,
      error: (message: LockTraceContext) => {
        const error = message.error as { cause?: unknown } | undefined;
        texts.push(`${inspect(message, { depth: 12 })}\n${inspect(error?.cause, { depth: 12 })}\n${JSON.stringify(error?.cause ?? null)}`);
      },
    };
    channel.subscribe(subscribers);
    undo.push(() => channel.unsubscribe(subscribers));
  }
  return { texts, stop: () => undo.forEach((fn) => fn()) };
}

test("a group acquisition's database error on the lockMany channel carries no owner key or token", async () => {
  const owner = 'owner-secret-group-4e2b';
  const ids: Types.ObjectId[] = (await WorkItem.create([{ title: 'a' }, { title: 'b' }])).map((d) => d._id);
  const locks = WorkItem.lockModel().collection.collectionName;
  // A validator the lock records cannot satisfy: every statement of the group's update fails with 121.
  // Sent on a client of its own: the test's doing, not a command of the plugin's (the recorder of
  // lock-collection commands watches the test connections only).
  const raw = new mongo.MongoClient(testUri());
  const setValidator = (validator: object) => raw.db(db.name).command({ collMod: locks, validator });
  await setValidator({ owner: { $type: 'int' } });
  const recorder = recordErrors();
  let rejected: unknown;
  try {
    rejected = await WorkItem.lockMany(ids, owner).then(
      () => undefined,
      (error: unknown) => error,
    );
  } finally {
    recorder.stop();
    await setValidator({});
    await raw.close();
  }
  expect(rejected).toBeInstanceOf(LockDatabaseError);
  expect(recorder.texts).toHaveLength(1);
  // The owner key as the plugin stores it (owner-key.ts: SHA-256, base64url).
  const ownerKey = createHash('sha256').update(owner).digest('base64url');
  for (const text of recorder.texts) {
    expect({ leaksOwner: text.includes(owner), leaksOwnerKey: text.includes(ownerKey) }).toEqual({ leaksOwner: false, leaksOwnerKey: false });
    // The token: the failed statement (`op`) sets `token` to `{ $literal: <token> }`.
    expect({ failedStatementShown: text.includes('"op":') }).toEqual({ failedStatementShown: false });
  }
});

test("a single lock's database error on the lock channel carries no owner key", async () => {
  const owner = 'owner-secret-single-8d1c';
  const id = (await WorkItem.create({ title: 'c' }))._id;
  const locks = WorkItem.lockModel().collection.collectionName;
  const raw = new mongo.MongoClient(testUri());
  const setValidator = (validator: object) => raw.db(db.name).command({ collMod: locks, validator });
  // mongod's DocumentValidationFailure names the value that failed (errInfo.details.consideredValue,
  // src/mongo/db/matcher/doc_validation_error.cpp): here the stored owner key.
  await setValidator({ owner: { $type: 'int' } });
  const recorder = recordErrors();
  let rejected: unknown;
  try {
    rejected = await WorkItem.lock(id, owner).then(
      () => undefined,
      (error: unknown) => error,
    );
  } finally {
    recorder.stop();
    await setValidator({});
    await raw.close();
  }
  expect(rejected).toBeInstanceOf(LockDatabaseError);
  expect(recorder.texts).toHaveLength(1);
  const ownerKey = createHash('sha256').update(owner).digest('base64url');
  expect({ leaksOwnerKey: recorder.texts[0]!.includes(ownerKey) }).toEqual({ leaksOwnerKey: false });
});

test("a guarded write's database error on the write channel carries no owner key", async () => {
  const owner = 'owner-secret-write-51aa';
  const id = (await WorkItem.create({ title: 'w' }))._id;
  const item = await WorkItem.lock(id, owner);
  const locks = WorkItem.lockModel().collection.collectionName;
  const raw = new mongo.MongoClient(testUri());
  const setValidator = (validator: object) => raw.db(db.name).command({ collMod: locks, validator });
  await setValidator({ owner: { $type: 'int' } });
  const recorder = recordErrors();
  let rejected: unknown;
  try {
    item.title = 'guarded';
    rejected = await item.saveAndUnlock().then(
      () => undefined,
      (error: unknown) => error,
    );
  } finally {
    recorder.stop();
    await setValidator({});
    await raw.close();
  }
  expect(rejected).toBeInstanceOf(Error);
  expect(recorder.texts.length).toBeGreaterThan(0);
  const ownerKey = createHash('sha256').update(owner).digest('base64url');
  expect(recorder.texts.map((text) => text.includes(ownerKey))).toEqual(recorder.texts.map(() => false));
  await WorkItem.forceUnlock(id);
});
