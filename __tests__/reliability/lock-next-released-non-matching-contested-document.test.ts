/**
 * A waiting `lockNext` call that lost the race for a document (merge e94fb1b: `contested` in
 * lock-next.ts claimNext) claims it directly when the feed reports a change of its lock record,
 * without reading first. The usual job pattern is: the holder marks the job done and releases it
 * (`saveAndUnlock`: the document write, then the release). Then the job no longer matches the
 * worker's filter before the release happens, so a read after the release would never propose it;
 * the direct claim locks it anyway, loads it, finds it not matching and gives it back.
 *
 *  1. During that claim the finished job is locked by a worker that never wanted it: another
 *     user's Model.lock (and every guarded write) is refused (property 10: refusals only because of
 *     someone else's lock on a document that user has business with; before e94fb1b this only
 *     happened in the read-to-claim race window, now on every such release).
 *  2. Each such claim counts as a "miss" (MISS_LIMIT, REVISIT_LIMIT): after four of them in one
 *     waiting call the job is excluded from the call's reads for good, and the call answers null
 *     while the job is free and matching (property 14).
 *
 * The race for the document is made deterministic as in
 * lock-next-claims-contested-document-on-release.test.ts: failCommand blockConnection on the
 * worker's claim (mongod src/mongo/db/commands/fail_point_cmd.cpp) while another owner locks it.
 * The feed needs change streams: replica sets only.
 */
import { blockCommands } from '../plugin/guard/support';
import { appUnderFailPoints } from '../support/fail-point-app';
import { usesPrivateServer } from '../support/private-server';
import { nextCommandSent, sleep, testDatabase, type MonitoredConnection } from '../support/db';
import { replicaSetOnly } from '../support/topology';
import { workItemModel, type WorkItemModel } from '../support/work-item';

type Held = Awaited<ReturnType<WorkItemModel['lock']>>;

usesPrivateServer();
jest.setTimeout(180_000);

const APP = 'next-released-non-matching';
const db = testDatabase('next_rnm');
const connections = appUnderFailPoints(db, APP);
let admin: MonitoredConnection;
let worker: MonitoredConnection;
beforeAll(() => ({ admin, app: worker } = connections));

/** Holds the worker's next `command` on `namespace` for `blockTimeMS` (failCommand blockConnection, once). */
const failPoint = (command: string, namespace: string, blockTimeMS: number) => blockCommands(admin.connection, { appName: APP, namespace, commands: [command], blockTimeMS });

/**
 * The worker (waiting in lockNext({ status: 'open' })) finds `id` free, but its claim is held back
 * while 'holder' locks it: the worker's claim is refused (it remembers the document as contested),
 * it reads again (none free) and waits. Returns the holder's document.
 */
async function loseRace(Admin: WorkItemModel, id: unknown, locks: string): Promise<Held> {
  await failPoint('findAndModify', `${db.name}.${locks}`, 1_500);
  // The job (re)appears: free and matching; the feed wakes the worker, which reads it and claims it.
  const claimSent = nextCommandSent(worker, 'findAndModify', locks);
  await Admin.updateOne({ _id: id }, { $set: { status: 'open' } });
  await claimSent;
  const holder = await Admin.lock(id as Parameters<WorkItemModel['lock']>[0], 'holder');
  // The worker's claim is refused; it reads (held: none) and waits on the feed.
  await sleep(3_000);
  return holder;
}

