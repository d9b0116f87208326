/**
 * `lockAll` refuses one document listed twice (InvalidLockArgumentError), and tells "one
 * document" by database name + collection name + `_id` so that one document reached through two
 * connections is caught (lock-all.ts; __tests__/regressions/lock-all-same-document-two-connections.test.ts).
 * But a database name is a name within ONE deployment: two connections to two deployments (two
 * clusters, a live cluster and its archive holding a copy of the document under the same `_id`)
 * reach two documents, and two lock records, that merely share their names. lock-all.ts compared
 * the names alone and refused those two documents as "the same document", before anything was
 * sent: an all-or-nothing lock across two deployments could not be taken at all (before 822327f
 * it could).
 * Needs a second server (a private one of the test backend's kind); skipped, with a printed
 * reason, where none can be started. Runs on a replica set and on a standalone server.
 */
import { Types } from 'mongoose';
import { InvalidLockArgumentError, lockAll } from '../../src';
import { testUri } from '../../test-backend/test-env';
import { replicaSetOnly } from '../support/topology';
import { connect, connectTo, testDatabase, type MonitoredConnection } from '../support/db';
import { twoDeployments } from '../support/two-deployments';
import { workItemModel, type WorkItemModel } from '../support/work-item';

jest.setTimeout(60_000);

const db = testDatabase('lockall_two_deployments');
/** One model name and database name on the shared deployment (`Here`) and on another one (`There`). */
const deployments = twoDeployments(db, 'TwoDeploymentsItem', { ttl: 20_000, what: 'lockAll across two deployments' });
let hereAgain: MonitoredConnection;
/** The shared deployment again, through a second client. */
let HereAgain: WorkItemModel;

beforeAll(async () => {
  hereAgain = await connect(db.name);
  HereAgain = await workItemModel(hereAgain.connection, { ttl: 20_000 }, 'TwoDeploymentsItem');
});

afterAll(async () => {
  await hereAgain.close();
});

test('the same database, collection and _id on two deployments are two documents: locked together, all or nothing', async () => {
  if (deployments.skipped) return;
  const { Here, There } = deployments;
  const id = new Types.ObjectId();
  await Here.create({ _id: id, title: 'live' });
  await There.create({ _id: id, title: 'archive copy' });
  const [live, copy] = await lockAll(
    [
      [Here, id],
      [There, id],
    ],
    'alice',
  );
  expect([live.title, copy.title]).toEqual(['live', 'archive copy']);
  expect([await Here.isLocked(id), await There.isLocked(id)]).toEqual([true, true]);
  await Promise.all([live.unlock(), copy.unlock()]);
});

test('the same deployment through two clients is still one document: refused', async () => {
  const { Here } = deployments;
  const { _id: id } = await Here.create({ title: 'one document' });
  const error = await lockAll(
    [
      [Here, id],
      [HereAgain, id],
    ],
    'bob',
  ).catch((e: unknown) => e);
  expect(error).toBeInstanceOf(InvalidLockArgumentError);
  expect(await Here.isLocked(id)).toBe(false);
});

replicaSetOnly('a replica set names its members in hello.hosts; a standalone server has no such list')(
  'one replica set reached through two clients seeded with different names of its member: one document, refused',
  async () => {
    const seed = new URL(testUri());
    const renamed = seed.hostname === 'localhost' ? '127.0.0.1' : seed.hostname === '127.0.0.1' ? 'localhost' : undefined;
    if (!renamed) return; // no second name known for this host
    const { Here } = deployments;
    seed.hostname = renamed;
    const other = await connectTo(seed.toString(), db.name);
    try {
      const Other = await workItemModel(other.connection, { ttl: 20_000 }, 'TwoDeploymentsItem');
      const { _id: id } = await Here.create({ title: 'one document' });
      const error = await lockAll(
        [
          [Here, id],
          [Other, id],
        ],
        'carol',
      ).catch((e: unknown) => e);
      expect(error).toBeInstanceOf(InvalidLockArgumentError);
      expect(await Here.isLocked(id)).toBe(false);
    } finally {
      await other.close();
    }
  },
);

test('useDb views of one connection: the same database is one document (refused), another database another (locked)', async () => {
  const { here, Here } = deployments;
  const same = here.connection.useDb(db.name, { useCache: false });
  const other = here.connection.useDb(`${db.name}_view`, { useCache: false });
  const Same = await workItemModel(same, { ttl: 20_000 }, 'TwoDeploymentsItem');
  const Other = await workItemModel(other, { ttl: 20_000 }, 'TwoDeploymentsItem');
  try {
    const id = new Types.ObjectId();
    await Here.create({ _id: id, title: 'here' });
    await Other.create({ _id: id, title: 'other database' });
    const refused = await lockAll(
      [
        [Here, id],
        [Same, id],
      ],
      'dave',
    ).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(InvalidLockArgumentError);
    const [a, b] = await lockAll(
      [
        [Here, id],
        [Other, id],
      ],
      'dave',
    );
    expect([a.title, b.title]).toEqual(['here', 'other database']);
    await Promise.all([a.unlock(), b.unlock()]);
  } finally {
    await other.dropDatabase();
  }
});

test('two models sharing one lock collection (plugin option `collection`): the same _id is one lock, refused', async () => {
  const One = await workItemModel(deployments.here.connection, { ttl: 20_000, collection: 'shared_locks_two_deployments' }, 'SharedLocksOne');
  const Two = await workItemModel(hereAgain.connection, { ttl: 20_000, collection: 'shared_locks_two_deployments' }, 'SharedLocksTwo');
  const id = new Types.ObjectId();
  await One.create({ _id: id, title: 'one' });
  await Two.create({ _id: id, title: 'two' });
  const error = await lockAll(
    [
      [One, id],
      [Two, id],
    ],
    'erin',
  ).catch((e: unknown) => e);
  expect(error).toBeInstanceOf(InvalidLockArgumentError);
  expect(await One.isLocked(id)).toBe(false);
});
