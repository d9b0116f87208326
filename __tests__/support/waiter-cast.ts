/**
 * The cast of the reservation tests that stall one waiter's commands: a holder H (on the admin
 * connection, which also arms failCommand), an older waiter O on a connection of its own appName
 * (so a fail point can target its commands alone) and a younger waiter Y, each a model of the same
 * name on its own connection. Opened in beforeAll; the fail point turned off, the database dropped
 * and the connections closed in afterAll.
 */
import { failPointOff } from '../plugin/guard/support';
import { connect, testDatabase, type MonitoredConnection } from './db';
import { workItemModel, type WorkItemModel } from './work-item';

export interface WaiterCast {
  admin: MonitoredConnection;
  H: WorkItemModel;
  O: WorkItemModel;
  Y: WorkItemModel;
  /** The appName of O's connection. */
  oApp: string;
  /** The database's name. */
  dbName: string;
}

/** Registers the hooks; the returned object's connections and models are set once beforeAll ran. */
export function waiterCast(dbName: string, modelName: string, ttl: number): WaiterCast {
  const db = testDatabase(dbName);
  const cast = { oApp: `mpl-${modelName.toLowerCase()}-o-${process.pid}`, dbName: db.name } as WaiterCast;
  let oConn: MonitoredConnection;
  let yConn: MonitoredConnection;
  beforeAll(async () => {
    cast.admin = await connect(db.name);
    oConn = await connect(db.name, { appName: cast.oApp });
    yConn = await connect(db.name);
    const options = { ttl, ownerStorage: 'plain' as const };
    cast.H = await workItemModel(cast.admin.connection, options, modelName);
    cast.O = await workItemModel(oConn.connection, options, modelName);
    cast.Y = await workItemModel(yConn.connection, options, modelName);
  });
  afterAll(async () => {
    await failPointOff(cast.admin.connection).catch(() => undefined);
    await db.drop(cast.admin.connection);
    await Promise.all([cast.admin.close(), oConn.close(), yConn.close()]);
  });
  return cast;
}