replicaSetOnly('the lockNext feed is a change stream')('a job finished and released while a waiting worker had lost the race for it is not locked by that worker', async () => {
  const Admin = await workItemModel(admin.connection, { ttl: 30_000 }, 'NextRnmOne');
  const Worker = await workItemModel(worker.connection, { ttl: 30_000 }, 'NextRnmOne');
  const [job] = (await Admin.insertMany([{ title: 'job', status: 'done' }])).map((x) => x._id);
  const locks = Admin.lockModel().collection.collectionName;
  const items = Admin.collection.collectionName;
  const controller = new AbortController();
  const claimed = Worker.lockNext({ status: 'open' }, 'worker', { wait: 60_000, signal: controller.signal }).catch((error: unknown) => error);
  await sleep(500);
  const holder = await loseRace(Admin, job, locks);
  // The worker's load (a `find` on the model's collection) is held back 2 s, widening its hold.
  await failPoint('find', `${db.name}.${items}`, 2_000);
  holder.status = 'done';
  await holder.saveAndUnlock();
  // The job no longer matches the worker's filter since before its release; nobody else holds it.
  await sleep(500);
  let outcome: string;
  try {
    const other = await Admin.lock(job!, 'someone-else');
    outcome = 'locked';
    await other.unlock();
  } catch (error) {
    outcome = `refused: ${(error as Error).name}`;
  }
  controller.abort();
  await claimed;
  expect(outcome).toBe('locked');
});

replicaSetOnly('the lockNext feed is a change stream')('a waiting worker that lost the race for a job four times, each finished by its holder, still claims it when it is free and matching again', async () => {
  const Admin = await workItemModel(admin.connection, { ttl: 30_000 }, 'NextRnmTwo');
  const Worker = await workItemModel(worker.connection, { ttl: 30_000 }, 'NextRnmTwo');
  const [job] = (await Admin.insertMany([{ title: 'recurring job', status: 'done' }])).map((x) => x._id);
  const locks = Admin.lockModel().collection.collectionName;
  const controller = new AbortController();
  let settledAt = Infinity;
  const claimed = Worker.lockNext({ status: 'open' }, 'worker', { wait: 120_000, signal: controller.signal }).then(
    (doc) => ((settledAt = performance.now()), doc),
    (error: unknown) => ((settledAt = performance.now()), error),
  );
  await sleep(500);
  for (let cycle = 0; cycle < 4; cycle++) {
    const holder = await loseRace(Admin, job, locks);
    // The holder finishes the job (no longer matching) and releases it.
    holder.status = 'done';
    await holder.saveAndUnlock();
    await sleep(1_500);
    expect(settledAt).toBe(Infinity);
  }
  // The job is re-queued: free and matching, nobody holds it. The waiting worker must claim it.
  await Admin.updateOne({ _id: job }, { $set: { status: 'open' } });
  const got = await Promise.race([claimed, sleep(15_000).then(() => 'not served within 15 s')]);
  controller.abort();
  await claimed;
  expect(typeof got === 'string' ? got : String((got as { _id?: unknown } | null)?._id)).toBe(String(job));
});

replicaSetOnly('the lockNext feed is a change stream')("a holder's guarded saves free nothing: a waiting worker that lost the race for the document sends no claim for them", async () => {
  const Admin = await workItemModel(admin.connection, { ttl: 30_000 }, 'NextRnmThree');
  const Worker = await workItemModel(worker.connection, { ttl: 30_000 }, 'NextRnmThree');
  const [job] = (await Admin.insertMany([{ title: 'job', status: 'done' }])).map((x) => x._id);
  const locks = Admin.lockModel().collection.collectionName;
  const controller = new AbortController();
  const claimed = Worker.lockNext({ status: 'open' }, 'worker', { wait: 60_000, signal: controller.signal }).catch((error: unknown) => error);
  await sleep(500);
  const holder = await loseRace(Admin, job, locks);
  let claims = 0;
  const listener = (event: { commandName: string; command: Record<string, unknown> }) => {
    if (event.commandName === 'findAndModify' && event.command.findAndModify === locks) claims++;
  };
  worker.connection.getClient().on('commandStarted', listener);
  try {
    // The holder keeps the job and saves it five times (guarded writes; nothing is released).
    for (let i = 0; i < 5; i++) {
      holder.edits = i + 1;
      await holder.save();
      await sleep(300);
    }
    await sleep(1_500);
  } finally {
    worker.connection.getClient().off('commandStarted', listener);
  }
  controller.abort();
  await claimed;
  await holder.unlock();
  expect(claims).toBe(0);
});
