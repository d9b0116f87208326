/**
 * The two connections of a test that stalls or fails one client's commands: the client's own, under
 * an appName of its own (what `failCommand`'s `appName` filter picks: mongod
 * src/mongo/db/commands/fail_point_cmd.cpp, the failCommand data's appName), and an admin connection
 * that arms the fail point and that the fail point leaves alone. beforeAll opens both; afterAll
 * turns failCommand off, drops the test database and closes both.
 */
import { connect, type MonitoredConnection, type testDatabase } from './db';

export interface AppUnderFailPoints {
  admin: MonitoredConnection;
  app: MonitoredConnection;
}

export function appUnderFailPoints(db: ReturnType<typeof testDatabase>, appName: string): AppUnderFailPoints {
  const pair = {} as AppUnderFailPoints;
  beforeAll(async () => {
    pair.admin = await connect(db.name);
    pair.app = await connect(db.name, { appName });
  });
  afterAll(async () => {
    await pair.admin.connection.getClient().db('admin').command({ configureFailPoint: 'failCommand', mode: 'off' });
    await db.drop(pair.admin.connection);
    await pair.app.close();
    await pair.admin.close();
  });
  return pair;
}
