/**
 * Two deployments at once: the shared test deployment (`here`) and a private server of the test
 * backend's kind (`there`), each with a work-item model of ONE model name and database name, for
 * the tests that pin what the plugin keys by deployment (leases, the open-transaction registry,
 * lockAll's "same document"). Registers its own beforeAll/afterAll; where no second server can be
 * started (or it would be the test deployment itself), `skipped` says why, it is printed once, and
 * the tests return early.
 */
import { startPrivateBackend, testTopology, testUri } from '../../test-backend/test-env';
import { connect, connectTo, type MonitoredConnection, type testDatabase } from './db';
import { onReplicaSet } from './topology';
import { workItemModel, type WorkItemModel } from './work-item';

export interface TwoDeployments {
  here: MonitoredConnection;
  there: MonitoredConnection;
  Here: WorkItemModel;
  There: WorkItemModel;
  /** Why the second deployment is missing (the tests then return early), if so. */
  skipped?: string;
}

export function twoDeployments(
  db: ReturnType<typeof testDatabase>,
  modelName: string,
  options: { ttl: number; what: string; replicaSetOnly?: boolean },
): TwoDeployments {
  const fixture = {} as TwoDeployments;
  let server: { uri: string; stop(): Promise<void> } | undefined;
  beforeAll(async () => {
    fixture.here = await connect(db.name);
    fixture.Here = await workItemModel(fixture.here.connection, { ttl: options.ttl }, modelName);
    if (options.replicaSetOnly && !onReplicaSet()) {
      fixture.skipped = 'needs a replica set';
      return;
    }
    const started = await startPrivateBackend(testTopology());
    if ('unsupported' in started || started.uri === testUri()) {
      fixture.skipped = 'unsupported' in started ? started.unsupported : 'the second server is the test deployment itself';
      process.stdout.write(`[skipped] ${options.what}: no second server (${fixture.skipped})\n`);
      if (!('unsupported' in started)) await started.stop();
      return;
    }
    server = started;
    fixture.there = await connectTo(server.uri, db.name);
    fixture.There = await workItemModel(fixture.there.connection, { ttl: options.ttl }, modelName);
  }, 60_000);
  afterAll(async () => {
    await db.drop(fixture.here.connection);
    await Promise.all([fixture.here.close(), fixture.there?.close()]);
    await server?.stop();
  });
  return fixture;
}
